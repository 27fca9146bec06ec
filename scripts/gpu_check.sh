#!/usr/bin/env bash
# The GPU checks of docs/PERFORMANCE.md and issue 6, on a machine with an NVIDIA GPU: the CUDA backend's
# tests (whole networks and hybrid mode through NVIDIA's cuda.bindings), every op suite re-run on the
# GPU with byte-for-byte INT8 comparison against the CPU backend, NVIDIA's three hybrid cuDLA samples
# built unchanged and run to DONE (with the layer-wise statistics CSV), compute-sanitizer on a subset, and
# the ResNet-50 benchmark against PyTorch. Logs go to $OUT (default /tmp/softdla-gpu).
#   SOFTDLA_BUILD_DIR=build scripts/gpu_check.sh [tests|example|samples|sanitize|bench]...
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/softdla-gpu}
mkdir -p "$OUT"
export SOFTDLA_BUILD_DIR=${SOFTDLA_BUILD_DIR:-build}
export LD_LIBRARY_PATH="$SOFTDLA_BUILD_DIR/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
# A build carried from another machine may bring tools the GPU machine lacks (flatc for the tests).
[[ -d $SOFTDLA_BUILD_DIR/bin ]] && export PATH="$SOFTDLA_BUILD_DIR/bin:$PATH"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
steps=("$@")
((${#steps[@]})) || steps=(tests example samples sanitize bench)
status=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
for step in "${steps[@]}"; do
  case $step in
    tests)
      echo "== CUDA backend tests"
      $PY -m pytest -q -p no:cacheprovider tests/python/test_cuda_backend.py 2>&1 | tee "$OUT/test_cuda_backend.log" | tail -15
      ((PIPESTATUS[0])) && status=1
      echo "== op suites on the GPU (INT8 byte-identical to the CPU backend)"
      SOFTDLA_TEST_BACKEND=cuda $PY -m pytest -q -p no:cacheprovider tests/python/test_conv.py \
        tests/python/test_sdp_ops.py tests/python/test_other_ops.py tests/python/test_formats.py \
        tests/python/test_builder_models.py tests/python/test_builder_ops.py 2>&1 | tee "$OUT/test_ops_gpu.log" | tail -15
      ((PIPESTATUS[0])) && status=1
      ;;
    sanitize)
      for tool in memcheck racecheck; do
        echo "== compute-sanitizer --tool $tool (a network per precision)"
        timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 --target-processes all \
          $PY -m pytest -q -p no:cacheprovider tests/python/test_cuda_backend.py -k "resnet_like" 2>&1 \
          | tee "$OUT/sanitizer_$tool.log" | tail -6
        ((PIPESTATUS[0])) && status=1
      done
      ;;
    samples)
      # NVIDIA's cuDLA samples, unchanged (their CMakeLists.txt, nvcc), on the build's libcudla.so.1; the
      # layer-wise one writes its statistics CSV through the export table (cudlaExternalEtbl.hpp).
      for sample in cuDLAHybridMode cuDLAErrorReporting cuDLALayerwiseStatsHybrid; do
        echo "== NVIDIA sample $sample to DONE"
        tests/cpp/nvidia_sample.sh $sample "$SOFTDLA_BUILD_DIR" include "$OUT/samples" \
          examples/models/bars.loadable >"$OUT/sample_$sample.log" 2>&1
        rc=$?
        tail -4 "$OUT/sample_$sample.log"
        ((rc)) && status=1  # 77 too: here the samples and nvcc must be present
      done
      [[ -f $OUT/samples/cuDLALayerwiseStatsHybrid/stats1.csv ]] &&
        tr -d '\0' <"$OUT/samples/cuDLALayerwiseStatsHybrid/stats1.csv" | tee "$OUT/layerwise_stats.csv"
      ;;
    example)
      echo "== examples/python/hybrid_pipeline.py"
      $PY examples/python/hybrid_pipeline.py --build-dir "$SOFTDLA_BUILD_DIR" 2>&1 | tee "$OUT/example.log" | tail -8
      ((PIPESTATUS[0])) && status=1
      ;;
    bench)
      echo "== ResNet-50 vs PyTorch"
      $PY bench/resnet50_gpu.py --build-dir "$SOFTDLA_BUILD_DIR" --json "$OUT/resnet50.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | tail -12
      ((PIPESTATUS[0])) && status=1
      ;;
  esac
done
exit $status
