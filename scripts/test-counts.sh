# Sourced by scripts/run-tests.sh and scripts/sanitize.sh: adds the results of
# one lit, ctest or pytest report (JUnit XML) to the caller's $passed and $failed.
# Skipped tests count as neither; a missing report counts as one failure.
count_lit() {
  if [ ! -f "$1" ]; then failed=$((failed + 1)); return; fi
  local total bad skipped
  total=$(grep -o '<testcase ' "$1" | wc -l)
  bad=$(grep -o '<failure' "$1" | wc -l)
  skipped=$(grep -o '<skipped' "$1" | wc -l)
  passed=$((passed + total - bad - skipped))
  failed=$((failed + bad))
}

count_ctest() {
  if [ ! -f "$1" ]; then failed=$((failed + 1)); return; fi
  local total bad skipped
  total=$(grep -o '<testcase ' "$1" | wc -l)
  bad=$(grep -c 'status="fail"' "$1" || true)
  skipped=$(grep -c 'status="notrun"\|status="disabled"' "$1" || true)
  passed=$((passed + total - bad - skipped))
  failed=$((failed + bad))
}

# A pytest JUnit report: a test that failed or raised (<failure>, <error>,
# collection errors included) is a failure, a skipped one neither.
count_pytest() {
  if [ ! -f "$1" ]; then failed=$((failed + 1)); return; fi
  local total bad skipped
  total=$(grep -o '<testcase ' "$1" | wc -l)
  bad=$(grep -o '<failure\|<error' "$1" | wc -l)
  skipped=$(grep -o '<skipped' "$1" | wc -l)
  passed=$((passed + total - bad - skipped))
  failed=$((failed + bad))
}
