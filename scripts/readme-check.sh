#!/usr/bin/env bash
# The README's commands as a script (make test runs it), so a README that stops working fails
# the build. Uses bin/memd and a temp dir; every wait is a poll with a deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
memd="$PWD/bin/memd"
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config" GIT_CONFIG_NOSYSTEM=1
mkdir -p "$HOME"
repo="$tmp/memory"
step() { echo "readme-check: $*"; }
wait_for() { # wait_for SECONDS CMD...: poll until CMD succeeds
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || { echo "readme-check: timed out waiting for: $*" >&2; return 1; }
    sleep 0.2
  done
}

step "memd version"
"$memd" version | grep -q '^memd '

step "memd init --demo"
"$memd" init "$repo" --demo
git -C "$repo" log --oneline | grep -q 'memd: init'
[ -z "$(git -C "$repo" status --porcelain)" ]

step "memd sleep --dry-run writes nothing"
head=$(git -C "$repo" rev-parse HEAD)
"$memd" sleep --repo "$repo" --dry-run >/dev/null
[ "$(git -C "$repo" rev-parse HEAD)" = "$head" ]

step "memd sleep, then memd doctor is clean"
"$memd" sleep --repo "$repo" >/dev/null
"$memd" doctor --repo "$repo" >/dev/null

step "memd status before run"
"$memd" status --repo "$repo" | grep -q 'memd'

step "memd run commits a change"
cat > "$tmp/config.yaml" <<YAML
watch: {quiet: 200ms, max_delay: 2s}
http: {listen: "127.0.0.1:0"}
YAML
"$memd" run --repo "$repo" --config "$tmp/config.yaml" 2>"$tmp/run.log" &
pid=$!
wait_for 30 test -s "$repo/.git/memd/status.json"
f=$(ls "$repo"/areas/inbox/*.html | head -1)
echo '<!-- edited -->' >> "$f"
wait_for 30 sh -c "git -C '$repo' log -1 --format=%s | grep -q '^memd: +0 ~1'"
"$memd" status --repo "$repo" --format plain | grep -q 'memd'
kill -TERM "$pid"; wait "$pid"; pid=""

step "memd sync with a bare remote"
git init -q --bare "$tmp/remote.git"
git -C "$repo" remote add origin "$tmp/remote.git"
"$memd" sync --repo "$repo"
[ "$(git -C "$tmp/remote.git" rev-parse main)" = "$(git -C "$repo" rev-parse HEAD)" ]

step "memd service print"
"$memd" service print --systemd | grep -q 'ExecStart='
"$memd" service print --launchd | grep -q '<plist'

echo "readme-check: ok"
