#!/usr/bin/env bash
# The wheel as a user gets it: scripts/build_wheel.sh (pip wheel, auditwheel repair, auditwheel show), then
# the repaired wheel installed into a fresh virtual environment and used from outside the source tree:
# the softdla command (build + run + inspect), `import softdla` (build, run, accuracy, the wheel's own
# libcudla.so.1), a C program built against the wheel (get_include / get_library_dir with -lcudla, CMake's
# find_package through get_cmake_dir, pkg-config through get_pkgconfig_dir), and NVIDIA's
# cuda.bindings.cudla (PyPI cuda-bindings) running over the wheel's libcudla.so.1.
# Two wheels: the default Python's (.venv/bin/python; cp311 on Debian 12), then, where a CPython >= 3.12
# with its headers and venv is found, the cp312-abi3 one (one wheel for 3.12 and later) built and checked
# the same way with that interpreter; where a second, newer one (>= 3.13) is found too, the abi3 wheel is
# also installed under it and smoke-tested (import, softdla.build, run).
#   scripts/check_wheel.sh                     build, repair, check (both wheels)
#   WHEEL=dist/softdla-...whl scripts/check_wheel.sh   check a wheel already built (only that one)
# PYTHON: the interpreter of the first wheel's fresh venv (default python3; must match the wheel's Python).
# ABI3_PYTHON: the interpreter that builds and checks the abi3 wheel (default: the first of python3.12,
# python3.13, python3.14 on PATH and $PYENV_ROOT/versions/3.1[2-9]*/bin/python3 that works; "none" skips).
# ABI3_SMOKE_PYTHON: the newer one for the smoke test (default: found likewise, >= 3.13; "none" skips).
# VENV_ARGS: more `python -m venv` arguments (--system-site-packages on a machine without PyPI whose Python
# has numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
m=$root/examples/models
read -ra venv_args <<<"${VENV_ARGS:-}"

