package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/internal/testutil"
)

// gitOK runs git in dir and fails the test on error.
func gitOK(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

type pausedDoc struct {
	State  string `json:"state"`
	Paused *struct {
		Reason string `json:"reason"`
	} `json:"paused"`
}

func readPaused(t *testing.T, cfg memd.Config) pausedDoc {
	var d pausedDoc
	b, err := os.ReadFile(filepath.Join(cfg.StateDir(), "status.json"))
	if err == nil {
		_ = json.Unmarshal(b, &d)
	}
	return d
}

// brakeWorld is a bare remote with 30 memories in resources/m/, cloned to dir (memd's, with
// sync.max_deletes 5) and other (another machine).
func brakeWorld(t *testing.T) (bare, dir, other string, cfg memd.Config) {
	t.Helper()
	isolateGit(t)
	root := t.TempDir()
	bare, seed, dir, other := filepath.Join(root, "remote.git"), filepath.Join(root, "seed"), filepath.Join(root, "a"), filepath.Join(root, "b")
	gitOK(t, root, "init", "-q", "--bare", "-b", "main", bare)
	gitOK(t, root, "init", "-q", "-b", "main", seed)
	for i := range 30 {
		p := filepath.Join(seed, "resources", "m", fmt.Sprintf("n%02d.html", i))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(fmt.Sprintf("<p>%d</p>\n", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitOK(t, seed, "add", "-A")
	gitOK(t, seed, "commit", "-q", "-m", "seed")
	gitOK(t, seed, "push", "-q", bare, "main")
	gitOK(t, root, "clone", "-q", bare, dir)
	gitOK(t, root, "clone", "-q", bare, other)

	cfg = memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(100 * time.Millisecond)
	cfg.Watch.MaxDelay = memd.Duration(time.Second)
	cfg.Sync.MaxDeletes = 5
	cfg.Sync.CheckInterval = memd.Duration(time.Second)
	cfg.Sleep.CatchUp = false
	return bare, dir, other, cfg
}

// runBrakeAgent starts memd run on cfg; stop ends it (and waits).
func runBrakeAgent(t *testing.T, cfg memd.Config) (a *Agent, logs *testutil.LockedBuffer, stop func()) {
	t.Helper()
	logs = &testutil.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)),
		LoadConfig: func() (memd.Config, error) { return cfg, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-runErr; err != nil {
				t.Errorf("memd run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return a, logs, stop
}

func removeMemories(t *testing.T, dir string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := os.Remove(filepath.Join(dir, "resources", "m", fmt.Sprintf("n%02d.html", i))); err != nil {
			t.Fatal(err)
		}
	}
}

// memoriesAt counts the memories in rev's resources/m/ in dir.
func memoriesAt(t *testing.T, dir, rev string) int {
	out := gitOK(t, dir, "ls-tree", "--name-only", rev, "resources/m/")
	if out == "" {
		return 0
	}
	return strings.Count(out, "\n") + 1
}

func waitPaused(t *testing.T, cfg memd.Config, what string, ok func(reason string) bool, logs *testutil.LockedBuffer) {
	t.Helper()
	testutil.WaitFor(t, what, 20*time.Second, func() bool {
		d := readPaused(t, cfg)
		return d.State == "paused" && d.Paused != nil && ok(d.Paused.Reason)
	}, logs.String)
}

// TestMassDeletionPausesDaemon: memd run on clone A of a bare remote with 30 memories and
// sync.max_deletes 5. An rm of 12 is held (paused, the reason names count and side) until
// allow-deletes; then another machine's push deleting 12 is held the same way. The rm is
// made as memd starts: whether the start-up reconcile commits a part of it or not, the
// brake's window judges it whole.
func TestMassDeletionPausesDaemon(t *testing.T) {
	bare, dir, other, cfg := brakeWorld(t)
	a, logs, _ := runBrakeAgent(t, cfg)
	removeMemories(t, dir, 0, 12)
	waitPaused(t, cfg, "state paused (local)", func(reason string) bool {
		return strings.HasPrefix(reason, "mass deletion: 12 memory files deleted locally") && strings.Contains(reason, "(of 30")
	}, logs)
	// A part under the bar may be in (the reconcile's), never the whole rm.
	if n := memoriesAt(t, dir, "HEAD"); n < 30-cfg.Sync.MaxDeletes-1 {
		t.Fatalf("HEAD holds %d of 30 memories: the held deletion was committed", n)
	}
	sd, err := statedir.Open(cfg.StateDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if err := sd.AllowDeletes(time.Now()); err != nil { // memd resume --allow-deletes
		t.Fatal(err)
	}
	testutil.WaitFor(t, "deletion let through and pushed", 30*time.Second, func() bool {
		out, err := hostGit.Run(bare, nil, "ls-tree", "--name-only", "main", "resources/m/")
		return err == nil && strings.Count(out, "\n") == 18 && readPaused(t, cfg).State != "paused"
	}, logs.String)
	if sd.DeletesAllowed() {
		t.Fatal("allow-deletes not taken")
	}

	// Another machine deletes 12 of the 18 left and pushes: held, not merged.
	gitOK(t, other, "pull", "-q", "origin", "main")
	for i := 12; i < 24; i++ {
		gitOK(t, other, "rm", "-q", fmt.Sprintf("resources/m/n%02d.html", i))
	}
	gitOK(t, other, "commit", "-q", "-m", "rm -r the wrong folder")
	gitOK(t, other, "push", "-q", "origin", "main")
	mine := gitOK(t, dir, "rev-parse", "HEAD")
	a.KickSync()
	remote := "mass deletion: 12 memory files deleted by the remote (of 18); memd resume --allow-deletes lets it through"
	waitPaused(t, cfg, "state paused (remote)", func(reason string) bool { return reason == remote }, logs)
	if got := gitOK(t, dir, "rev-parse", "HEAD"); got != mine {
		t.Fatal("the remote's mass deletion was merged")
	}
	if _, err := os.Stat(filepath.Join(dir, "resources", "m", "n12.html")); err != nil {
		t.Fatalf("a file the remote deleted is gone: %v", err)
	}
}

// TestMassDeletionWindowSpansBatchesAndRestart: an rm of 8 of 30 (sync.max_deletes 5) in
// two parts of 4, a restart of memd between them. Each part alone passes the brake; the
// second is held because the window (kept in the state directory) still holds the first.
func TestMassDeletionWindowSpansBatchesAndRestart(t *testing.T) {
	bare, dir, _, cfg := brakeWorld(t)
	_, logs, stop := runBrakeAgent(t, cfg)
	testutil.WaitFor(t, "memd running", 20*time.Second, func() bool { return strings.Contains(logs.String(), `msg="start-up reconcile done"`) }, logs.String)
	removeMemories(t, dir, 0, 4)
	testutil.WaitFor(t, "first part committed and pushed", 20*time.Second, func() bool {
		return memoriesAt(t, bare, "main") == 26
	}, logs.String)
	stop()

	_, logs, _ = runBrakeAgent(t, cfg)
	removeMemories(t, dir, 4, 8)
	want := "mass deletion: 8 memory files deleted locally in the last 10 minutes (of 30; 4 already in); memd resume --allow-deletes lets the rest through"
	waitPaused(t, cfg, "second part held", func(reason string) bool { return reason == want }, logs)
	if n := memoriesAt(t, dir, "HEAD"); n != 26 {
		t.Fatalf("HEAD holds %d memories, want 26: the second part was committed", n)
	}
	if n := memoriesAt(t, bare, "main"); n != 26 {
		t.Fatalf("the remote holds %d memories, want 26", n)
	}
}
