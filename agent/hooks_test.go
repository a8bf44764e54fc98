package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/demo"
	tu "github.com/memd-dev/memd/internal/testutil"
)

// hookRig is a memory repo with a bare remote and a second clone that pushes to it.
type hookRig struct {
	dir, bare, other string
}

func newHookRig(t *testing.T) hookRig {
	t.Helper()
	isolateGit(t)
	dir := newRepo(t)
	bare := filepath.Join(t.TempDir(), "remote.git")
	other := filepath.Join(t.TempDir(), "other")
	for _, c := range [][]string{{"", "init", "-q", "--bare", "-b", "main", bare}, {dir, "remote", "add", "origin", bare},
		{dir, "push", "-q", "origin", "main"}, {"", "clone", "-q", bare, other},
		{other, "config", "user.name", "other"}, {other, "config", "user.email", "other@test"}} {
		if out, err := hostGit.Run(c[0], nil, c[1:]...); err != nil {
			t.Fatalf("git %v: %v\n%s", c[1:], err, out)
		}
	}
	return hookRig{dir: dir, bare: bare, other: other}
}

// push commits one file in the other clone and pushes it; it returns the new commit.
func (r hookRig) push(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(r.other, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(rel+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := hostGit.Run(r.other, nil, "pull", "-q", "--ff-only"); err != nil {
		t.Fatalf("git pull: %v\n%s", err, out)
	}
	for _, c := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "other: " + rel}, {"push", "-q", "origin", "main"}} {
		if out, err := hostGit.Run(r.other, nil, c...); err != nil {
			t.Fatalf("git %v: %v\n%s", c, err, out)
		}
	}
	out, _ := hostGit.Run(r.other, nil, "rev-parse", "HEAD")
	return strings.TrimSpace(out)
}

func startAgent(t *testing.T, cfg memd.Config) (*Agent, *tu.LockedBuffer, func()) {
	t.Helper()
	return startAgentAt(t, cfg, nil)
}

func startAgentAt(t *testing.T, cfg memd.Config, now func() time.Time) (*Agent, *tu.LockedBuffer, func()) {
	t.Helper()
	logs := &tu.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test", Now: now,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	tu.WaitFor(t, "memd running", 20*time.Second, func() bool { return strings.Contains(logs.String(), `msg="memd running"`) }, logs.String)
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("Run did not return\n%s", logs.String())
		}
	}
	return a, logs, stop
}

func describeRig(logs *tu.LockedBuffer, rig hookRig) string {
	var b strings.Builder
	b.WriteString(logs.String())
	for _, d := range []string{rig.dir, rig.bare, rig.other} {
		gl, _ := hostGit.Run(d, nil, "log", "--all", "--graph", "--stat", "--format=%h %an %s")
		fmt.Fprintf(&b, "\n%s:\n%s", d, gl)
	}
	return b.String()
}

func hookConfig(dir string) memd.Config {
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(100 * time.Millisecond)
	cfg.Watch.MaxDelay = memd.Duration(time.Second)
	cfg.HTTP.Listen = ""
	cfg.Sleep.CatchUp = false
	cfg.Sync.PullInterval = memd.Duration(time.Hour) // the test kicks each sync
	return cfg
}

func head(t *testing.T, dir string) string {
	out, _ := hostGit.Run(dir, nil, "rev-parse", "HEAD")
	return strings.TrimSpace(out)
}

