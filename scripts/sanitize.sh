#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# every target of the sanitizer build (scripts/sanitizer-build.sh: clang-22,
# -O1, ASan + UBSan without recovery, leak checking on; the same build the fuzz
# harnesses use), then runs the lit suite and ctest (the partitioner's and the
# runtime's tests) on it. A sanitizer report fails the test it happens in.
# Python-hosted suites (the Python tests, the kernel conformance suite) are not
# run here: the interpreter is not instrumented.
# Ends with one line `N passed, M failed` and exits non-zero on any failure.
#   scripts/sanitize.sh
#   SANITIZER_BUILD=build-asan scripts/sanitize.sh
set -uo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
source scripts/sanitizer-build.sh
source scripts/test-counts.sh
configure_sanitizer_build || { echo "0 passed, 1 failed"; exit 1; }
echo "== sanitizer build ($SANITIZER_BUILD)"
ninja -C "$SANITIZER_BUILD" -j"$JOBS" > "$SANITIZER_BUILD/build.log" 2>&1 ||
  { tail -40 "$SANITIZER_BUILD/build.log"; echo "sanitize: the build failed"; echo "0 passed, 1 failed"; exit 1; }
report=$(mktemp -d)
passed=0
failed=0

echo "== lit (sanitized)"
/usr/lib/llvm-22/bin/lit -sv -j"$JOBS" --xunit-xml-output "$report/lit.xml" "$SANITIZER_BUILD/test"
count_lit "$report/lit.xml"

# The longest randomized partitioner tests run a tenth of their trials here
# (each costs about ten times more); the plain build runs them all.
export PARTITIONER_TEST_TRIAL_SCALE=0.1
echo "== ctest (sanitized)"
(cd "$SANITIZER_BUILD" && ctest -j"$JOBS" -E "mpi|Mpi" --output-on-failure \
   --output-junit "$report/ctest.xml") || true
count_ctest "$report/ctest.xml"
# Open MPI keeps memory until exit in components it has unloaded by then, so
# LeakSanitizer cannot tell its allocations from ours: the MPI tests run with
# every check but leak detection. The threads transport runs the same rank
# code with leak detection on.
echo "== ctest, MPI (sanitized, no leak detection)"
(cd "$SANITIZER_BUILD" && ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" \
   ctest -j"$JOBS" -R "mpi|Mpi" --output-on-failure --output-junit "$report/ctest-mpi.xml") || true
count_ctest "$report/ctest-mpi.xml"
rm -rf "$report"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
