#!/usr/bin/env bash
# Builds one of NVIDIA's two standalone-mode cuDLA samples, unchanged, through its own CMakeLists.txt
# pointed at softdla's build tree (find_library(CUDLA_LIB cudla) and FindNVSCI.cmake's find_library/
# find_path find libcudla.so, libnvscibuf.so, libnvscisync.so and nvscibuf.h/nvscisync.h there through
# CMAKE_LIBRARY_PATH / CMAKE_INCLUDE_PATH), checks the program runs on softdla's libraries, and runs it to
# its "DONE" line. They make no CUDA call, so no GPU is needed. cuDLALayerwiseStatsStandalone's
# statistics CSV is checked too: one row per layer of the loadable.
# Exit 77 (CTest's skip) when the samples or nvcc (their CMakeLists enable CUDA) are absent.
#   nvidia_standalone_sample.sh <sample> <dir of libcudla.so> <include dir> <work dir> <loadable>
# Where the samples are found: nvidia_sample_common.sh.
set -euo pipefail
source "$(dirname "$0")/nvidia_sample_common.sh"
if [[ $sample == cuDLALayerwiseStatsStandalone && ! -f $incdir/cudlaExternalEtbl.hpp ]]; then
  echo "SKIP: $sample needs cudlaExternalEtbl.hpp"
  exit 77
fi

b="$work/$sample"
rm -rf "$b"
mkdir -p "$b"
unset LD_LIBRARY_PATH LD_PRELOAD  # the programs find softdla's libraries by their own RUNPATH
cmake -S "$src" -B "$b" -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_LIBRARY_PATH="$libdir" \
  -DCMAKE_INCLUDE_PATH="$incdir" -DCMAKE_CXX_FLAGS="-I$incdir" >"$b/configure.log" 2>&1 ||
  { cat "$b/configure.log"; fail "cmake configure"; }
for v in CUDLA_LIB:libcudla.so NVSCIBUF_LIBRARY:libnvscibuf.so NVSCISYNC_LIBRARY:libnvscisync.so; do
  found=$(sed -n "s/^${v%%:*}:FILEPATH=//p" "$b/CMakeCache.txt")
  [[ -n $found && $(realpath "$found") == $(realpath "$libdir/${v#*:}") ]] ||
    fail "CMake found ${v%%:*}='$found', not $libdir/${v#*:}"
done
cmake --build "$b" -j 2 >"$b/build.log" 2>&1 || { cat "$b/build.log"; fail "build"; }
exe="$b/$sample"
for lib in libcudla.so.1 libnvscibuf.so.1 libnvscisync.so.1; do
  linked=$(ldd "$exe" | sed -n "s/^[[:space:]]*${lib//./\\.} => \([^ ]*\).*/\1/p")
  [[ -n $linked && $(realpath "$linked") == $(realpath "$libdir/$lib") ]] || fail "runs on $lib '$linked', not $libdir/$lib"
done
echo "$sample: compiled unchanged, runs on softdla's libcudla.so.1, libnvscibuf.so.1, libnvscisync.so.1"

case $sample in
  cuDLAStandaloneMode) args=("$loadable" unused-image) ;;  # the sample's image reader is a stub
  cuDLALayerwiseStatsStandalone) args=("$loadable" 1000 1 "$b/stats") ;;  # 1000 MHz: softdla's counter clock
  *) fail "unknown sample" ;;
esac
set +e
SOFTDLA_LOG=${SOFTDLA_LOG:-warn} timeout 120 "$exe" "${args[@]}" >"$b/run.log" 2>&1
rc=$?
set -e
cat "$b/run.log"
((rc == 0)) && grep -q "$sample DONE" "$b/run.log" || fail "did not run to DONE (exit $rc)"
if [[ $sample == cuDLALayerwiseStatsStandalone ]]; then
  csv="$b/stats1.csv"
  [[ -f $csv ]] || fail "no statistics CSV $csv"
  size=$(sed -n 's/^The size of 0 descriptor is \([0-9]*\).*/\1/p' "$b/run.log")
  [[ -n $size ]] || fail "the sample printed no statistics descriptor size"
  layers=$(((size - 32) / 24))  # 32 + 24 bytes per layer (docs/RUNTIME.md)
  python3 - "$csv" "$layers" <<'PY' || fail "statistics CSV"
import sys
data = open(sys.argv[1], "rb").read().rstrip(b"\0").decode()
lines = data.splitlines()
rows = lines[1:]
assert len(rows) == int(sys.argv[2]), (len(rows), sys.argv[2], lines[:3])
print(f"statistics CSV: header {lines[0]!r}, {len(rows)} layers")
PY
fi
echo "$sample: DONE"
