#!/usr/bin/env bash
# Runs every test: the lit suite (dialects, importer, passes, tools), the
# partitioner's gtest suite through ctest, the Python package's tests (pytest), the
# runtime's kernel conformance suite, the install check (scripts/test-install.sh:
# examples/downstream built against cmake --install, one test), lit and ctest
# again under ASan + UBSan (scripts/sanitize.sh; SANITIZE=0 skips them), and the
# fuzz harnesses (FUZZ_SECONDS each, default 20; FUZZ_SECONDS=0 skips them),
# each harness counting as one test.
# Ends with one line `N passed, M failed` and exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
ninja -C "$BUILD_DIR" -j"$JOBS" || { echo "0 passed, 1 failed"; exit 1; }

source scripts/test-counts.sh
passed=0
failed=0
report=$(mktemp -d)

echo "== lit"
/usr/lib/llvm-22/bin/lit -sv -j"$JOBS" --xunit-xml-output "$report/lit.xml" "$BUILD_DIR/test"
count_lit "$report/lit.xml"

if [ -f "$BUILD_DIR/CTestTestfile.cmake" ]; then
  echo "== ctest"
  (cd "$BUILD_DIR" && ctest -j"$JOBS" --output-on-failure --output-junit "$report/ctest.xml") || true
  count_ctest "$report/ctest.xml"
fi

# The Python package's tests (python/tests, pytest) on the package in python/ and
# its compiled planners, pipe_opt._native, from this build (docs/python.md); the
# tools they compare with are this build's.
echo "== python"
if /usr/bin/python3 -c "import pytest" 2> /dev/null; then
  build_abs=$(cd "$BUILD_DIR" && pwd)
  # One pytest worker per job when pytest-xdist is there (each test runs
  # whole programs, so they spread well).
  parallel=()
  if /usr/bin/python3 -c "import xdist" 2> /dev/null; then parallel=(-n "$JOBS"); fi
  PYTHONPATH="$PWD/python:$build_abs/python${PYTHONPATH:+:$PYTHONPATH}" \
    PIPE_OPT="${PIPE_OPT:-$build_abs/bin/pipe-opt}" PIPE_PLAN="${PIPE_PLAN:-$build_abs/bin/pipe-plan}" \
    /usr/bin/python3 -m pytest -v -rs -p no:cacheprovider "${parallel[@]}" --junitxml="$report/py.xml" \
    python/tests > "$report/py.log" 2>&1
  py_status=$?
  cat "$report/py.log"
  before=$failed
  count_pytest "$report/py.xml"
  # pytest failing with no failed test in its report (it could not start): one failure.
  if [ "$py_status" != 0 ] && [ "$failed" = "$before" ]; then
    failed=$((failed + 1))
  fi
else
  echo "python3-pytest is not installed (scripts/setup.sh --tests installs it)"
  failed=$((failed + 1))
fi

# The runtime's kernels against PyTorch (runtime/test/conformance), over the
# first libpiperun.so found: $PIPE_RUNTIME_LIB, the top-level build, the
# runtime's own build. Twice: on the CPU backend, and on the emulated device
# (tensors in device memory the host cannot touch, every kernel staged).
echo "== runtime kernel conformance"
runtime_lib=""
for candidate in "${PIPE_RUNTIME_LIB:-}" "$BUILD_DIR/lib/libpiperun.so" \
                 "$BUILD_DIR/runtime/lib/libpiperun.so" build-runtime/lib/libpiperun.so; do
  if [ -n "$candidate" ] && [ -f "$candidate" ]; then
    runtime_lib=$(realpath "$candidate")
    break
  fi
done
if [ -z "$runtime_lib" ]; then
  echo "libpiperun.so is not built: skipped"
else
  for backend in cpu emulated; do
    log="$report/kernels-$backend.log"
    if PIPE_RUNTIME_LIB="$runtime_lib" /usr/bin/python3 runtime/test/conformance/run.py \
         --backend "$backend" > "$log" 2>&1; then
      k_ok=1
    else
      k_ok=0
    fi
    cat "$log"
    k_ran=$(sed -n 's/^Ran \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    k_skipped=$(grep -c '\.\.\. skipped' "$log" || true)
    k_failed=$(grep -c '\.\.\. \(FAIL\|ERROR\)$' "$log" || true)
    k_ran=${k_ran:-0}
    if [ "$k_ok" = 0 ] && [ "$k_failed" = 0 ]; then k_failed=1; fi
    passed=$((passed + k_ran - k_skipped - k_failed))
    failed=$((failed + k_failed))
  done
fi

# cmake --install and examples/downstream built against it (one test).
echo "== install"
if BUILD_DIR="$BUILD_DIR" JOBS="$JOBS" scripts/test-install.sh; then
  passed=$((passed + 1))
else
  failed=$((failed + 1))
fi

# The lit suite and ctest again on the ASan + UBSan build (scripts/sanitize.sh,
# which builds it: the same build directory the fuzz harnesses use). SANITIZE=0
# skips it.
if [ "${SANITIZE:-1}" != 0 ]; then
  echo "== sanitizers"
  JOBS="$JOBS" scripts/sanitize.sh | tee "$report/sanitize.log"
  summary=$(tail -1 "$report/sanitize.log")
  if [[ "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
  else
    failed=$((failed + 1))
  fi
fi

FUZZ_SECONDS=${FUZZ_SECONDS:-20}
if [ "$FUZZ_SECONDS" != 0 ]; then
  echo "== fuzz"
  FUZZ_JOBS=${FUZZ_JOBS:-$JOBS} scripts/fuzz.sh "$FUZZ_SECONDS" | tee "$report/fuzz.log"
  fuzz_status=${PIPESTATUS[0]}
  fuzz_ok=$(grep -c '^fuzz .*: ok' "$report/fuzz.log" || true)
  fuzz_failed=$(grep -c '^fuzz .*: FAILED' "$report/fuzz.log" || true)
  # A harness that does not build or run at all is a failure too.
  if [ "$fuzz_status" != 0 ] && [ "$fuzz_failed" = 0 ]; then fuzz_failed=1; fi
  passed=$((passed + fuzz_ok))
  failed=$((failed + fuzz_failed))
fi

rm -rf "$report"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
