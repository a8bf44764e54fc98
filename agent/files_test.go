package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/doctor"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
	"github.com/memd-dev/memd/watcher"
)

// TestEveryConsumerSeesTheSameFiles (issue 18 §1): on a tree full of ignored files,
// symlinks, nested repositories, a FIFO and memhtml's non-memories, every consumer of
// internal/repofiles sees the fixture's files through its own entry point: reconcile (git
// status and the walk), the commit's staged set (read back with git), doctor, the
// inventory and the watcher (what it watches and reports). Sleep's parallel walk is
// checked on the same fixture in sleep.TestWalkSeesTheRepoFiles.
func TestEveryConsumerSeesTheSameFiles(t *testing.T) {
	isolateGit(t)
	m := testutil.NewMixedRepo(t)
	ig, err := repofiles.New(m.Root, testutil.MixedRepoIgnore)
	if err != nil {
		t.Fatal(err)
	}
	same := func(who string, got, want []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", who, got, want)
		}
	}
	repo, err := gitrepo.Open(m.Root, gitrepo.Options{Ignore: ig.Ignored})
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()

	// Reconcile, both ways (nothing is committed yet: every file is dirty).
	dirty, err := repo.Reconcile()
	if err != nil {
		t.Fatal(err)
	}
	same("reconcile (git status)", dirty, m.Files)
	t.Run("without git", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		dirty, err := repo.Reconcile()
		if err != nil {
			t.Fatal(err)
		}
		same("reconcile (walk)", dirty, m.Files)
	})

	// The commit's walk: every name at the root, each directory staged by walking it; the
	// staged set read back with git itself.
	ents, err := os.ReadDir(m.Root)
	if err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, e := range ents {
		if e.Name() != ".git" {
			top = append(top, e.Name())
		}
	}
	if _, err := repo.CommitPaths(top); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", m.Root, "ls-tree", "-r", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	var staged, links []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		meta, p, _ := strings.Cut(line, "\t")
		staged = append(staged, p)
		if strings.HasPrefix(meta, "120000 ") {
			links = append(links, p)
		}
	}
	same("commit", staged, m.Files)
	same("commit's symlinks", links, m.Links)

	// Doctor counts every file and reports nothing about what is not one.
	rep, err := doctor.Check(m.Root, doctor.Options{Ignored: ig.Ignored})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != len(m.Files) {
		t.Errorf("doctor counts %d files, want %d", rep.Files, len(m.Files))
	}
	for _, f := range rep.Findings {
		if slices.Contains(m.Decoys, f.Path) {
			t.Errorf("doctor reports on %s, not a file of the repo: %s", f.Path, f.Message)
		}
	}

	// The inventory: the memories and MEMORY.md files among the files.
	cfg := memd.DefaultConfig()
	cfg.Repo = m.Root
	inv := buildInventory(cfg, ig)
	same("inventory memories", slices.Collect(maps.Keys(inv.files)), m.Memories)
	same("inventory MEMORY.md", slices.Collect(maps.Keys(inv.mds)), []string{"projects/p/MEMORY.md"})

	// The watcher, on the same rules: it watches the directories the walk enters, and of
	// every regular file written (decoys too) it reports exactly the repo's.
	w, err := watcher.New(m.Root, watcher.Options{Ignorer: ig, Quiet: 30 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Stats().WatchedDirs; got != len(m.Dirs) {
		t.Errorf("watcher watches %d directories, want %d (%q)", got, len(m.Dirs), m.Dirs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for _, rel := range append(slices.Clone(m.Regular), m.Decoys...) {
		f, err := os.OpenFile(filepath.Join(m.Root, filepath.FromSlash(rel)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteString("more\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Events arrive in order: once the sentinel written last is reported, so is all else.
	const sentinel = "zz-sentinel"
	if err := os.WriteFile(filepath.Join(m.Root, sentinel), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	reported := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for !reported[sentinel] {
		select {
		case b := <-w.Batches():
			for _, p := range b.Paths {
				reported[p] = true
			}
		case <-deadline:
			t.Fatalf("watcher never reported %s; reported %q", sentinel, slices.Sorted(maps.Keys(reported)))
		}
	}
	delete(reported, sentinel)
	same("watcher reports", slices.Collect(maps.Keys(reported)), m.Regular)
	for _, d := range m.Decoys {
		if !w.Ignorer().Ignored(d, false) && !repofiles.InNestedRepo(m.Root, d, nil) {
			t.Errorf("watcher's rules take %s for a file of the repo", d)
		}
	}
}

// TestGitignoreEditReachesTheCommitter: the watcher rebuilds the rules when a .gitignore
// changes and reports what they no longer ignore; the committer adopts the same rules
// before it commits, so that file is committed (the agent once kept its start-up rules and
// dropped it until a restart).
func TestGitignoreEditReachesTheCommitter(t *testing.T) {
	isolateGit(t)
	cfg := memd.DefaultConfig()
	cfg.Repo = newRepo(t)
	gi := filepath.Join(cfg.Repo, ".gitignore")
	orig, err := os.ReadFile(gi)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gi, append(slices.Clone(orig), "*.secret\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	const secret = "areas/20260101-x.secret"
	if err := os.WriteFile(filepath.Join(cfg.Repo, filepath.FromSlash(secret)), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Config: cfg, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.repo.Close()
	w, err := watcher.New(cfg.Repo, watcher.Options{Ignorer: a.ignorer, Quiet: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a.watch = w // as Run does; this test plays the owner goroutine itself
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	go a.readBatches()
	defer func() { cancel(); <-done }()

	if err := os.WriteFile(gi, orig, 0o644); err != nil { // *.secret no longer ignored
		t.Fatal(err)
	}
	var paths []string
	testutil.WaitFor(t, "the watcher to report "+secret, 10*time.Second, func() bool {
		paths = append(paths, a.pending.take()...)
		return slices.Contains(paths, secret)
	}, func() string { return fmt.Sprint(paths) })
	a.pending.add(paths)
	if err := a.doCommit(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", cfg.Repo, "ls-tree", "-r", "--name-only", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), secret) {
		t.Fatalf("%s, no longer ignored, was not committed:\n%s", secret, out)
	}
}

// TestReloadWithBadIgnorePatternIsRejected: the reload builds the rules once, and a bad
// watch.ignore pattern rejects the reload, logged and naming the pattern, instead of
// being swallowed while the rest of the new config applies.
func TestReloadWithBadIgnorePatternIsRejected(t *testing.T) {
	isolateGit(t)
	cfg := memd.DefaultConfig()
	cfg.Repo = newRepo(t)
	bad := cfg
	bad.Watch.Ignore = []string{"*.bak", "[bad"}
	bad.Sync.PullInterval = memd.Duration(time.Hour)
	logs := &testutil.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)),
		LoadConfig: func() (memd.Config, error) { return bad, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.repo.Close()
	before := a.ignorer
	pull, reconcile := time.NewTicker(time.Minute), time.NewTicker(time.Minute)
	defer pull.Stop()
	defer reconcile.Stop()
	a.doReload(pull, reconcile)
	if !strings.Contains(logs.String(), "reload rejected") || !strings.Contains(logs.String(), `[bad`) {
		t.Errorf("no rejection naming the pattern in the log:\n%s", logs.String())
	}
	if a.ignorer != before || a.cfg.Sync.PullInterval == bad.Sync.PullInterval {
		t.Error("a rejected reload changed the running rules or config")
	}
}
