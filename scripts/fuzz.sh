#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan; preset 'fuzz') and runs each for a time budget.
#   scripts/fuzz.sh                 60 s per target (CI runs FUZZ_SECONDS=30)
#   scripts/fuzz.sh 3600 fuzz_onnx  one target for an hour (the long run of docs/RELIABILITY.md)
#   FUZZ_RUNS=1000000 scripts/fuzz.sh 0 fuzz_onnx   a fixed number of executions instead of a time
# New corpus entries go to build-fuzz/corpus/<target> (kept between runs, never committed); a crash,
# a sanitizer report, a leak-free timeout (10 s) or an input over 2 GB of RSS stops the target and
# leaves its input in build-fuzz/findings/. Turn it into a regression: copy it to
# fuzz/regressions/<target>/, fix the defect, and the replay test (ctest -R fuzz_replay) keeps it fixed.
# Prints one summary line per target: executions, execs/s, edges covered out of instrumented edges (for
# the Python target: Python branches covered; it has no instrumented-edge total).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-${FUZZ_SECONDS:-60}}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(fuzz_loadable fuzz_onnx fuzz_npy fuzz_calib_cache fuzz_python_cudla)
native=()
for t in "${targets[@]}"; do [[ $t == fuzz_python_* ]] || native+=("$t"); done
jobs=${FUZZ_JOBS:-1}

if ((${#native[@]})); then
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz --target "${native[@]}"
fi
mkdir -p build-fuzz/findings
status=0
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  limit=(-max_total_time="$seconds")
  # -jobs forks workers that log to ./fuzz-N.log; one job runs in this process, logging to $log.
  ((jobs > 1)) && limit+=(-jobs="$jobs" -workers="$jobs")
  [[ -n ${FUZZ_RUNS:-} ]] && limit=(-runs="$FUZZ_RUNS")
  log=build-fuzz/findings/$t.log
  # Python targets (atheris) run on the release build's extension: scripts/setup.sh builds it.
  root=$PWD
  runner=("$root/build-fuzz/fuzz/$t")
  [[ $t == fuzz_python_* ]] && runner=(env PYTHONPATH="$root/python" SOFTDLA_BACKEND=cpu "$root/.venv/bin/python" "$root/fuzz/$t.py")
  # Workers of -jobs write ./fuzz-N.log: run from a directory of their own.
  jobdir=$root/build-fuzz/findings/$t-jobs
  mkdir -p "$jobdir"
  rm -f "$jobdir"/fuzz-*.log
  set +e
  (cd "$jobdir" && SOFTDLA_LOG=none ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "${runner[@]}" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=262144 \
    -print_final_stats=1 -artifact_prefix="$root/build-fuzz/findings/$t-" \
    "$root/$work" "$root/fuzz/corpus/$t" >"$root/$log" 2>&1)
  rc=$?
  set -e
  logs=("$log")
  ((jobs > 1)) && logs=("$jobdir"/fuzz-*.log)  # each worker's statistics are in its own log
  edges=$(grep -h -m1 -o 'Loaded [0-9]* modules *([0-9]* inline 8-bit counters)' "${logs[@]}" | head -1 | grep -o '([0-9]*' | tr -d '(' || true)
  cov=$(grep -h -o 'cov: [0-9]*' "${logs[@]}" | grep -o '[0-9]*' | sort -n | tail -1 || true)
  execs=$(grep -h -o 'stat::number_of_executed_units: *[0-9]*' "${logs[@]}" | grep -o '[0-9]*$' | awk '{s+=$1} END {if (NR) print s}' || true)
  rate=$(grep -h -o 'stat::average_exec_per_sec: *[0-9]*' "${logs[@]}" | grep -o '[0-9]*$' | awk '{s+=$1} END {if (NR) print s}' || true)
  echo "$t: ${execs:-?} executions (${rate:-?}/s), ${cov:-?} of ${edges:-?} edges covered, exit $rc"
  if [[ $rc -ne 0 ]]; then
    status=1
    echo "  defect found; the log is $log, the input build-fuzz/findings/$t-*:" >&2
    grep -m3 -E 'ERROR: |runtime error|SUMMARY' "$log" | sed 's/^/    /' >&2 || true
  fi
done
exit $status
