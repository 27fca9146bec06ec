"""Where the installed package keeps what a C/C++ program needs to use softdla's cuDLA runtime.

    cc app.c -I"$(python -c 'import softdla; print(softdla.get_include())')" \
       -L"$LIBDIR" -lcudla -Wl,-rpath,"$LIBDIR"        # LIBDIR=$(python -c '... get_library_dir()')
    cmake -DCMAKE_PREFIX_PATH="$(python -c 'import softdla; print(softdla.get_cmake_dir())')" ...
    PKG_CONFIG_PATH="$(python -c '... get_pkgconfig_dir()')" pkg-config --cflags --libs cudla

The wheel holds cudla.h and softdla/cudla_ext.h under softdla/include, libcudla.so.1 in the package
directory itself (next to the extensions, where they and the CUDA plugin find it), a CMake package
(softdla::cudla, CUDA::cudla) under softdla/lib/cmake/softdla and cudla.pc under softdla/lib/pkgconfig.
In a source tree (PYTHONPATH=python) the headers are the repository's include/ and the library directory
is the build's (SOFTDLA_BUILD_DIR, default build/); there is no CMake package or pkg-config file there.
"""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_SOURCE_ROOT = os.path.dirname(os.path.dirname(_HERE))  # python/softdla -> the repository, in a source tree


def _in_source_tree():
    return os.path.isfile(os.path.join(_SOURCE_ROOT, "CMakeLists.txt")) and os.path.isfile(
        os.path.join(_SOURCE_ROOT, "include", "cudla.h"))


def get_include() -> str:
    """The directory to pass with -I: it holds cudla.h and softdla/cudla_ext.h."""
    path = os.path.join(_HERE, "include")
    if not os.path.exists(path) and _in_source_tree():
        return os.path.join(_SOURCE_ROOT, "include")
    return _require(path, "headers")


def get_library_dir() -> str:
    """The directory holding libcudla.so.1 (and libcudla.so for -lcudla, and the CUDA plugin if built)."""
    if os.path.exists(os.path.join(_HERE, "libcudla.so.1")):
        return _HERE
    if _in_source_tree():
        build = os.environ.get("SOFTDLA_BUILD_DIR", os.path.join(_SOURCE_ROOT, "build"))
        return _require(os.path.abspath(build), "libcudla.so.1", os.path.join(build, "libcudla.so.1"))
    return _require(os.path.join(_HERE, "libcudla.so.1"), "libcudla.so.1")


def get_cmake_dir() -> str:
    """The directory holding softdlaConfig.cmake: give it (or its prefix) as CMAKE_PREFIX_PATH or softdla_DIR."""
    return _require(os.path.join(_HERE, "lib", "cmake", "softdla"), "CMake package")


def get_pkgconfig_dir() -> str:
    """The directory holding cudla.pc, for PKG_CONFIG_PATH."""
    return _require(os.path.join(_HERE, "lib", "pkgconfig"), "pkg-config file")


def _require(path, what, check=None):
    if not os.path.exists(check or path):
        raise FileNotFoundError(f"softdla's {what} not found at {check or path}: these paths exist in an installed "
                                "softdla (pip install softdla, or a wheel from scripts/build_wheel.sh)")
    return path
