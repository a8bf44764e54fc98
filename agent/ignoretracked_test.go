package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// TestRemoteGitignoreNeverHidesTrackedEdits: another machine pushes a .gitignore with
// *.html and *.jsonl; memd run on this one still commits and pushes edits to a tracked
// memory and to memory.jsonl as they are made (the watcher, not the 10-minute reconcile),
// and never commits a new file those rules ignore.
func TestRemoteGitignoreNeverHidesTrackedEdits(t *testing.T) {
	isolateGit(t)
	root := t.TempDir()
	bare, seed, dir, other := filepath.Join(root, "remote.git"), filepath.Join(root, "seed"), filepath.Join(root, "a"), filepath.Join(root, "b")
	gitOK(t, root, "init", "-q", "--bare", "-b", "main", bare)
	gitOK(t, root, "init", "-q", "-b", "main", seed)
	put := func(dir, rel, content string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(seed, "resources/m/a.html", "<p>a</p>\n")
	put(seed, "memory.jsonl", "{\"id\":\"1\"}\n")
	gitOK(t, seed, "add", "-A")
	gitOK(t, seed, "commit", "-q", "-m", "seed")
	gitOK(t, seed, "push", "-q", bare, "main")
	gitOK(t, root, "clone", "-q", bare, dir)
	gitOK(t, root, "clone", "-q", bare, other)

	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(100 * time.Millisecond)
	cfg.Watch.MaxDelay = memd.Duration(time.Second)
	cfg.Sleep.CatchUp = false
	logs := &testutil.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)),
		LoadConfig: func() (memd.Config, error) { return cfg, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	defer func() {
		cancel()
		<-runErr
	}()
	testutil.WaitFor(t, "memd running", 20*time.Second, func() bool { return strings.Contains(logs.String(), `msg="memd running"`) }, logs.String)

	put(other, ".gitignore", "*.html\n*.jsonl\n")
	gitOK(t, other, "add", ".gitignore")
	gitOK(t, other, "commit", "-q", "-m", "ignore")
	gitOK(t, other, "push", "-q", "origin", "main")
	a.KickSync()
	testutil.WaitFor(t, "the remote's .gitignore adopted", 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "ignore rules reloaded")
	}, logs.String)

	put(dir, "resources/m/a.html", "<p>a, edited under *.html</p>\n")
	put(dir, "memory.jsonl", "{\"id\":\"1\"}\n{\"id\":\"2\"}\n")
	put(dir, "resources/m/new.html", "<p>untracked and ignored</p>\n")
	testutil.WaitFor(t, "tracked edits committed and pushed", 20*time.Second, func() bool {
		m, err1 := hostGit.Run(bare, nil, "show", "main:resources/m/a.html")
		l, err2 := hostGit.Run(bare, nil, "show", "main:memory.jsonl")
		return err1 == nil && err2 == nil && strings.Contains(m, "edited") && strings.Contains(l, `"2"`)
	}, logs.String)
	if _, ok := committed(t, dir, "resources/m/new.html"); ok {
		t.Fatal("an untracked file the rules ignore was committed")
	}
}
