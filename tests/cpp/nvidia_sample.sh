#!/usr/bin/env bash
# Builds one of NVIDIA's cuDLA hybrid-mode samples, unchanged, through its own CMakeLists.txt pointed at
# softdla's build tree (find_library(CUDLA_LIB cudla ...) finds libcudla.so there through
# CMAKE_LIBRARY_PATH; softdla's include/ comes first on nvcc's include path), checks the program links
# softdla's libcudla.so.1, and runs it:
#   - with a GPU, to the sample's "DONE" line (cuDLALayerwiseStatsHybrid: and its statistics CSV, one row
#     per layer of the loadable);
#   - without one, it must stop cleanly at its first CUDA call (cudaFree(0)), before any cuDLA call.
# Exit 77 (CTest's skip) when the samples or nvcc are absent.
#   nvidia_sample.sh <sample> <dir of libcudla.so> <include dir> <work dir> <loadable>
# Where the samples are found: nvidia_sample_common.sh.
set -euo pipefail
source "$(dirname "$0")/nvidia_sample_common.sh"

b="$work/$sample"
rm -rf "$b"
mkdir -p "$b"
# The programs must find softdla's library by their own RUNPATH, nothing preloaded or on the path.
unset LD_LIBRARY_PATH LD_PRELOAD
cmake -S "$src" -B "$b" -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_LIBRARY_PATH="$libdir" \
  -DCMAKE_CUDA_FLAGS="-I$incdir" >"$b/configure.log" 2>&1 || { cat "$b/configure.log"; fail "cmake configure"; }
found=$(sed -n 's/^CUDLA_LIB:FILEPATH=//p' "$b/CMakeCache.txt")
[[ -n $found && $(realpath "$found") == $(realpath "$libdir/libcudla.so") ]] ||
  fail "find_library found '$found', not $libdir/libcudla.so"
cmake --build "$b" -j 2 >"$b/build.log" 2>&1 || { cat "$b/build.log"; fail "build"; }
exe="$b/$sample"
linked=$(ldd "$exe" | sed -n 's/^[[:space:]]*libcudla\.so\.1 => \([^ ]*\).*/\1/p')
[[ -n $linked && $(realpath "$linked") == $(realpath "$libdir/libcudla.so.1") ]] ||
  fail "runs on libcudla.so.1 '$linked', not $libdir/libcudla.so.1"
echo "$sample: compiled unchanged, links $(realpath "$linked")"

case $sample in
  cuDLAHybridMode) args=("$loadable" unused-image) ;;  # the sample's image reader is a stub
  cuDLAErrorReporting) args=("$loadable") ;;
  cuDLALayerwiseStatsHybrid) args=("$loadable" 1000 1 "$b/stats") ;;  # 1000 MHz: softdla's counter clock
  *) fail "unknown sample" ;;
esac
gpu=0
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 && gpu=1
set +e
SOFTDLA_LOG=${SOFTDLA_LOG:-warn} "$exe" "${args[@]}" >"$b/run.log" 2>&1
rc=$?
set -e
if ((!gpu)); then
  # No GPU: the sample's first CUDA call fails and it returns 1 having made no cuDLA call.
  grep -q "Error in creating cudaFree" "$b/run.log" && ((rc == 1)) ||
    { cat "$b/run.log"; fail "expected the sample to stop at cudaFree(0) without a GPU (exit $rc)"; }
  echo "$sample: no GPU, stopped cleanly at its first CUDA call: $(grep -m1 'cudaFree' "$b/run.log")"
  exit 0
fi
cat "$b/run.log"
((rc == 0)) && grep -q "$sample DONE" "$b/run.log" || fail "did not run to DONE (exit $rc)"
if [[ $sample == cuDLALayerwiseStatsHybrid ]]; then
  csv="$b/stats1.csv"
  [[ -f $csv ]] || fail "no statistics CSV $csv"
  # The statistics descriptor holds 32 + 24 bytes per layer (docs/RUNTIME.md).
  size=$(sed -n 's/^The size of 0 descriptor is \([0-9]*\).*/\1/p' "$b/run.log")
  layers=$(((size - 32) / 24))
  python3 - "$csv" "$layers" <<'EOF' || fail "statistics CSV"
import re, sys
data = open(sys.argv[1], "rb").read()
# The sample writes the csvStreamLength bytes etiTranslateStats asked for: the text and its NUL.
assert data.endswith(b"\0") and data.count(b"\0") == 1, data[-20:]
lines = data[:-1].decode().splitlines()
assert lines[0] == "layer_name,start_ms,end_ms", lines[0]
rows = lines[1:]
assert len(rows) == int(sys.argv[2]), (len(rows), sys.argv[2])
last = 0.0
for row in rows:  # layers may overlap in time (a fused op shows inside the convolution it is fused with)
    m = re.fullmatch(r"'((?:[^']|'')*)',(\d+\.\d{6}),(\d+\.\d{6})", row)
    assert m, row
    start, end = float(m.group(2)), float(m.group(3))
    assert start <= end, row
    last = max(last, end)
assert last > 0, rows
print(f"statistics CSV: {len(rows)} layers, the task ends at {last} ms")
EOF
fi
echo "$sample: DONE on the GPU"
if [[ $sample == cuDLAErrorReporting ]]; then
  # A task that faults (SOFTDLA_FAULT, docs/RUNTIME.md) fails the CUDA stream on both backends, and
  # cudlaGetLastError holds the DLA status (softdla logs it). The stream's code is
  # cudaErrorLaunchFailure, not the cudaErrorExternalDevice only NVIDIA's driver raises, so the sample
  # meets it at its copy into pageable memory (which waits for the stream) and stops with exit 1 there
  # ("Error in bringing result back to CPU") instead of printing "Asynchronous error in HW".
  for backend in cuda cpu; do
    set +e
    SOFTDLA_BACKEND=$backend SOFTDLA_FAULT=EngineTimeout SOFTDLA_LOG=warn "$exe" "${args[@]}" >"$b/fault_$backend.log" 2>&1
    rc=$?
    set -e
    cat "$b/fault_$backend.log"
    grep -q "SUBMIT IS DONE" "$b/fault_$backend.log" &&
      grep -q "fault injected by SOFTDLA_FAULT -> cudlaErrorDlaErrEngineTimeout" "$b/fault_$backend.log" &&
      grep -q -E "Error in bringing result back to CPU|Error in synchronizing stream = cudaErrorLaunchFailure" \
        "$b/fault_$backend.log" && ((rc == 0 || rc == 1)) ||
      fail "$backend backend: the injected fault did not reach the sample through the stream (exit $rc)"
    echo "$sample: injected fault reported through the stream ($backend backend, exit $rc)"
  done
fi
