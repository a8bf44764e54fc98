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

// stuckSleep is a real `memd sleep --phase archive` on dir held between its apply and its
// commit: a live git in the repo holds the branch's ref lock (memd never takes over a lock
// while a git runs there, §9.1), so the sleep applies its ops, holding the writer lock and
// its journal, and cannot commit them. It returns once the journal stands and the tree shows
// a move applied; the sleep gives up (and undoes) a few seconds later unless unblock or
// kill comes first. Deterministic: no timed kill.
type stuckSleep struct {
	t       *testing.T
	cmd     *exec.Cmd
	out     *testutil.LockedBuffer
	exited  chan error
	journal string
	refLock string
	unhold  func()
}

func startStuckSleep(t *testing.T, bin, dir string, env []string) *stuckSleep {
	t.Helper()
	s := &stuckSleep{t: t, out: &testutil.LockedBuffer{}, exited: make(chan error, 1),
		journal: filepath.Join(dir, ".git", "memd", "sleep-journal", "journal.json"),
		refLock: filepath.Join(dir, ".git", "refs", "heads", "main.lock")}
	if err := os.WriteFile(s.refLock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command("git", "cat-file", "--batch")
	holder.Dir, holder.Env = dir, sleepGitEnv()
	holderIn, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	s.unhold = func() {
		if !done {
			done = true
			_ = holderIn.Close()
			_ = holder.Wait()
		}
	}
	t.Cleanup(s.unhold)

	s.cmd = exec.Command(bin, "sleep", "--repo", dir, "--now", sleepNow, "--no-gc", "--phase", "archive")
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out // written by exec's copier while the test reads it
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
		}
	})
	applied := func() bool {
		if s.ended() {
			return true // reported below
		}
		if _, err := os.Stat(s.journal); err != nil {
			return false
		}
		st := exec.Command("git", "--no-optional-locks", "status", "--porcelain")
		st.Dir, st.Env = dir, sleepGitEnv()
		b, err := st.Output()
		// An archive op is a move: its old path shows as deleted in the work tree.
		return err == nil && bytes.Contains(append([]byte("\n"), b...), []byte("\n D "))
	}
	testutil.WaitFor(t, "memd sleep to apply part of the archive phase", time.Minute, applied, s.out.String)
	if s.ended() {
		t.Fatalf("memd sleep ended before its commit could be held:\n%s", s.out.String())
	}
	return s
}

// ended reports whether the sleep process has exited (without consuming the result).
func (s *stuckSleep) ended() bool {
	select {
	case err := <-s.exited:
		s.exited <- err
		return true
	default:
		return false
	}
}

// kill SIGKILLs the sleep mid-apply and lets the ref go (as the git holding it would).
func (s *stuckSleep) kill() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	<-s.exited
	s.unblock()
}

// unblock lets the ref go: the sleep's next attempt commits.
func (s *stuckSleep) unblock() {
	s.t.Helper()
	s.unhold()
	if err := os.Remove(s.refLock); err != nil && !os.IsNotExist(err) {
		s.t.Fatal(err)
	}
}

// demoWithRemote is a demo repo pushed to a fresh bare remote.
func demoWithRemote(t *testing.T) (dir, bare string) {
	t.Helper()
	dir = demoRepo(t, 120)
	bare = filepath.Join(t.TempDir(), "remote.git")
	sleepGit(t, dir, "init", "-q", "--bare", bare)
	sleepGit(t, dir, "remote", "add", "origin", bare)
	sleepGit(t, dir, "push", "-q", "-u", "origin", "main")
	return dir, bare
}

// `memd sync` after a `memd sleep` SIGKILLed mid-apply undoes the half-applied phase (the
// sleep's journal) before it reconciles: it opens the repo the way `memd run` does
// (docs/ARCHITECTURE.md §10), so nothing commits or pushes the half-moved tree; a dry run
// before it repairs nothing.
func TestSyncAfterKilledSleepUndoesIt(t *testing.T) {
	bin := memdBinary(t)
	dir, bare := demoWithRemote(t)
	head0 := strings.TrimSpace(sleepGit(t, dir, "rev-parse", "HEAD"))
	tree0 := digestTree(t, dir)
	env := append(sleepGitEnv(), "MEMD_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())

	s := startStuckSleep(t, bin, dir, env)
	s.kill()

	// A dry run opens read-only: it repairs nothing, as it writes nothing.
	half := digestTree(t, dir)
	dry := exec.Command(bin, "sleep", "--repo", dir, "--now", sleepNow, "--no-gc", "--dry-run")
	dry.Env = env
	if o, err := dry.CombinedOutput(); err != nil {
		t.Fatalf("memd sleep --dry-run after the kill: %v\n%s", err, o)
	}
	if _, err := os.Stat(s.journal); err != nil || digestTree(t, dir) != half {
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
	if _, err := os.Stat(s.journal); err == nil {
		t.Error("the killed sleep's journal is still there")
	}
}

// Open repairs under the writer lock: beside a sleep that is alive mid-apply (it holds the
// lock across its journal), `memd sync` waits for the lock and gives up at lock.timeout,
// naming it; it never undoes the live sleep's ops, and that sleep then commits its phase.
func TestSyncLeavesALiveSleepAlone(t *testing.T) {
	bin := memdBinary(t)
	dir, _ := demoWithRemote(t)
	env := append(sleepGitEnv(), "MEMD_CONFIG=", "XDG_CONFIG_HOME="+t.TempDir())
	cfg := writeConfig(t, "lock: {timeout: 300ms}\n")

	// What the phase makes when nobody disturbs it.
	ref := copyRepo(t, dir)
	rc := exec.Command(bin, "sleep", "--repo", ref, "--now", sleepNow, "--no-gc", "--phase", "archive")
	rc.Env = env
	if o, err := rc.CombinedOutput(); err != nil {
		t.Fatalf("reference sleep: %v\n%s", err, o)
	}
	want := sleepGit(t, ref, "rev-parse", "HEAD^{tree}")

	s := startStuckSleep(t, bin, dir, env)
	cmd := exec.Command(bin, "sync", "--config", cfg, "--repo", dir)
	cmd.Env = env
	o, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(o), "writer lock") {
		t.Fatalf("memd sync beside a live sleep: %v (want exit 1 naming the writer lock)\n%s", err, o)
	}
	if _, err := os.Stat(s.journal); err != nil {
		t.Fatalf("memd sync removed the live sleep's journal: %v", err)
	}
	s.unblock()
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("the live sleep failed after memd sync: %v\n%s", err, s.out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the live sleep never finished\n%s", s.out.String())
	}
	if subj := sleepGit(t, dir, "log", "-1", "--format=%s"); !strings.HasPrefix(subj, "sleep(archive)") {
		t.Errorf("HEAD is %q, want the live sleep's archive commit\n%s", subj, s.out.String())
	}
	if got := sleepGit(t, dir, "rev-parse", "HEAD^{tree}"); got != want {
		t.Errorf("the live sleep committed tree %s, undisturbed it makes %s", strings.TrimSpace(got), strings.TrimSpace(want))
	}
	if st := sleepGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("work tree differs from HEAD:\n%s", st)
	}
}
