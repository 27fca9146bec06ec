#!/usr/bin/env bash
# The main job on the bundled model: build the trained digits CNN (examples/models/digits.onnx) into
# an INT8 DLA standalone loadable, calibrated on 200 training images, and run it on the 360-image test
# split; then the same for an FP32 reference build, to show what INT8 costs in accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -x build/softdla ]] || { echo "run scripts/setup.sh first" >&2; exit 1; }
m=examples/models
mkdir -p build/demo
echo "== build INT8 (FP16 where the DLA needs it), trtexec-style flags"
build/softdla build --onnx=$m/digits.onnx --int8 --fp16 --calib-data=$m/digits_calib \
  --calib=build/demo/digits.cache --outputIOFormats=fp16:chw16 --buildDLAStandalone --useDLACore=0 \
  --saveEngine=build/demo/digits_int8.loadable
build/softdla inspect build/demo/digits_int8.loadable
echo "== run INT8 on the test split"
build/softdla run build/demo/digits_int8.loadable --input pixels=$m/digits_test_images.npy \
  --labels $m/digits_test_labels.npy
echo "== FP32 reference (not a DLA precision) for comparison"
build/softdla build --onnx=$m/digits.onnx --fp32-reference --saveEngine=build/demo/digits_fp32.loadable >/dev/null
build/softdla run build/demo/digits_fp32.loadable --input pixels=$m/digits_test_images.npy \
  --labels $m/digits_test_labels.npy | tail -1
