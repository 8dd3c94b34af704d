#!/usr/bin/env bash
# Runs the command given as arguments, passing its output through, and
# when it fails repeats every "--- FAIL" line of that output at the end,
# each with the lines of its report that follow it (log lines left out).
# A long run's failure report is then the last thing printed, where a
# truncated CI log still shows it.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo
	echo "==== failed tests, repeated from the output above ===="
	awk '
		/^[[:space:]]*--- FAIL/ { n = 12; print; next }
		n > 0 && /^[[:space:]]*(--- |=== |ok |FAIL|PASS)/ { n = 0 }
		n > 0 && !/^[0-9][0-9][0-9][0-9]\/[0-9][0-9]\/[0-9][0-9] / && !/time=[0-9-]+T/ { print; n-- }
	' "$log"
	echo "==== exit status $rc ===="
fi
exit "$rc"
