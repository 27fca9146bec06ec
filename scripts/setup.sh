#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for softdla: system packages (apt), a Python virtual environment
# (.venv) with the test packages (pip), and the release build in build/. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(cmake g++ make flatbuffers-compiler libflatbuffers-dev libcli11-dev libgtest-dev
              libbenchmark-dev libonnx-dev libprotobuf-dev protobuf-compiler python3-dev python3-venv
              pkg-config  # the C package's test (tests/python/test_c_package.py)
              chromium  # headless browser for the HTML report's test (tests/python/test_report.py)
              clang libclang-rt-14-dev)  # clang + libFuzzer: the fuzz targets (scripts/fuzz.sh)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing Debian packages: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "need root for apt-get; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "== creating .venv"
  python3 -m venv .venv
fi
echo "== installing Python test packages into .venv"
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt

echo "== building (cmake --preset release)"
cmake --preset release >/dev/null
cmake --build --preset release
echo "== ready: build/softdla, build/libsoftdla_engine_c.so"
