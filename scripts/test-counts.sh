# Sourced by scripts/run-tests.sh and scripts/sanitize.sh: adds the results of
# one lit, ctest or pytest report (JUnit XML) to the caller's $passed and $failed.
# Skipped tests count as neither; a missing report counts as one failure.
# count_junit FILE FAILED SKIPPED: the report's test cases, those matching the
# grep pattern FAILED counted as failures and those matching SKIPPED as neither.
count_junit() {
  if [ ! -f "$1" ]; then failed=$((failed + 1)); return; fi
  local total bad skipped
  total=$(grep -o '<testcase ' "$1" | wc -l)
  bad=$(grep -o "$2" "$1" | wc -l)
  skipped=$(grep -o "$3" "$1" | wc -l)
  passed=$((passed + total - bad - skipped))
  failed=$((failed + bad))
}

count_lit() { count_junit "$1" '<failure' '<skipped'; }
count_ctest() { count_junit "$1" 'status="fail"' 'status="notrun"\|status="disabled"'; }
# pytest: a test that failed or raised (<failure>, <error>, collection errors
# included) is a failure.
count_pytest() { count_junit "$1" '<failure\|<error' '<skipped'; }
