"""Building from source says what is missing (cmake/dependencies.cmake): configured on a machine where none of
the dependencies can be found (every system prefix hidden from CMake's find_* calls), CMake stops with one
error naming each missing dependency and the Debian/Ubuntu package to install, and docs/PYTHON.md lists the
same packages."""
import os
import re
import shutil
import subprocess

import pytest

from sdla_testkit.engine import ROOT

PACKAGES = ["libflatbuffers-dev", "flatbuffers-compiler", "libcli11-dev", "libprotobuf-dev", "libonnx-dev",
            "libgtest-dev", "libbenchmark-dev"]


# No sanitizer runtime preloaded into CMake and the compilers (scripts/sanitize.sh runs this suite with one).
ENV = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CMAKE_PREFIX_PATH")}


def _configure(tmp_path, *extra):
    # Explicit compilers and make: the lookups of the project's own dependencies are what is hidden.
    return subprocess.run(["cmake", "-S", ROOT, "-B", str(tmp_path), "-DSOFTDLA_CUDA=OFF", "-DSOFTDLA_PYTHON=OFF",
                           f"-DCMAKE_C_COMPILER={shutil.which('cc')}", f"-DCMAKE_CXX_COMPILER={shutil.which('c++')}",
                           f"-DCMAKE_MAKE_PROGRAM={shutil.which('make')}", *extra],
                          capture_output=True, text=True, env=ENV)


needs_tools = pytest.mark.skipif(not all(map(shutil.which, ["cmake", "cc", "c++", "make"])), reason="no cmake/cc/make")


@needs_tools
def test_missing_dependencies_are_named_with_their_packages(tmp_path):
    # Every system prefix and program directory hidden from find_*: nothing is found.
    r = _configure(tmp_path, "-DCMAKE_IGNORE_PREFIX_PATH=/;/usr;/usr/local;/opt",
                   "-DCMAKE_IGNORE_PATH=/usr/bin;/bin;/usr/local/bin;/usr/sbin;/sbin")
    assert r.returncode != 0
    err = " ".join(r.stderr.split())  # CMake wraps long messages
    assert "missing build dependencies" in err, r.stderr
    for pkg in PACKAGES:
        assert f"apt-get install {pkg}" in err, (pkg, r.stderr)
    assert "sudo apt-get install " + " ".join(PACKAGES) in err, r.stderr


@needs_tools
def test_one_missing_dependency_is_named_alone(tmp_path):
    r = _configure(tmp_path, "-DCMAKE_DISABLE_FIND_PACKAGE_ONNX=ON", "-DSOFTDLA_BUILD_TESTS=OFF",
                   "-DSOFTDLA_BUILD_BENCH=OFF")
    assert r.returncode != 0
    err = " ".join(r.stderr.split())
    assert "sudo apt-get install libonnx-dev (" in err, r.stderr


def test_python_md_lists_every_build_package():
    doc = open(os.path.join(ROOT, "docs", "PYTHON.md")).read()
    section = re.search(r"^## Building from source\n(.*?)(?=^## )", doc, re.S | re.M)
    assert section, "docs/PYTHON.md has no 'Building from source' section"
    for pkg in PACKAGES + ["cmake", "g++", "python3-dev"]:
        assert pkg in section.group(1), pkg
    setup = open(os.path.join(ROOT, "scripts", "setup.sh")).read()
    for pkg in PACKAGES + ["python3-dev", "pkg-config"]:
        assert pkg in setup, f"scripts/setup.sh does not install {pkg}"

