"""The C/C++ package (cmake/install.cmake): `cmake --install` of the build tree into a temporary prefix, then
C programs built against that prefix only, and run: with CMake's find_package(softdla) (softdla::cudla and
the CUDA::cudla alias), with pkg-config, and with NVIDIA's unchanged cuDLAHybridMode sample CMakeLists.txt
(find_library(CUDLA_LIB cudla ...)) given only CMAKE_PREFIX_PATH / CMAKE_LIBRARY_PATH and the include path.

Each program prints which libcudla.so.1 it runs on (dladdr), and the test checks that it is the installed one.
"""
import os
import re
import shutil
import subprocess

import pytest

from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
# NVIDIA's cuDLA samples, unchanged, in shared/ beside the repository (a developer's checkout and CI's clone).
SAMPLES = os.environ.get("SOFTDLA_NVIDIA_SAMPLES", os.path.join(ROOT, "..", "shared", "nvidia-cuda-samples-cudla"))
HYBRID_SAMPLE = os.path.join(SAMPLES, "Samples", "8_Platform_Specific", "Tegra", "cuDLAHybridMode")

APP_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "cudla.h"
#include "softdla/cudla_ext.h"

int main(void) {
  uint64_t version = 0, devices = 0;
  const cudlaStatus s1 = cudlaGetVersion(&version);
  const cudlaStatus s2 = cudlaDeviceGetCount(&devices);
  Dl_info info;
  if (!dladdr((void*)&cudlaGetVersion, &info) || !info.dli_fname) return 3;
  printf("version %llu status %d devices %llu status %d\n", (unsigned long long)version, (int)s1,
         (unsigned long long)devices, (int)s2);
  printf("library %s\n", info.dli_fname);
  return s1 != cudlaSuccess || s2 != cudlaSuccess;
}
"""

APP_CMAKE = """cmake_minimum_required(VERSION 3.18)
project(softdla_consumer C)
find_package(softdla 0.1 REQUIRED)
add_executable(app app.c)
target_link_libraries(app PRIVATE softdla::cudla ${CMAKE_DL_LIBS})
add_executable(app_alias app.c)
target_link_libraries(app_alias PRIVATE CUDA::cudla ${CMAKE_DL_LIBS})
"""


def _sanitized_build():
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            return bool(re.search(r"^SOFTDLA_SANITIZE:\w+=\S", f.read(), re.M))
    except OSError:
        return False


pytestmark = pytest.mark.skipif(_sanitized_build(), reason="the package is checked on the release build")
ENV = {**os.environ, "SOFTDLA_LOG": "none", "SOFTDLA_NUM_DEVICES": "2"}
ENV.pop("LD_LIBRARY_PATH", None)  # the programs must find the installed library by themselves
ENV.pop("LD_PRELOAD", None)


def _run(cmd, cwd=None, env=ENV, check=True):
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if check:
        assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if shutil.which("cmake") is None:
        pytest.skip("cmake not installed")
    p = tmp_path_factory.mktemp("prefix")
    _run(["cmake", "--install", BUILD, "--prefix", str(p)])
    return p


def _check_app_output(out, prefix):
    lines = out.strip().splitlines()
    m = re.fullmatch(r"version (\d+) status 0 devices (\d+) status 0", lines[0])
    assert m, out
    assert int(m.group(1)) > 0 and int(m.group(2)) == 2, out
    library = lines[1].removeprefix("library ")
    assert os.path.realpath(library) == os.path.realpath(os.path.join(prefix, "lib", "libcudla.so.1")), out


def test_install_tree_layout(prefix):
    lib = prefix / "lib"
    assert (lib / "libcudla.so.1").is_file()
    assert os.readlink(lib / "libcudla.so") == "libcudla.so.1"  # the link -lcudla finds
    assert (prefix / "include" / "cudla.h").is_file()
    assert (prefix / "include" / "softdla" / "cudla_ext.h").is_file()
    assert (prefix / "include" / "cudlaExternalEtbl.hpp").is_file()  # NVIDIA's layer-wise samples include it
    assert (lib / "cmake" / "softdla" / "softdlaConfig.cmake").is_file()
    assert (lib / "cmake" / "softdla" / "softdlaConfigVersion.cmake").is_file()
    assert (lib / "pkgconfig" / "cudla.pc").is_file()
    assert os.access(prefix / "bin" / "softdla", os.X_OK)
    # Only the public headers: the engine's internal C entry points stay in the source tree.
    assert sorted(p.name for p in (prefix / "include").rglob("*.h")) == ["cudla.h", "cudla_ext.h", "cudla_status_name.h",
                                                                          "nvscibuf.h", "nvscierror.h", "nvscisync.h"]
    for nvsci in ("libnvscibuf", "libnvscisync"):  # standalone mode: beside libcudla.so.1, where it looks
        assert (lib / f"{nvsci}.so.1").is_file() and os.readlink(lib / f"{nvsci}.so") == f"{nvsci}.so.1"
    # The CUDA plugin, where it is built, sits next to libcudla.so.1: that is where the runtime looks.
    assert (lib / "libsoftdla_cuda.so").is_file() == os.path.isfile(os.path.join(BUILD, "libsoftdla_cuda.so"))
    # The installed command runs from the prefix.
    r = _run([str(prefix / "bin" / "softdla"), "inspect", os.path.join(ROOT, "examples", "models", "bars.loadable")])
    assert "probabilities" in r.stdout


def test_cmake_find_package(prefix, tmp_path):
    (tmp_path / "app.c").write_text(APP_C)
    (tmp_path / "CMakeLists.txt").write_text(APP_CMAKE)
    _run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), f"-DCMAKE_PREFIX_PATH={prefix}"])
    _run(["cmake", "--build", str(tmp_path / "b")])
    for exe in ("app", "app_alias"):  # CMake's build RPATH finds the library: no LD_LIBRARY_PATH
        _check_app_output(_run([str(tmp_path / "b" / exe)]).stdout, prefix)


def test_cmake_version_check(prefix, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\n"
                                             "find_package(softdla 99 REQUIRED)\n")
    r = _run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "b"), f"-DCMAKE_PREFIX_PATH={prefix}"], check=False)
    assert r.returncode != 0 and "version: 0.1" in r.stderr and "softdlaConfig.cmake" in r.stderr, r.stderr


@pytest.mark.skipif(shutil.which("pkg-config") is None, reason="pkg-config not installed")
def test_pkg_config(prefix, tmp_path):
    (tmp_path / "app.c").write_text(APP_C)
    # Relocatable: the same tree copied elsewhere answers with its new location.
    moved = tmp_path / "moved"
    shutil.copytree(prefix, moved, symlinks=True)
    for root in (prefix, moved):
        env = {**ENV, "PKG_CONFIG_PATH": str(root / "lib" / "pkgconfig")}
        flags = _run(["pkg-config", "--cflags", "--libs", "cudla"], env=env).stdout.split()
        libdir = _run(["pkg-config", "--variable=libdir", "cudla"], env=env).stdout.strip()
        assert os.path.realpath(libdir) == os.path.realpath(root / "lib")
        assert _run(["pkg-config", "--modversion", "cudla"], env=env).stdout.strip().startswith("0.")
        exe = tmp_path / f"app_{root.name}"
        _run(["cc", str(tmp_path / "app.c"), "-o", str(exe), *flags, f"-Wl,-rpath,{libdir}"], env=env)
        _check_app_output(_run([str(exe)]).stdout, root)


def _gpu_present():
    return shutil.which("nvidia-smi") is not None and _run(["nvidia-smi", "-L"], check=False).returncode == 0


@pytest.mark.skipif(not os.path.isdir(HYBRID_SAMPLE), reason=f"NVIDIA's samples not found at {SAMPLES}")
def test_nvidia_sample_cmakelists(prefix, tmp_path):
    """NVIDIA's cuDLAHybridMode CMakeLists.txt, unchanged, finds libcudla through CMAKE_PREFIX_PATH and
    CMAKE_LIBRARY_PATH, compiles main.cu against softdla's cudla.h and links the installed library. The
    sample needs the CUDA toolkit (its project() enables CUDA); with no GPU it stops at its first CUDA call
    (cudaFree(0)), with one it runs the bundled model."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.access("/usr/local/cuda/bin/nvcc", os.X_OK) else None)
    if nvcc is None:
        pytest.skip("the sample needs the CUDA toolkit (nvcc)")
    b = tmp_path / "b"
    _run(["cmake", "-S", HYBRID_SAMPLE, "-B", str(b), f"-DCMAKE_CUDA_COMPILER={nvcc}",
          f"-DCMAKE_PREFIX_PATH={prefix}", f"-DCMAKE_LIBRARY_PATH={prefix / 'lib'}",
          f"-DCMAKE_CUDA_FLAGS=-I{prefix / 'include'}"])
    cache = (b / "CMakeCache.txt").read_text()
    found = re.search(r"^CUDLA_LIB:FILEPATH=(.*)$", cache, re.M)
    assert found and os.path.realpath(found.group(1)) == os.path.realpath(prefix / "lib" / "libcudla.so.1"), found
    _run(["cmake", "--build", str(b), "-j", "2"])
    exe = b / "cuDLAHybridMode"
    ldd = _run(["ldd", str(exe)]).stdout
    m = re.search(r"libcudla\.so\.1 => (\S+)", ldd)
    assert m and os.path.realpath(m.group(1)) == os.path.realpath(prefix / "lib" / "libcudla.so.1"), ldd
    loadable = os.path.join(ROOT, "examples", "models", "bars.loadable")
    r = _run([str(exe), loadable, "unused-image"], check=False)
    if _gpu_present():
        assert r.returncode == 0 and "cuDLAHybridMode DONE" in r.stdout, r.stdout + r.stderr
    else:
        assert "Error in creating cudaFree" in r.stdout, r.stdout + r.stderr


