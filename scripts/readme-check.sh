#!/usr/bin/env bash
# make readme-check (part of make test): the README's own shell blocks, run as written, so the
# README and what works cannot drift apart. scripts/readmecheck/main.go says how blocks are
# marked, where they run (a fresh copy of the repo, a temporary HOME, bin/ first on PATH),
# and which unmarked blocks are skipped and why (go install, systemctl, launchctl, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x bin/memd ] || { echo "readme-check: bin/memd missing: run make build first" >&2; exit 1; }
exec go run ./scripts/readmecheck -readme README.md -repo .