# A CPython >= $1 (minor version of 3) that can build an abi3 wheel (headers, venv, not free-threaded),
# other than $2; prints its path, or nothing.
find_python() {
  local min=$1 not=${2:-} c p
  local pyenv=${PYENV_ROOT:-$HOME/.pyenv}
  for c in python3.12 python3.13 python3.14 "$pyenv"/versions/3.1[2-9]*/bin/python3; do
    p=$(command -v "$c" 2>/dev/null) || continue
    # pyenv's shims exist for every version it has but run only the selected ones: run each candidate.
    p=$("$p" -c '
import os, sys, sysconfig, ensurepip, venv
assert sys.implementation.name == "cpython" and sys.version_info >= (3, int(sys.argv[1]))
assert not sysconfig.get_config_var("Py_GIL_DISABLED")
assert os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
print(os.path.realpath(sys.executable))' "$min" 2>/dev/null) || continue
    [[ $p == "$not" ]] && continue
    echo "$p"
    return
  done
}

# scripts/build_wheel.sh with the Python $1 (empty: its default), its output also in dist/build_wheel$2.log;
# sets $built to the repaired wheel's path.
build() {
  local log=$root/dist/build_wheel${2:-}.log
  PYTHON=$1 scripts/build_wheel.sh | tee "$log"
  built=$(tail -1 "$log")
}

# The checks, on the wheel $1 installed into a fresh venv of the Python $2, in a subshell of its own.
check() (
local WHEEL=$1 py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv=$work/venv
"$py" -m venv "${venv_args[@]}" "$venv"
echo "== pip install $(basename "$WHEEL") into a fresh venv ($("$venv/bin/python" -V))"
t0=$(date +%s)
"$venv/bin/pip" install -q --disable-pip-version-check "$WHEEL"
# NVIDIA's Python cuDLA bindings (as requirements-dev.txt pins them); optional where PyPI is out of reach.
have_nvidia=1
"$venv/bin/pip" install -q --disable-pip-version-check "$(grep -o '^cuda-bindings[^ #]*' requirements-dev.txt)" \
  || { have_nvidia=0; echo "cuda-bindings could not be installed: NVIDIA's bindings not checked"; }
echo "   installed in $(( $(date +%s) - t0 )) s"
cd "$work"  # outside the source tree: nothing of it on sys.path or in the working directory

echo "== the softdla command"
sd=$venv/bin/softdla
"$sd" build --onnx="$m/digits.onnx" --int8 --fp16 --calib-data="$m/digits_calib" --outputIOFormats=fp16:chw16 \
  --buildDLAStandalone --useDLACore=0 --saveEngine=digits.loadable >build.log 2>&1 || { cat build.log; exit 1; }
"$sd" inspect digits.loadable | head -3
"$sd" run digits.loadable --input pixels="$m/digits_test_images.npy" --labels "$m/digits_test_labels.npy" | tee run.log | tail -1
acc=$(sed -n 's/^top-1 accuracy: \([0-9.]*\)%.*/\1/p' run.log)
awk -v a="$acc" 'BEGIN { exit !(a > 97) }' || { echo "softdla run: accuracy '$acc' <= 97%" >&2; exit 1; }

echo "== import softdla"
"$venv/bin/python" - "$root" <<'PY'
import os, sys
import numpy as np
import softdla
from softdla import cudla
root = sys.argv[1]
pkg = os.path.dirname(softdla.__file__)
assert softdla.__file__.startswith(sys.prefix), softdla.__file__
assert not any(p and os.path.abspath(p).startswith(root) for p in sys.path), sys.path
assert cudla.library_path().startswith(pkg), cudla.library_path()
assert softdla.get_library_dir() == pkg and os.path.isfile(os.path.join(pkg, "libcudla.so.1"))
assert os.path.isfile(os.path.join(softdla.get_include(), "cudla.h"))
assert os.path.isfile(os.path.join(softdla.get_cmake_dir(), "softdlaConfig.cmake"))
assert os.path.isfile(os.path.join(softdla.get_pkgconfig_dir(), "cudla.pc"))
models = os.path.join(root, "examples", "models")
lb = softdla.build(os.path.join(models, "digits.onnx"), int8=True, fp16=True,
                   calib_data=os.path.join(models, "digits_calib"), progress=False)
images = np.load(os.path.join(models, "digits_test_images.npy")).astype(np.float32)
labels = np.load(os.path.join(models, "digits_test_labels.npy"))
with softdla.Device() as dev:
    m = dev.load(lb)
    pred = np.array([m.run([im[None]])["probabilities"].argmax() for im in images])
acc = (pred == labels).mean() * 100
print(f"installed wheel: {cudla.library_path()}, digits INT8 top-1 {acc:.2f}%")
assert acc > 97
PY

echo "== a C program built against the wheel"
paths=$("$venv/bin/python" -c 'import softdla as s; print(s.get_include(), s.get_library_dir(), s.get_cmake_dir(), s.get_pkgconfig_dir())')
read -r inc libdir cmakedir pcdir <<<"$paths"
cat > app.c <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include "cudla.h"
int main(void) {
  uint64_t version = 0, devices = 0;
  Dl_info info;
  if (cudlaGetVersion(&version) || cudlaDeviceGetCount(&devices) || !dladdr((void*)&cudlaGetVersion, &info)) return 1;
  printf("cudla %llu, %llu devices, %s\n", (unsigned long long)version, (unsigned long long)devices, info.dli_fname);
  return 0;
}
C
cc app.c -I"$inc" -L"$libdir" -lcudla -Wl,-rpath,"$libdir" -o app_flags
# shellcheck disable=SC2046
cc app.c $(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs cudla) -Wl,-rpath,"$libdir" -o app_pkgconfig
printf 'cmake_minimum_required(VERSION 3.18)\nproject(app C)\nfind_package(softdla REQUIRED)\nadd_executable(app_cmake app.c)\ntarget_link_libraries(app_cmake PRIVATE softdla::cudla ${CMAKE_DL_LIBS})\n' > CMakeLists.txt
cmake -S . -B cm -Dsoftdla_DIR="$cmakedir" >/dev/null && cmake --build cm >/dev/null && cp cm/app_cmake .
for app in app_flags app_pkgconfig app_cmake; do
  out=$(env -u LD_LIBRARY_PATH SOFTDLA_LOG=none ./$app)
  echo "$app: $out"
  [[ $out == *" $libdir/libcudla.so.1" ]] || { echo "$app did not run on the wheel's library" >&2; exit 1; }
done

echo "== a standalone-mode C program on the wheel's NvSciSync (CMake package: softdla::nvscisync)"
cat > standalone.c <<'C'
#include <stdio.h>
#include "cudla.h"
#include "nvscisync.h"
int main(void) {
  NvSciSyncModule module;
  NvSciSyncAttrList list;
  if (NvSciSyncModuleOpen(&module) != NvSciError_Success || NvSciSyncAttrListCreate(module, &list) != NvSciError_Success)
    return 2;
  /* Succeeds only when libcudla.so.1 found the NvSci libraries beside it. */
  cudlaStatus s = cudlaGetNvSciSyncAttributes((uint64_t*)list, CUDLA_NVSCISYNC_ATTR_SIGNAL);
  printf("cudlaGetNvSciSyncAttributes -> %d\n", (int)s);
  NvSciSyncAttrListFree(list);
  NvSciSyncModuleClose(module);
  return s != cudlaSuccess;
}
C
mkdir -p sa
printf 'cmake_minimum_required(VERSION 3.18)\nproject(sa C)\nfind_package(softdla REQUIRED)\nadd_executable(standalone ../standalone.c)\ntarget_link_libraries(standalone PRIVATE softdla::cudla softdla::nvscisync)\n' > sa/CMakeLists.txt
cmake -S sa -B sa/b -Dsoftdla_DIR="$cmakedir" >/dev/null && cmake --build sa/b >/dev/null
env -u LD_LIBRARY_PATH SOFTDLA_LOG=warn sa/b/standalone
cc standalone.c -I"$inc" -L"$libdir" -lcudla -lnvscisync -Wl,-rpath,"$libdir" -o standalone_flags
env -u LD_LIBRARY_PATH SOFTDLA_LOG=warn ./standalone_flags

if ((have_nvidia)); then
  echo "== NVIDIA's cuda.bindings.cudla over the wheel's libcudla.so.1"
  packed=$("$venv/bin/python" -c '
import sys, numpy as np, softdla.formats as F
x = np.load(sys.argv[1])
print(F.pack(np.round(x * 127).astype(np.int8), F.DLA_HWC4).hex())' "$m/bars_images.npy")
  out=$(SOFTDLA_LOG=none SOFTDLA_BACKEND=cpu "$venv/bin/python" "$root/tests/python/nvidia_bindings_inference.py" \
        "$libdir/libcudla.so.1" "$m/bars.loadable" "$packed" | tail -1)
  "$venv/bin/python" -c '
import sys, numpy as np, softdla.formats as F
p = F.unpack(bytes.fromhex(sys.argv[1]), (4, 4, 1, 1), np.float16, F.CHW16).reshape(4, 4)
assert list(p.argmax(1)) == [0, 1, 2, 3], p
print("NVIDIA cuda.bindings.cudla on the wheel: argmax", p.argmax(1).tolist())' "$out"
fi
echo "wheel check passed: $(basename "$WHEEL") on $("$venv/bin/python" -V)"
)

# The abi3 wheel under a newer Python than the one that built it: installed into a fresh venv, imported,
# softdla.build and a run on the digits model.
smoke() (
local WHEEL=$1 py=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" -m venv "${venv_args[@]}" "$work/venv"
echo "== pip install $(basename "$WHEEL") into a fresh venv ($("$work/venv/bin/python" -V)): smoke test"
"$work/venv/bin/pip" install -q --disable-pip-version-check "$WHEEL"
cd "$work"
"$work/venv/bin/python" - "$m" <<'PY'
import os, sys
import numpy as np
import softdla
from softdla import _builder_ext, _cudla_ext
m = sys.argv[1]
assert softdla.__file__.startswith(sys.prefix), softdla.__file__
assert _builder_ext.__file__.endswith(".abi3.so") and _cudla_ext.__file__.endswith(".abi3.so"), _cudla_ext.__file__
lb = softdla.build(os.path.join(m, "digits.onnx"), int8=True, fp16=True, calib_data=os.path.join(m, "digits_calib"),
                   progress=False)
images = np.load(os.path.join(m, "digits_test_images.npy")).astype(np.float32)
labels = np.load(os.path.join(m, "digits_test_labels.npy"))
with softdla.Device() as dev:
    model = dev.load(lb)
    pred = np.array([model.run([im[None]])["probabilities"].argmax() for im in images])
acc = (pred == labels).mean() * 100
print(f"abi3 wheel on Python {sys.version.split()[0]}: softdla {softdla.__version__}, digits INT8 top-1 {acc:.2f}%")
assert acc > 97
PY
)

if [[ -n ${WHEEL:-} ]]; then  # a wheel already built: only that one
  WHEEL=$(realpath "$WHEEL")
  case $(basename "$WHEEL") in
    *manylinux*) ;;
    *) echo "check_wheel.sh: $WHEEL is not a repaired manylinux wheel" >&2; exit 1 ;;
  esac
  # WHEEL_SHOWN=1: auditwheel has already checked it (e.g. on a machine without PyPI to install auditwheel)
  [[ -n ${WHEEL_SHOWN:-} ]] || scripts/build_wheel.sh --show "$WHEEL" | tail -1
  check "$WHEEL" "${PYTHON:-python3}"
  exit
