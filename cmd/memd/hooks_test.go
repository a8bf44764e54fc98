package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// `memd sync` runs after_commit and after_sync once each, after the lock is released, with
// the range each step moved HEAD over; a failing hook is a warning naming the key and the
// sync still exits 0. A sync that brings nothing runs no after_sync.
func TestOneShotSyncRunsHooks(t *testing.T) {
	isolateHome(t)
	base := t.TempDir()
	bare, dir, other := filepath.Join(base, "remote.git"), filepath.Join(base, "memory"), filepath.Join(base, "other")
	testutil.RunGit(t, base, "init", "-q", "--bare", "-b", "main", bare)
	if code, _, stderr := runApp(t, "init", dir, "--remote", bare); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	testutil.RunGit(t, base, "clone", "-q", bare, other)
	if err := os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("t\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, other, "add", "-A")
	testutil.RunGit(t, other, "commit", "-q", "-m", "theirs")
	testutil.RunGit(t, other, "push", "-q", "origin", "main")
	theirs := strings.TrimSpace(testutil.RunGit(t, other, "rev-parse", "HEAD"))
	if err := os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	start := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD"))

	out := t.TempDir()
	// The lock must be free while a hook runs: each hook records whether it could see it.
	record := `echo "$MEMD_HOOK $MEMD_OLD_HEAD $MEMD_NEW_HEAD $(tr '\0' , < "$MEMD_CHANGED_FILE") lock=$(test -e .memory.lock && echo held || echo free)" >> "$1/runs"`
	script := filepath.Join(out, "record.sh")
	if err := os.WriteFile(script, []byte(record+"\n"+`[ "$MEMD_HOOK" = after_sync ] && { echo sync hook broke >&2; exit 4; }`+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, "hooks:\n  after_commit: [sh, "+script+", "+out+"]\n  after_sync: [sh, "+script+", "+out+"]\n")
	code, stdout, stderr := runApp(t, "sync", "--config", cfg, "--repo", dir)
	if code != 0 {
		t.Fatalf("sync exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "hooks.after_sync") || !strings.Contains(stderr, "exit status 4") || !strings.Contains(stderr, "sync hook broke") {
		t.Errorf("stderr does not report the failed hook with its key and output:\n%s", stderr)
	}
	b, _ := os.ReadFile(filepath.Join(out, "runs"))
	runs := strings.Split(strings.TrimSpace(string(b)), "\n")
	mine := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD^1"))
	merged := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD"))
	want := []string{
		"after_commit " + start + " " + mine + " mine.txt, lock=free",
		"after_sync " + mine + " " + merged + " theirs.txt, lock=free",
	}
	if len(runs) != 2 || runs[0] != want[0] || runs[1] != want[1] {
		t.Fatalf("hook runs:\n%s\nwant:\n%s\n(theirs %s)", strings.Join(runs, "\n"), strings.Join(want, "\n"), theirs)
	}

	// Nothing new on either side: no hook runs.
	if code, _, stderr := runApp(t, "sync", "--config", cfg, "--repo", dir); code != 0 {
		t.Fatalf("second sync: %d %s", code, stderr)
	}
	if b2, _ := os.ReadFile(filepath.Join(out, "runs")); string(b2) != string(b) {
		t.Errorf("a sync that moved nothing ran a hook:\n%s", b2)
	}
}

// `memd sleep` runs after_sleep once over the phases' commits; a dry run runs nothing.
func TestOneShotSleepRunsHook(t *testing.T) {
	dir := demoRepo(t, 60)
	out := filepath.Join(t.TempDir(), "runs")
	cfg := writeConfig(t, "hooks:\n  after_sleep: [sh, -c, 'echo \"$MEMD_OLD_HEAD $MEMD_NEW_HEAD $(tr -cd \\\\000 < \"$MEMD_CHANGED_FILE\" | wc -c)\" >> \"$1\"', hook, "+out+"]\n")
	start := sleepGit(t, dir, "rev-parse", "HEAD")
	if code, _, errs := runMemd(t, "sleep", "--config", cfg, "--repo", dir, "--now", sleepNow, "--dry-run", "--no-gc"); code != 0 {
		t.Fatalf("dry run: %d %s", code, errs)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("a dry run ran after_sleep")
	}
	if code, _, errs := runMemd(t, "sleep", "--config", cfg, "--repo", dir, "--now", sleepNow, "--no-gc"); code != 0 {
		t.Fatalf("sleep: %d %s", code, errs)
	}
	end := sleepGit(t, dir, "rev-parse", "HEAD")
	if start == end {
		t.Fatal("the demo sleep committed nothing; the test needs a sleep that moves HEAD")
	}
	// A rename lists both paths: both changed for a tool that indexes them.
	n := strings.Count(sleepGit(t, dir, "diff", "--name-only", "--no-renames", strings.TrimSpace(start), strings.TrimSpace(end)), "\n")
	b, _ := os.ReadFile(out)
	if want := strings.TrimSpace(start) + " " + strings.TrimSpace(end) + " " + itoa(n) + "\n"; string(b) != want {
		t.Errorf("after_sleep ran %q, want once: %q", b, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
