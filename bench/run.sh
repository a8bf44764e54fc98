#!/usr/bin/env bash
# make bench: every benchmark of memd against git on the same data in the same run, written
# as Markdown to bench/RESULTS.md (with the command that made each table). Ratios, not
# absolute times, are the targets: these machines are shared and noisy.
# BENCH_QUICK=1 runs small sizes only (a smoke run).
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/RESULTS.md
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
if [ "${BENCH_QUICK:-}" = 1 ]; then
  commit_args="-sizes 1000,10000 -reps 3"; sync_args="-files 2000 -runs 3"; sleep_args="-n 5000 -ledger 20000"
  status_args="-files 1000,10000 -runs 100"; daemon_args="-sizes 1000 -idle 10s"
  live_args="-files 200 -writes 5 -idle 1m"
  history_sizes="20000"
else
  commit_args="-sizes 1000,10000,100000 -reps 5"; sync_args="-files 10000 -runs 5"; sleep_args="-n 100000 -ledger 100000"
  status_args="-files 1000,100000 -runs 300"; daemon_args="-sizes 1000,10000,100000 -changes 20 -idle 60s"
  live_args="-files 100000 -writes 20 -idle 10m"
  history_sizes="200000 1000000"
fi
# The swarm row (issue 13): N clones of one bare remote, a real `memd run` on each, lock-free
# writers for a while, then the time until one HEAD everywhere. CPU heavy: RUNS runs of N
# daemons. `bench/run.sh swarm` runs this row alone and replaces its section in RESULTS.md.
# MEMD_SWARM_N, MEMD_SWARM_FOR and MEMD_SWARM_RUNS override the size (a lighter row while
# iterating on a shared machine; the table's row is N=10, 60s, 3 runs).
if [ "${BENCH_QUICK:-}" = 1 ]; then
  swarm_n=4 swarm_for=20s swarm_runs=1
else
  swarm_n=10 swarm_for=60s swarm_runs=3
fi
swarm_n=${MEMD_SWARM_N:-$swarm_n} swarm_for=${MEMD_SWARM_FOR:-$swarm_for} swarm_runs=${MEMD_SWARM_RUNS:-$swarm_runs}
swarm() { # swarm FILE: append the swarm section to FILE
  local f=$1 lines="" i line load_before
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "bench: swarm, $swarm_n machines, $swarm_for of writes, $swarm_runs runs" >&2
  for i in $(seq "$swarm_runs"); do
    # A run that loses a write still prints its figures (lost=N); one that never converges
    # prints none ("failed").
    line=$({ MEMD_SWARM_N=$swarm_n MEMD_SWARM_FOR=$swarm_for go test -count=1 -timeout 30m -v -run '^TestReliabilitySwarm$' ./reliability/ 2>&1 || true; } |
      grep -E '^swarm figures:' || echo "swarm figures: failed")
    echo "bench: swarm run $i: $line" >&2
    lines+="$line"$'\n'
  done
  {
    echo "## Swarm: $swarm_n machines, one remote, lock-free writers"
    echo
    echo '```'
    echo "MEMD_SWARM_N=$swarm_n MEMD_SWARM_FOR=$swarm_for go test -count=1 -v -run '^TestReliabilitySwarm\$' ./reliability/   # $swarm_runs runs"
    printf '%s' "$lines"
    echo '```'
    echo
    echo "Load average before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)."
    echo
    echo "| writes | writes lost (must be 0) | s from the last write to one HEAD everywhere (median; target at most 10) | push attempts per commit | share of time .memory.lock is held (target at most 5%) |"
    echo "| ---: | ---: | ---: | ---: | ---: |"
    printf '%s' "$lines" | awk '
      /failed/ { failed++ ; next }
      { for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        n++; writes += v["writes"]; lost += v["lost"]; conv[n] = v["converge_s"] + 0
        push += v["push_attempts_per_commit"]; lock += v["lock_held_share"] }
      END {
        if (n == 0) { print "| - | - | - | - | - |"; exit }
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (conv[j] < conv[i]) { t = conv[i]; conv[i] = conv[j]; conv[j] = t }
        printf "| %d | %d%s | %.1f (runs: ", writes, lost, (failed ? sprintf(" (%d runs failed)", failed) : ""), conv[int((n + 1) / 2)]
        for (i = 1; i <= n; i++) printf "%s%.1f", (i > 1 ? ", " : ""), conv[i]
        printf ") | %.2f | %.1f%% |\n", push / n, 100 * lock / n }'
    echo
  } >>"$f"
}
if [ "${1:-}" = swarm ]; then
  sec=$(mktemp)
  swarm "$sec"
  # Replace the swarm section of RESULTS.md (or append one).
  awk -v secfile="$sec" '
    BEGIN { while ((getline l < secfile) > 0) sec = sec l "\n" }
    /^## Swarm:/ { skip = 1; printf "%s", sec; done = 1; next }
    /^## / && skip { skip = 0 }
    !skip { print }
    END { if (!done) printf "\n%s", sec }' "$out" >"$tmp"
  rm -f "$sec"
  mv "$tmp" "$out"
  trap - EXIT
  echo "bench: wrote the swarm section of $out" >&2
  exit 0
