#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz with clang-22, ASan and UBSan (in
# the sanitizer build, build-fuzz/: scripts/sanitizer-build.sh; only the
# harnesses and what they link), then runs each harness for SECONDS
# on a copy of its committed seed corpus. Prints one line per harness and exits
# non-zero when a harness finds a crash, a sanitizer report, a leak or a timeout
# (the input is saved under build-fuzz/fuzz-artifacts/).
#   scripts/fuzz.sh                 # 60 s per harness
#   scripts/fuzz.sh 3600            # an hour per harness
#   FUZZ_JOBS=2 scripts/fuzz.sh     # harnesses run 2 at a time (default: 1)
#   FUZZ_HARNESSES="onnx-import" scripts/fuzz.sh 30
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-60}
JOBS=${JOBS:-2}
FUZZ_JOBS=${FUZZ_JOBS:-1}
HARNESSES=${FUZZ_HARNESSES:-"onnx-import problem-reader plan-replay main-job-options program-json npz-reader"}

source scripts/sanitizer-build.sh
BUILD=$SANITIZER_BUILD
configure_sanitizer_build || { echo "fuzz: no sanitizer build"; exit 1; }
ninja -C "$BUILD" -j"$JOBS" pipe-fuzzers > "$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log"; echo "fuzz: the harnesses do not build"; exit 1; }

mkdir -p "$BUILD/fuzz-artifacts" "$BUILD/fuzz-logs"

run_one() {
  local name=$1
  local work="$BUILD/fuzz-corpus/$name"
  mkdir -p "$work"
  # New inputs go to the work corpus; the committed seeds stay as they are.
  "$BUILD/bin/$name-fuzzer" -max_total_time="$SECONDS_PER" -timeout=25 -rss_limit_mb=2560 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$BUILD/fuzz-artifacts/$name-" \
    "$work" "test/fuzz/corpus/$name" > "$BUILD/fuzz-logs/$name.log" 2>&1
  local status=$?
  local runs seconds
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$BUILD/fuzz-logs/$name.log" | tail -1)
  seconds=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$BUILD/fuzz-logs/$name.log" |
    tail -1)
  if [ $status -eq 0 ]; then
    echo "fuzz $name: ok, ${runs:-?} runs in ${seconds:-$SECONDS_PER} s"
  else
    echo "fuzz $name: FAILED (exit $status) after ${runs:-?} runs; see $BUILD/fuzz-logs/$name.log"
    grep -m5 -E "ERROR|SUMMARY|property violated|Test unit written" "$BUILD/fuzz-logs/$name.log"
  fi
  return $status
}

failed=0
pids=()
for name in $HARNESSES; do
  run_one "$name" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$FUZZ_JOBS" ]; then
    wait "${pids[0]}" || failed=$((failed + 1))
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do
  wait "$pid" || failed=$((failed + 1))
done
[ "$failed" -eq 0 ]
