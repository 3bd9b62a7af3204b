#!/usr/bin/env bash
# Builds the libFuzzer harnesses of test/fuzz with clang-22, ASan and UBSan (in
# build-fuzz/, only the libraries they link), then runs each harness for SECONDS
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
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-2}
FUZZ_JOBS=${FUZZ_JOBS:-1}
HARNESSES=${FUZZ_HARNESSES:-"onnx-import problem-reader plan-replay main-job-options program-json npz-reader"}

if ! command -v clang++-22 > /dev/null; then
  echo "fuzz: clang++-22 is not installed (scripts/setup.sh --tests installs it)"
  exit 1
fi
sanitizers="-fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link"
mkdir -p "$BUILD"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DCMAKE_CXX_FLAGS="$sanitizers -fno-omit-frame-pointer -gline-tables-only" \
    -DCMAKE_C_FLAGS="$sanitizers -fno-omit-frame-pointer -gline-tables-only" \
    -DPIPE_FUZZERS=ON -DPIPE_PARTITIONER_TESTS=OFF > "$BUILD/configure.log" 2>&1 ||
    { cat "$BUILD/configure.log"; echo "fuzz: cmake failed"; exit 1; }
fi
ninja -C "$BUILD" -j"$JOBS" pipe-fuzzers > "$BUILD/build.log" 2>&1 ||
  { tail -40 "$BUILD/build.log"; echo "fuzz: the harnesses do not build"; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
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