// A hook that sleeps 10 s never holds the owner up: five syncs, each bringing a commit, all
// land while the first run still sleeps, and the burst waits as one more run.
func TestHookNeverBlocksTheOwner(t *testing.T) {
	rig := newHookRig(t)
	started := filepath.Join(t.TempDir(), "started")
	cfg := hookConfig(rig.dir)
	cfg.Hooks.AfterSync = []string{"sh", "-c", `echo "$MEMD_OLD_HEAD..$MEMD_NEW_HEAD" >> "$1"; sleep 10`, "hook", started}
	old := hookStopGrace
	hookStopGrace = 100 * time.Millisecond
	defer func() { hookStopGrace = old }()
	a, logs, stop := startAgent(t, cfg)
	defer stop()
	first := head(t, rig.dir)
	var want string
	for i := 0; i < 5; i++ {
		want = rig.push(t, "notes/f"+string(rune('0'+i))+".txt")
		a.KickSync()
		tu.WaitFor(t, "sync "+string(rune('1'+i))+" to land", 20*time.Second, func() bool { return head(t, rig.dir) == want }, func() string { return describeRig(logs, rig) })
	}
	runs, _ := os.ReadFile(started)
	lines := strings.Fields(string(runs))
	if len(lines) != 1 || !strings.HasPrefix(lines[0], first+"..") {
		t.Fatalf("hook runs while five syncs landed: %q (want one, from %s, still sleeping)", lines, first)
	}
	if !a.hooks.Busy() {
		t.Fatal("the hook is no longer running: the syncs did not happen while it slept")
	}
}

// Each hook follows its own step with the changed paths; a failing hook is a warning in the
// status naming the last line of its stderr, a metric and a log line, and the sync it
// followed stays good.
func TestHooksAfterCommitAndFailingSync(t *testing.T) {
	rig := newHookRig(t)
	out := t.TempDir()
	cfg := hookConfig(rig.dir)
	cfg.Hooks.AfterCommit = []string{"sh", "-c", `tr '\0' '\n' < "$MEMD_CHANGED_FILE" >> "$1/commit"`, "hook", out}
	cfg.Hooks.AfterSync = []string{"sh", "-c", `tr '\0' '\n' < "$MEMD_CHANGED_FILE" >> "$1/sync"; echo warming up >&2; echo broken >&2; exit 7`, "hook", out}
	a, logs, stop := startAgent(t, cfg)
	defer stop()

	if err := os.MkdirAll(filepath.Join(rig.dir, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rig.dir, "notes", "mine.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(name string) string { b, _ := os.ReadFile(filepath.Join(out, name)); return string(b) }
	tu.WaitFor(t, "after_commit to list notes/mine.txt", 20*time.Second, func() bool { return read("commit") == "notes/mine.txt\n" }, logs.String)

	tu.WaitFor(t, "memd to push its commit", 20*time.Second, func() bool { return head(t, rig.bare) == head(t, rig.dir) }, logs.String)
	want := rig.push(t, "notes/theirs.txt")
	a.KickSync()
	tu.WaitFor(t, "the sync to land and its hook to run", 20*time.Second, func() bool { return head(t, rig.dir) == want && read("sync") != "" }, logs.String)
	var doc struct {
		State    string   `json:"state"`
		Warnings []string `json:"warnings"`
		Events   []struct {
			Kind, Text string
		} `json:"events"`
	}
	failedEvent := func() bool {
		for _, e := range doc.Events {
			if e.Kind == "warn" && e.Text == "hooks.after_sync failed: exit status 7: broken" {
				return true
			}
		}
		return false
	}
	// The failure is a warning while it lasts and one event in the log (the mod's stream).
	tu.WaitFor(t, "status warn and an event naming the hook", 20*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(cfg.StateDir(), "status.json"))
		_ = json.Unmarshal(b, &doc)
		return doc.State == "warn" && len(doc.Warnings) == 1 && doc.Warnings[0] == "hooks.after_sync failed: exit status 7: broken" && failedEvent()
	}, func() string { return fmt.Sprintf("%+v", doc) })
	if got := read("sync"); got != "notes/theirs.txt\n" {
		t.Errorf("after_sync listed %q", got)
	}
	if err := testutil.GatherAndCompare(a.metrics.Registry(), strings.NewReader(`
# HELP memd_hook_runs_total Hook runs (hooks: in the config), by hook and result (ok, error, timeout).
# TYPE memd_hook_runs_total counter
memd_hook_runs_total{hook="after_commit",result="error"} 0
memd_hook_runs_total{hook="after_commit",result="ok"} 1
memd_hook_runs_total{hook="after_commit",result="timeout"} 0
memd_hook_runs_total{hook="after_sleep",result="error"} 0
memd_hook_runs_total{hook="after_sleep",result="ok"} 0
memd_hook_runs_total{hook="after_sleep",result="timeout"} 0
memd_hook_runs_total{hook="after_sync",result="error"} 1
memd_hook_runs_total{hook="after_sync",result="ok"} 0
memd_hook_runs_total{hook="after_sync",result="timeout"} 0
`), "memd_hook_runs_total"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), `msg="hook failed" hook=after_sync`) || !strings.Contains(logs.String(), "broken") {
		t.Errorf("no log line for the failed hook with its output\n%s", logs.String())
	}
}

