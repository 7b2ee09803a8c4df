#!/usr/bin/env bash
# Copies up to N entries of each fuzz target's cached corpus (from earlier
# `go test -fuzz` runs) into the package's testdata/fuzz/<Target>/ so that
# they become the committed seed corpus that plain `go test` replays.
set -eu
cd "$(dirname "$0")/.."
n=${N:-12}
cache=$(go env GOCACHE)/fuzz
for pkg in $(go list ./...); do
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for t in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
		src="$cache/$pkg/$t"
		[ -d "$src" ] || continue
		mkdir -p "$dir/testdata/fuzz/$t"
		ls "$src" | sort | head -n "$n" | while read -r f; do cp "$src/$f" "$dir/testdata/fuzz/$t/$f"; done
	done
done