def test_python_paths_in_a_source_tree():
    """softdla.get_include() & co. (softdla/paths.py) from the source tree: the repository's headers and the
    build's library; the CMake and pkg-config files exist only in an installed package (scripts/check_wheel.sh
    checks those)."""
    import softdla
    assert softdla.get_include() == os.path.join(ROOT, "include")
    assert os.path.samefile(softdla.get_library_dir(), BUILD)
    for getter in (softdla.get_cmake_dir, softdla.get_pkgconfig_dir):
        with pytest.raises(FileNotFoundError, match="installed softdla"):
            getter()


@pytest.mark.parametrize("sample", ["cuDLAStandaloneMode", "cuDLALayerwiseStatsStandalone"])
def test_nvidia_standalone_sample_on_the_install_tree(prefix, tmp_path, sample):
    """NVIDIA's standalone-mode samples, unchanged, built through their own CMakeLists.txt against the
    installed libcudla.so.1, libnvscibuf.so.1, libnvscisync.so.1 and headers, and run to DONE (no GPU needed)."""
    script = os.path.join(ROOT, "tests", "cpp", "nvidia_standalone_sample.sh")
    r = _run(["bash", script, sample, str(prefix / "lib"), str(prefix / "include"), str(tmp_path),
              os.path.join(ROOT, "examples", "models", "bars.loadable")], check=False)
    if r.returncode == 77:
        pytest.skip(r.stdout.strip().splitlines()[-1])
    assert r.returncode == 0 and f"{sample} DONE" in r.stdout, r.stdout + r.stderr
