package gitrepo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

var errSimulatedCrash = errors.New("simulated crash")

// divergedWorld: A pushed changes to several files; B has its own commit.
// B's next sync must merge and rewrite several work tree paths.
func divergedWorld(t *testing.T) *syncWorld {
	t.Helper()
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n", "areas/b.html": "b\n", "areas/gone.html": "g\n"})
	testutil.WriteFile(t, w.aDir, "areas/a.html", "a from A\n")
	testutil.WriteFile(t, w.aDir, "projects/new/one.html", "one\n")
	testutil.WriteFile(t, w.aDir, "projects/new/two.html", "two\n")
	removeFile(t, w.aDir, "areas/gone.html")
	mustCommit(t, w.a, "areas", "projects")
	mustSync(t, w.a)
	testutil.WriteFile(t, w.bDir, "areas/b.html", "b from B\n")
	mustCommit(t, w.b, "areas/b.html")
	return w
}

func revParse(t *testing.T, dir, rev string) string {
	t.Helper()
	return strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", rev))
}

// restartAndFinish plays what the agent does on start after a crash:
// Open, FinishInterruptedMerge, Reconcile + commit. The reconcile must find
// nothing to commit: a half-done checkout must not look like local edits.
func restartAndFinish(t *testing.T, w *syncWorld, wantFinished bool) {
	t.Helper()
	b2 := openTest(t, w.bDir, hostOptions("hostb"))
	w.b = b2
	finished, err := b2.FinishInterruptedMerge()
	if err != nil {
		t.Fatalf("FinishInterruptedMerge: %v", err)
	}
	if finished != wantFinished {
		t.Errorf("finished = %v, want %v", finished, wantFinished)
	}
	if _, err := os.Stat(filepath.Join(w.bDir, ".git/memd/merge-in-progress")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("marker left behind: %v", err)
	}
	paths, err := b2.Reconcile()
	if err != nil {
		t.Fatal(err)
	}
	res, err := b2.CommitPaths(paths)
	if err != nil {
		t.Fatal(err)
	}
	if res.Hash != "" {
		t.Fatalf("restart committed %v: the unfinished checkout was taken for local edits", res.Changes)
	}
}

func checkDivergedResult(t *testing.T, w *syncWorld) {
	t.Helper()
	mustSync(t, w.b)
	mustSync(t, w.a)
	w.check(t)
	for _, d := range []string{w.aDir, w.bDir} {
		if readWork(t, d, "areas/a.html") != "a from A\n" || readWork(t, d, "areas/b.html") != "b from B\n" ||
			readWork(t, d, "projects/new/one.html") != "one\n" || readWork(t, d, "projects/new/two.html") != "two\n" {
			t.Errorf("%s: merged content wrong", d)
		}
		absent(t, d, "areas/gone.html")
	}
}

func TestInterruptedMergeAfterRefMove(t *testing.T) {
	w := divergedWorld(t)
	oldHead := revParse(t, w.bDir, "HEAD")
	w.b.setCrashHooks(&crashHooks{afterRefMove: func() error { return errSimulatedCrash }})
	_, err := w.b.Sync(context.Background(), RemoteOptions{})
	w.b.setCrashHooks(nil)
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("Sync err = %v", err)
	}
	newHead := revParse(t, w.bDir, "HEAD")
	if newHead == oldHead {
		t.Fatal("ref did not move before the simulated crash")
	}
	// The interrupted state: HEAD has A's files, the work tree does not.
	absent(t, w.bDir, "projects/new/one.html")
	if readWork(t, w.bDir, "areas/a.html") != "a\n" {
		t.Fatal("work tree already updated")
	}
	restartAndFinish(t, w, true)
	if revParse(t, w.bDir, "HEAD") != newHead {
		t.Error("restart moved HEAD")
	}
	checkDivergedResult(t, w)
}

