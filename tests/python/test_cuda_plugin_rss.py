"""Without a usable GPU, libcudla.so.1 must not load the CUDA plugin (issue 17): the plugin maps the
CUDA runtime and cuBLASLt, ~150 MB of resident memory per process, and only then found no driver. The
driver is now asked first (libcuda.so.1: cuInit, cuDeviceGetCount). Measured here as the VmRSS growth of
a fresh process over cudlaGetVersion + cudlaCreateDevice, and as the libraries mapped: none of the
plugin's. The RSS bound (80 MB) sits between a release build's growth (about 3 MB), an ASan build's
(about 42 MB: the runtime's shadow pages) and the plugin's 150 MB."""
import ctypes
import glob
import os
import subprocess
import sys

import pytest

from sdla_testkit.engine import ROOT

BUILD = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(ROOT, "build"))
LIBCUDLA = os.path.join(BUILD, "libcudla.so.1")

PROBE = r"""
import ctypes, sys
def rss_kb():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1])
before = rss_kb()
lib = ctypes.CDLL(sys.argv[1])
version, dev = ctypes.c_uint64(), ctypes.c_void_p()
assert lib.cudlaGetVersion(ctypes.byref(version)) == 0
assert lib.cudlaCreateDevice(ctypes.c_uint64(0), ctypes.byref(dev), ctypes.c_uint32(1)) == 0  # CUDLA_CUDA_DLA
print(rss_kb() - before)
cuda_libraries = ("libsoftdla_cuda", "libcudart", "libcublas")
print(" ".join(sorted({l.split()[-1] for l in open("/proc/self/maps") if any(n in l for n in cuda_libraries)})))
"""

# Between a build's own growth, sanitizers included, and the CUDA plugin's ~150 MB.
RSS_BOUND_KB = 80_000


def gpu_present():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def rss_growth_kb(extra_env):
    env = dict(os.environ, SOFTDLA_LOG="info", **extra_env)
    r = subprocess.run([sys.executable, "-c", PROBE, LIBCUDLA], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    growth, mapped = (r.stdout + "\n").split("\n")[:2]
    assert not mapped.strip(), f"CUDA libraries mapped without a usable GPU: {mapped}\n{r.stderr}"
    return int(growth), r.stderr


def test_no_gpu_no_plugin():
    # Run in a child so this process never initialises CUDA itself.
    if subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r});"
                       "from test_cuda_plugin_rss import gpu_present; sys.exit(0 if gpu_present() else 1)"]).returncode == 0:
        pytest.skip("a GPU is present: the CUDA plugin is meant to load")
    growth, log = rss_growth_kb({})
    assert "CUDA backend unavailable" in log, log
    assert growth < RSS_BOUND_KB, f"RSS grew {growth} kB without a GPU (the CUDA plugin was loaded?)\n{log}"


def test_driver_without_gpu_no_plugin(tmp_path):
    # The toolkit's stub driver is a libcuda whose cuInit fails, as on a machine with a driver and no GPU.
    stubs = sorted(glob.glob("/usr/local/cuda*/lib64/stubs/libcuda.so") + glob.glob("/usr/local/cuda*/targets/*/lib/stubs/libcuda.so"))
    if not stubs:
        pytest.skip("no CUDA toolkit stub driver to stand in for a driver without a GPU")
    os.symlink(stubs[0], tmp_path / "libcuda.so.1")
    path = os.environ.get("LD_LIBRARY_PATH", "")
    growth, log = rss_growth_kb({"LD_LIBRARY_PATH": f"{tmp_path}:{path}" if path else str(tmp_path)})
    assert "CUDA backend unavailable: the CUDA driver found no usable GPU (cuInit error" in log, log
    assert growth < RSS_BOUND_KB, f"RSS grew {growth} kB with a driver but no GPU\n{log}"