fi
run() { # run TITLE PKG ARGS...
  local title=$1 pkg=$2; shift 2
  echo "bench: $title" >&2
  {
    echo "## $title"
    echo
    echo '```'
    echo "go run ./$pkg $*"
    echo '```'
    echo
    go run "./$pkg" "$@"
    echo
  } >>"$tmp"
}
{
  echo "# memd benchmarks"
  echo
  echo "Made by \`make bench\` on $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(go version | cut -d' ' -f3), $(git --version)."
  echo "Load average at start: $(cut -d' ' -f1-3 /proc/loadavg)."
  echo
} >"$tmp"
run "Commit: memd's commit path vs git add -A && git commit" bench/commit $commit_args
run "Signed commits: memd vs git commit -S of the same change" bench/signcommit -files 1000 -reps 15
run "Sync: fast-forward and diverged merge vs git pull --no-rebase" bench/sync $sync_args
run "Sleep: full run, idle run and expire vs git" bench/sleep $sleep_args
run "memd status vs git status and a minimal Go program" bench/status $status_args
run "The daemon: write-to-commit latency, idle CPU and RSS" bench/daemon $daemon_args
scrape() { # a /metrics scrape of the real inventory of demo repos of each size, through the real handler
  local long=1 res
  [ "${BENCH_QUICK:-}" = 1 ] && long=
  echo "bench: /metrics scrape by repo size" >&2
  res=$(MEMD_LONG=$long go test -run '^$' -bench ScrapeByRepoSize -benchtime 200x -count 5 ./agent/ 2>&1 | grep -E '^Benchmark')
  {
    echo "## /metrics scrape by repo size"
    echo
    echo '```'
    echo "MEMD_LONG=$long go test -run '^\$' -bench ScrapeByRepoSize -benchtime 200x -count 5 ./agent/"
    echo "$res"
    echo '```'
    echo
    # The median of each size against the 1000-file repo's; the target is at most 1.2x.
    echo "$res" | awk '{ split($1, a, "="); sub(/-[0-9]+$/, "", a[2]); n = a[2] + 0; c[n]++; v[n, c[n]] = $3 + 0 }
      END {
        for (n in c) { k = c[n]; for (i = 1; i <= k; i++) s[i] = v[n, i]
          for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (s[j] < s[i]) { t = s[i]; s[i] = s[j]; s[j] = t }
          med[n] = s[int((k + 1) / 2)] }
        for (n in med) if (n != 1000 && (1000 in med))
          printf "files=%d: median %.0f ns per scrape, %.2fx the 1000-file repo (target at most 1.2x)\n\n", n, med[n], med[n] / med[1000] }'
  } >>"$tmp"
}
# A year of history (issue 48): memd log, restore and the page's history against git, and
# the daemon's start-up, commit and status against a 100-commit repo with the same tree.
for n in $history_sizes; do
  run "History: $n commits, memd log and restore vs git" bench/history -commits "$n" -reps 3
done
run "Live remote: A writes, B has it; the looks' idle cost (two daemons, default config)" bench/liveremote $live_args
{
  echo "## Refs: a sync from a remote with 300k refs vs 10"
  echo
  echo '```'
  echo "MEMD_LONG=1 go test -count=1 -v -run '^TestRefsCostRatio\$' ./sync/gitrepo/"
  MEMD_LONG=1 go test -count=1 -v -run '^TestRefsCostRatio$' ./sync/gitrepo/ 2>&1 | grep -E 'refs|PASS|FAIL' || true
  echo '```'
  echo
  echo "## A person's git beside memd's index refresh: index.lock refusals"
  echo
  echo '```'
  echo "MEMD_LONG=1 go test -count=4 -v -run '^TestUserGitNotRefusedByIndexRefresh\$' ./sync/gitrepo/"
  MEMD_LONG=1 go test -count=4 -v -run '^TestUserGitNotRefusedByIndexRefresh$' ./sync/gitrepo/ 2>&1 | grep -E 'refusals|PASS|FAIL' || true
  echo '```'
  echo
  echo "## A fetched 2 GiB blob (a 2 MiB pack at compression 9) and sync.max_file_size"
  echo
  echo '```'
  echo "MEMD_LONG=1 go test -count=1 -v -run '^TestFetchBigBlobRSS\$' ./sync/gitrepo/"
  MEMD_LONG=1 go test -count=1 -v -run '^TestFetchBigBlobRSS$' ./sync/gitrepo/ 2>&1 | grep -E 'RSS|PASS|FAIL' || true
  echo '```'
  echo
} >>"$tmp"
scrape
swarm "$tmp"
{
  echo "## Push after a long history: memd's push vs go-git's PushContext"
  echo
  echo '```'
  echo "go test -run '^\$' -bench BenchmarkPushAfterHistory -benchtime 20x ./sync/gitrepo/"
  go test -run '^$' -bench BenchmarkPushAfterHistory -benchtime 20x ./sync/gitrepo/ 2>&1 | grep -E '^Benchmark' || true
  echo '```'
  echo
} >>"$tmp"
{
  echo "## Go benchmarks"
  echo
  echo '```'
  echo "go test -run '^\$' -bench . -benchtime 3x ./ ./doctor ./metrics ./watcher"
  go test -run '^$' -bench . -benchtime 3x ./ ./doctor ./metrics ./watcher 2>&1 | grep -E '^(Benchmark|ok|PASS)' || true
  echo '```'
} >>"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "bench: wrote $out" >&2
