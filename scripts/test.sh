#!/usr/bin/env bash
# Runs the test suites on the release build: C++ (CTest) and Python (pytest, excluding -m slow).
# Pass extra pytest arguments after the script name, e.g. scripts/test.sh -m slow.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x .venv/bin/python ]] || { echo "run scripts/setup.sh first" >&2; exit 1; }
cmake --build --preset release
ctest --preset release
.venv/bin/python -m pytest "$@"
