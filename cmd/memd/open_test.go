package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// `memd sync` after a `memd sleep` SIGKILLed mid-apply undoes the half-applied phase (the
// sleep's journal) before it reconciles: it opens the repo the way `memd run` does
// (docs/ARCHITECTURE.md §10), so nothing commits or pushes the half-moved tree; a dry run
// before it repairs nothing.
//
// The kill is made deterministic, not timed: a live git in the repo holds the branch's ref
// lock, so the sleep applies its ops and then cannot commit them; the test kills it once the
// journal stands and the tree differs from HEAD, seconds before the sleep would give up.
func TestSyncAfterKilledSleepUndoesIt(t *testing.T) {
	bin := memdBinary(t)
	dir := demoRepo(t, 120)
	bare := filepath.Join(t.TempDir(), "remote.git")
	sleepGit(t, dir, "init", "-q", "--bare", bare)
	sleepGit(t, dir, "remote", "add", "origin", bare)
	sleepGit(t, dir, "push", "-q", "-u", "origin", "main")
	head0 := strings.TrimSpace(sleepGit(t, dir, "rev-parse", "HEAD"))
	tree0 := digestTree(t, dir)
	env := append(sleepGitEnv(), "MEMD_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())

	// The ref lock, held by a git process that lives in the repo (memd never takes over
	// a lock while a git runs there, §9.1).
	refLock := filepath.Join(dir, ".git", "refs", "heads", "main.lock")
	if err := os.WriteFile(refLock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("git", "cat-file", "--batch")
	holder.Dir = dir
	holder.Env = sleepGitEnv()
	holderIn, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	holderDone := false
	stopHolder := func() {
		if !holderDone {
			holderDone = true
			_ = holderIn.Close()
			_ = holder.Wait()
		}
	}
	t.Cleanup(stopHolder)

	sl := exec.Command(bin, "sleep", "--repo", dir, "--now", sleepNow, "--no-gc", "--phase", "archive")
	sl.Env = env
	out := &testutil.LockedBuffer{} // written by exec's copier while the test reads it
	sl.Stdout, sl.Stderr = out, out
	if err := sl.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- sl.Wait() }()
	journal := filepath.Join(dir, ".git", "memd", "sleep-journal", "journal.json")
	halfApplied := func() bool {
		select {
		case err := <-exited:
			exited <- err
			return true // reported below
		default:
		}
		if _, err := os.Stat(journal); err != nil {
			return false
		}
		st := exec.Command("git", "--no-optional-locks", "status", "--porcelain")
		st.Dir, st.Env = dir, sleepGitEnv()
		b, err := st.Output()
		// An archive op is a move: its old path shows as deleted in the work tree.
		return err == nil && bytes.Contains(append([]byte("\n"), b...), []byte("\n D "))
	}
	testutil.WaitFor(t, "memd sleep to apply part of the archive phase", time.Minute, halfApplied, out.String)
	select {
	case err := <-exited:
		t.Fatalf("memd sleep ended (%v) before it could be killed mid-apply:\n%s", err, out.String())
	default:
	}
	if err := sl.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	stopHolder()
	if err := os.Remove(refLock); err != nil {
		t.Fatal(err)
	}

	// A dry run opens read-only: it repairs nothing, as it writes nothing.
	half := digestTree(t, dir)
	dry := exec.Command(bin, "sleep", "--repo", dir, "--now", sleepNow, "--no-gc", "--dry-run")
	dry.Env = env
	if o, err := dry.CombinedOutput(); err != nil {
		t.Fatalf("memd sleep --dry-run after the kill: %v\n%s", err, o)
	}
	if _, err := os.Stat(journal); err != nil || digestTree(t, dir) != half {
		t.Fatalf("memd sleep --dry-run wrote (journal: %v)", err)
	}

	cmd := exec.Command(bin, "sync", "--repo", dir)
	cmd.Env = env
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("memd sync after the killed sleep: %v\n%s", err, o)
	}
	if h := strings.TrimSpace(sleepGit(t, dir, "rev-parse", "HEAD")); h != head0 {
		t.Errorf("memd sync committed the half-applied sleep: HEAD %s, was %s\n%s", h, head0,
			sleepGit(t, dir, "log", "--stat", "--format=%h %s", head0+"..HEAD"))
	}
	if r := strings.TrimSpace(sleepGit(t, bare, "rev-parse", "main")); r != head0 {
		t.Errorf("the remote got %s, want %s: the half-applied tree was pushed", r, head0)
	}
	if digestTree(t, dir) != tree0 {
		t.Errorf("the work tree is not what it was before the sleep:\n%s", sleepGit(t, dir, "status", "--porcelain"))
	}
	if _, err := os.Stat(journal); err == nil {
		t.Error("the killed sleep's journal is still there")
	}
}
