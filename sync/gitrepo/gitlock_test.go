package gitrepo

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitstore"
)

func TestClearStaleIndexLock(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	lock := filepath.Join(dir, ".git/index.lock")
	// No lock: nothing to do.
	if err := r.ClearStaleIndexLock(); err != nil {
		t.Fatal(err)
	}
	// A crashed git's lock: old and no git process in the repo.
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lock, old, old)
	if err := r.ClearStaleIndexLock(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale lock not removed")
	}
	// Then git works again.
	testutil.WriteFile(t, dir, "a.md", "a")
	testutil.RunGit(t, dir, "add", "a.md")
}

func TestIndexLockOfLiveGitIsKept(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	if _, canSee := r.liveGitProcess(); !canSee {
		t.Skip("no /proc: liveness is by age only")
	}
	// A real git process running in the repo (it waits on stdin).
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Dir = dir
	cmd.Env = testutil.GitEnv()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testutil.WaitFor(t, "git process visible", 5*time.Second, func() bool {
		live, _ := r.liveGitProcess()
		return live
	}, nil)
	lock := filepath.Join(dir, ".git/index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lock, old, old) // even an old lock is live while git runs
	err = r.clearStaleLock(lock, 200*time.Millisecond, 0)
	if !errors.Is(err, gitstore.ErrLocked) {
		t.Fatalf("want gitstore.ErrLocked while git runs, got %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal("a live git's lock was removed")
	}
	// git finishes without cleaning up (as if killed): now it is stale.
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	err = r.clearStaleLock(lock, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("lock left after its git exited")
	}
}

func TestFreshLockWithoutGitWaitsForMinAge(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	if _, canSee := r.liveGitProcess(); !canSee {
		t.Skip("no /proc")
	}
	lock := filepath.Join(dir, ".git/index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := r.clearStaleLock(lock, 50*time.Millisecond, time.Hour)
	if !errors.Is(err, gitstore.ErrLocked) {
		t.Fatalf("fresh lock: %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal("fresh lock removed")
	}
}

func TestReadRefPackedAndLoose(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.md", "a")
	res := mustCommit(t, r, "a.md")
	testutil.RunGit(t, dir, "pack-refs", "--all")
	if _, err := os.Stat(filepath.Join(dir, ".git/refs/heads/main")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("pack-refs left the loose ref")
	}
	if h, err := r.Head(); err != nil || h != res.Hash {
		t.Fatalf("packed head %q %v", h, err)
	}
	testutil.WriteFile(t, dir, "a.md", "b")
	res2 := mustCommit(t, r, "a.md")
	if got := testutil.RunGit(t, dir, "rev-parse", "main"); got != res2.Hash+"\n" {
		t.Fatalf("after packed CAS: %s", got)
	}
	// The reflog records memd's commit.
	if out := testutil.RunGit(t, dir, "reflog", "-1", "--format=%gs", "main"); out != "commit: memd: +0 ~1 -0\n" {
		t.Fatalf("reflog %q", out)
	}
	fsck(t, dir)
}