fi

mkdir -p dist
t0=$(date +%s)
build "${PYTHON:-}"  # build_wheel.sh checks auditwheel show
wheel=$built
check "$wheel" "${PYTHON:-python3}"
t1=$(date +%s)
echo "== $(basename "$wheel"): built and checked in $((t1 - t0)) s"
if [[ $(basename "$wheel") == *-abi3-* ]]; then  # built by a Python >= 3.12 already: no second build
  abi3=$wheel
  abi3_py=$("${PYTHON:-python3}" -c 'import os, sys; print(os.path.realpath(sys.executable))')
else
  abi3_py=${ABI3_PYTHON:-$(find_python 12)}
  if [[ -z $abi3_py || $abi3_py == none ]]; then
    echo "== the cp312-abi3 wheel skipped: no CPython >= 3.12 with its headers and venv found (ABI3_PYTHON)"
    exit
  fi
  abi3_py=$("$abi3_py" -c 'import os, sys; print(os.path.realpath(sys.executable))')
  echo "== the cp312-abi3 wheel, built with $abi3_py ($("$abi3_py" -V))"
  build "$abi3_py" -abi3
  abi3=$built
  case $(basename "$abi3") in
    *-cp312-abi3-manylinux*) ;;
    *) echo "check_wheel.sh: $abi3 is not a cp312-abi3 manylinux wheel" >&2; exit 1 ;;
  esac
  check "$abi3" "$abi3_py"
fi
t2=$(date +%s)
smoke_py=${ABI3_SMOKE_PYTHON:-$(find_python 13 "$abi3_py")}
if [[ -z $smoke_py || $smoke_py == none ]]; then
  echo "== abi3 smoke test under a newer Python skipped: no CPython >= 3.13 found (ABI3_SMOKE_PYTHON)"
else
  smoke "$abi3" "$smoke_py"
fi
echo "== $(basename "$abi3"): built and checked in $((t2 - t1)) s, smoke test in $(($(date +%s) - t2)) s"
