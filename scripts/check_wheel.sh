#!/usr/bin/env bash
# The wheel as a user gets it: scripts/build_wheel.sh (pip wheel, auditwheel repair, auditwheel show), then
# the repaired wheel installed into a fresh virtual environment and used from outside the source tree:
# the softdla command (build + run + inspect), `import softdla` (build, run, accuracy, the wheel's own
# libcudla.so.1), a C program built against the wheel (get_include / get_library_dir with -lcudla, CMake's
# find_package through get_cmake_dir, pkg-config through get_pkgconfig_dir), and NVIDIA's
# cuda.bindings.cudla (PyPI cuda-bindings) running over the wheel's libcudla.so.1.
#   scripts/check_wheel.sh                     build, repair, check
#   WHEEL=dist/softdla-...whl scripts/check_wheel.sh   check a wheel already built
# PYTHON: the interpreter of the fresh venv (default python3; must match the wheel's Python). VENV_ARGS:
# more `python -m venv` arguments (--system-site-packages on a machine without PyPI whose Python has numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [[ -z ${WHEEL:-} ]]; then
  mkdir -p dist
  scripts/build_wheel.sh | tee "$root/dist/build_wheel.log"
  WHEEL=$(tail -1 "$root/dist/build_wheel.log")
  WHEEL_SHOWN=1  # build_wheel.sh ran and checked auditwheel show
fi
WHEEL=$(realpath "$WHEEL")
case $(basename "$WHEEL") in
  *manylinux*) ;;
  *) echo "check_wheel.sh: $WHEEL is not a repaired manylinux wheel" >&2; exit 1 ;;
esac
[[ -n ${WHEEL_SHOWN:-} ]] || scripts/build_wheel.sh --show "$WHEEL" | tail -1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
venv=$work/venv
read -ra venv_args <<<"${VENV_ARGS:-}"
"${PYTHON:-python3}" -m venv "${venv_args[@]}" "$venv"
echo "== pip install $(basename "$WHEEL") into a fresh venv"
t0=$(date +%s)
"$venv/bin/pip" install -q --disable-pip-version-check "$WHEEL"
# NVIDIA's Python cuDLA bindings (as requirements-dev.txt pins them); optional where PyPI is out of reach.
have_nvidia=1
"$venv/bin/pip" install -q --disable-pip-version-check "$(grep -o '^cuda-bindings[^ #]*' requirements-dev.txt)" \
  || { have_nvidia=0; echo "cuda-bindings could not be installed: NVIDIA's bindings not checked"; }
echo "   installed in $(( $(date +%s) - t0 )) s"
m=$root/examples/models
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
echo "wheel check passed: $(basename "$WHEEL")"
