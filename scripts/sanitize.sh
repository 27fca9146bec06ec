#!/usr/bin/env bash
# Builds the ASan+UBSan and TSan trees and runs the C++ tests in them; the Python op suite also runs
# against the ASan+UBSan engine (libasan/libubsan preloaded into Python).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
cmake --build --preset asan
ctest --preset asan
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 SOFTDLA_BUILD_DIR=build-asan \
  .venv/bin/python -m pytest -q -p no:faulthandler -m "not slow and not zoo" tests/python
cmake --preset tsan >/dev/null
cmake --build --preset tsan
ctest --preset tsan