func TestInterruptedMergeBeforeRefMove(t *testing.T) {
	w := divergedWorld(t)
	oldHead := revParse(t, w.bDir, "HEAD")
	w.b.setCrashHooks(&crashHooks{beforeRefMove: func() error { return errSimulatedCrash }})
	_, err := w.b.Sync(context.Background(), RemoteOptions{})
	w.b.setCrashHooks(nil)
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("Sync err = %v", err)
	}
	if revParse(t, w.bDir, "HEAD") != oldHead {
		t.Fatal("ref moved")
	}
	restartAndFinish(t, w, false)
	checkDivergedResult(t, w)
}

func TestInterruptedMergeKeepsEditsMadeSince(t *testing.T) {
	w := divergedWorld(t)
	w.b.setCrashHooks(&crashHooks{afterRefMove: func() error { return errSimulatedCrash }})
	_, err := w.b.Sync(context.Background(), RemoteOptions{})
	w.b.setCrashHooks(nil)
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatal(err)
	}
	// A writer edits a path the checkout has not reached yet.
	testutil.WriteFile(t, w.bDir, "areas/a.html", "edited after the crash\n")
	b2 := openTest(t, w.bDir, hostOptions("hostb"))
	if _, err := b2.FinishInterruptedMerge(); err != nil {
		t.Fatal(err)
	}
	// The edit was made on the old head's a.html: committed there and merged with A's
	// version like any other change (issue 13), never left on disk for a commit that
	// would revert the merge. Both changed a.html: A's stays, the edit in a conflict copy.
	if got := readWork(t, w.bDir, "areas/a.html"); got != "a from A\n" {
		t.Errorf("areas/a.html = %q, want A's version", got)
	}
	copies := testutil.RunGit(t, w.bDir, "ls-tree", "--name-only", "HEAD", "areas/")
	found := false
	for _, p := range strings.Fields(copies) {
		if strings.HasPrefix(p, "areas/a.conflict-") && testutil.RunGit(t, w.bDir, "show", "HEAD:"+p) == "edited after the crash\n" {
			found = true
		}
	}
	if !found {
		t.Fatalf("writer's edit is in no conflict copy in HEAD: %s", copies)
	}
	statusClean(t, b2)
	if readWork(t, w.bDir, "projects/new/one.html") != "one\n" {
		t.Error("untouched path not checked out")
	}
}

// TestSIGKILLDuringCheckout kills a real process (SIGKILL) in the middle of
// the work tree update of a merge, then restarts and checks nothing is lost
// and no revert is committed.
func TestSIGKILLDuringCheckout(t *testing.T) {
	w := divergedWorld(t)
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
	cmd.Env = append(testutil.GitEnv(), "MEMD_CRASH_HELPER_DIR="+w.bDir, "MEMD_CRASH_HELPER_READY="+ready)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("helper never reached the checkout:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if _, err := os.Stat(filepath.Join(w.bDir, ".git/memd/merge-in-progress")); err != nil {
		t.Fatalf("no merge marker after the kill: %v\n%s", err, out)
	}
	// Exactly one path was written before the kill; the others are stale.
	stale := 0
	for _, p := range []string{"areas/a.html", "projects/new/one.html", "projects/new/two.html"} {
		if b, err := os.ReadFile(filepath.Join(w.bDir, p)); err != nil || (p == "areas/a.html" && string(b) == "a\n") {
			stale++
		}
	}
	if stale == 0 {
		t.Fatal("the kill came too late: nothing left to finish")
	}
	restartAndFinish(t, w, true)
	checkDivergedResult(t, w)
}

// TestCrashHelperProcess is the child of TestSIGKILLDuringCheckout: it
// syncs and stops forever after the first file of the checkout.
func TestCrashHelperProcess(t *testing.T) {
	dir := os.Getenv("MEMD_CRASH_HELPER_DIR")
	if dir == "" {
		t.Skip("helper process for TestSIGKILLDuringCheckout")
	}
	r, err := Open(dir, hostOptions("hostb"))
	if err != nil {
		t.Fatal(err)
	}
	r.setCrashHooks(&crashHooks{afterWorkWrite: func(string) {
		_ = os.WriteFile(os.Getenv("MEMD_CRASH_HELPER_READY"), []byte("x"), 0o644)
		select {} // wait for SIGKILL
	}})
	_, err = r.Sync(context.Background(), RemoteOptions{})
	t.Fatalf("sync returned instead of being killed: %v", err)
}
