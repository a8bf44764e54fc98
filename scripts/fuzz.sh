#!/usr/bin/env bash
# Runs every Fuzz* target in the module for $FUZZTIME each (go test allows one target per run).
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-5s}
found=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for fn in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    found=$((found+1))
    echo "fuzz $pkg $fn ($FUZZTIME)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$FUZZTIME" "$pkg" >/tmp/memd-fuzz.log 2>&1 || { cat /tmp/memd-fuzz.log; exit 1; }
  done
done
echo "fuzz: $found targets ok"
