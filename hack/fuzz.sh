#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME (default 5s) each.
# The seed corpora live in each package's testdata/fuzz/<Target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
failed=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		echo "fuzz: $pkg $t ($fuzztime)" >&2
		if ! go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" -fuzzminimizetime=1s "$pkg" >/tmp/fuzz.$$.log 2>&1; then
			cat /tmp/fuzz.$$.log
			failed=1
		fi
	done
done
rm -f /tmp/fuzz.$$.log
exit $failed