// A scheduled sleep that commits runs after_sleep once, over the whole run's commits.
func TestHookAfterSleep(t *testing.T) {
	isolateGit(t)
	dir := filepath.Join(t.TempDir(), "memory")
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	if _, err := demo.Generate(dir, demo.Options{Memories: 60, Now: now, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "demo"}} {
		if out, err := hostGit.Run(dir, nil, c...); err != nil {
			t.Fatalf("git %v: %v\n%s", c, err, out)
		}
	}
	out := filepath.Join(t.TempDir(), "runs")
	cfg := hookConfig(dir)
	cfg.Hooks.AfterSleep = []string{"sh", "-c", `echo "$MEMD_OLD_HEAD $MEMD_NEW_HEAD" >> "$1"`, "hook", out}
	start := head(t, dir)
	a, logs, stop := startAgentAt(t, cfg, func() time.Time { return now })
	defer stop()
	a.sleepTrigger(now)
	var end string
	tu.WaitFor(t, "after_sleep to run", 20*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		end = head(t, dir)
		return string(b) != ""
	}, logs.String)

	b, _ := os.ReadFile(out)
	if end == start || string(b) != start+" "+end+"\n" {
		t.Errorf("after_sleep ran %q; HEAD went %s..%s", b, start, end)
	}
}

// TestSleepHeldByAGitLockRunsWhenItGoes: a sleep slot that comes while a git holds
// index.lock waits for the repo, and runs as soon as the lock is gone (the gate's poll),
// not at the schedule's next catch-up check a minute later.
func TestSleepHeldByAGitLockRunsWhenItGoes(t *testing.T) {
	isolateGit(t)
	dir := filepath.Join(t.TempDir(), "memory")
	now := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	if _, err := demo.Generate(dir, demo.Options{Memories: 60, Now: now, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "demo"}} {
		if out, err := hostGit.Run(dir, nil, c...); err != nil {
			t.Fatalf("git %v: %v\n%s", c, err, out)
		}
	}
	out := filepath.Join(t.TempDir(), "runs")
	cfg := hookConfig(dir)
	cfg.Sleep.CatchUp = false
	cfg.Hooks.AfterSleep = []string{"sh", "-c", `echo ran >> "$1"`, "hook", out}
	a, logs, stop := startAgentAt(t, cfg, func() time.Time { return now })
	defer stop()
	lock := filepath.Join(dir, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil { // a person's git at work
		t.Fatal(err)
	}
	a.sleepTrigger(now)
	tu.WaitFor(t, "the sleep to wait for the repo", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "sleep waits for the repo")
	}, logs.String)
	if b, _ := os.ReadFile(out); len(b) != 0 {
		t.Fatalf("the sleep ran beside the git's index.lock: %q", b)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	tu.WaitFor(t, "the waiting sleep to run once the lock is gone", 20*time.Second, func() bool {
		b, _ := os.ReadFile(out)
		return string(b) == "ran\n"
	}, logs.String)
}
