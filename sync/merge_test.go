package sync

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

var errSimulatedCrash = errors.New("simulated crash")

// divergedWorld: A pushed changes to several files; B has its own commit.
// B's next sync must merge and rewrite several work tree paths.
func divergedWorld(t *testing.T) *syncWorld {
	t.Helper()
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n", "areas/b.html": "b\n", "areas/gone.html": "g\n"})
	writeFile(t, w.aDir, "areas/a.html", "a from A\n")
	writeFile(t, w.aDir, "projects/new/one.html", "one\n")
	writeFile(t, w.aDir, "projects/new/two.html", "two\n")
	removeFile(t, w.aDir, "areas/gone.html")
	mustCommit(t, w.a, "areas", "projects")
	mustSync(t, w.a)
	writeFile(t, w.bDir, "areas/b.html", "b from B\n")
	mustCommit(t, w.b, "areas/b.html")
	return w
}

func revParse(t *testing.T, dir, rev string) string {
	t.Helper()
	return strings.TrimSpace(runGit(t, dir, "rev-parse", rev))
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
	hookAfterRefMove = func() error { return errSimulatedCrash }
	_, err := w.b.Sync(context.Background(), RemoteOptions{})
	hookAfterRefMove = nil
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
	hookBeforeRefMove = func() error { return errSimulatedCrash }
	_, err := w.b.Sync(context.Background(), RemoteOptions{})
	hookBeforeRefMove = nil
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
	hookAfterRefMove = func() error { return errSimulatedCrash }
	_, err := w.b.Sync(context.Background(), RemoteOptions{})
	hookAfterRefMove = nil
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatal(err)
	}
	// A writer edits a path the checkout has not reached yet.
	writeFile(t, w.bDir, "areas/a.html", "edited after the crash\n")
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
	copies := runGit(t, w.bDir, "ls-tree", "--name-only", "HEAD", "areas/")
	found := false
	for _, p := range strings.Fields(copies) {
		if strings.HasPrefix(p, "areas/a.conflict-") && runGit(t, w.bDir, "show", "HEAD:"+p) == "edited after the crash\n" {
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
	cmd.Env = append(gitEnv(), "MEMD_CRASH_HELPER_DIR="+w.bDir, "MEMD_CRASH_HELPER_READY="+ready)
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
	hookAfterWorkWrite = func(string) {
		_ = os.WriteFile(os.Getenv("MEMD_CRASH_HELPER_READY"), []byte("x"), 0o644)
		select {} // wait for SIGKILL
	}
	_, err = r.Sync(context.Background(), RemoteOptions{})
	t.Fatalf("sync returned instead of being killed: %v", err)
}

func TestPatchTreeAndDiff(t *testing.T) {
	dir := newGitDir(t)
	writeFile(t, dir, "a/b/c.txt", "c\n")
	writeFile(t, dir, "a/d.txt", "d\n")
	writeFile(t, dir, "top.txt", "t\n")
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "commit", "-q", "-m", "x")
	r := openTest(t, dir, testOptions())
	s := r.repo.Storer
	root := plumbing.NewHash(revParse(t, dir, "HEAD^{tree}"))
	st := r.newMgStore()
	blob, err := st.writeBlob([]byte("new\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := st.readBlob(&mEntry{Hash: blob}); err != nil || string(b) != "new\n" {
		t.Fatalf("blob not readable before flush: %q, %v", b, err)
	}
	e := &mEntry{Hash: blob, Mode: filemode.Regular}
	cases := []struct {
		name    string
		changes map[string]*mEntry
		want    map[string]pathChange // expected diff root → result (To only checked)
		err     error
	}{
		{"add deep", map[string]*mEntry{"x/y/z.txt": e}, map[string]pathChange{"x/y/z.txt": {To: e}}, nil},
		{"delete last file drops dirs", map[string]*mEntry{"a/b/c.txt": nil}, map[string]pathChange{"a/b/c.txt": {}}, nil},
		{"file replaces dir", map[string]*mEntry{"a/b/c.txt": nil, "a/b": e}, map[string]pathChange{"a/b/c.txt": {}, "a/b": {To: e}}, nil},
		{"dir replaces file", map[string]*mEntry{"top.txt": nil, "top.txt/in": e}, map[string]pathChange{"top.txt": {}, "top.txt/in": {To: e}}, nil},
		{"file onto live dir", map[string]*mEntry{"a": e}, nil, ErrPathConflict},
		{"dir under live file", map[string]*mEntry{"top.txt/in": e}, nil, ErrPathConflict},
		{"delete missing is no-op", map[string]*mEntry{"nope/x": nil}, map[string]pathChange{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := mgPatchTree(st, root, c.changes)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := st.flush(); err != nil {
				t.Fatal(err)
			}
			diff := map[string]pathChange{}
			if err := mgDiffTrees(s, root, h, "", diff); err != nil {
				t.Fatal(err)
			}
			if len(diff) != len(c.want) {
				t.Fatalf("diff %v, want %v", diff, c.want)
			}
			for p, w := range c.want {
				if got, ok := diff[p]; !ok || !got.To.same(w.To) {
					t.Errorf("path %s: %+v, want To %+v", p, got, w.To)
				}
			}
			// git agrees the tree is well formed.
			runGit(t, dir, "ls-tree", "-r", h.String())
		})
	}
}

func TestRenameDetection(t *testing.T) {
	h1, h2 := plumbing.NewHash("1111111111111111111111111111111111111111"), plumbing.NewHash("2222222222222222222222222222222222222222")
	e1, e2 := &mEntry{Hash: h1, Mode: filemode.Regular}, &mEntry{Hash: h2, Mode: filemode.Regular}
	changes := map[string]pathChange{
		"areas/x.html":                    {From: e1},
		"areas/copy.html":                 {To: e1},
		"archive/2024/areas/x.html":       {To: e1},
		"areas/y.html":                    {From: e2},
		"resources/y.html":                {To: e2},
		"areas/z.html":                    {From: &mEntry{Hash: plumbing.NewHash("3333333333333333333333333333333333333333"), Mode: filemode.Regular}},
		"areas/modified.html":             {From: e1, To: e2},
		"archive/2023/areas/nothing.html": {To: e2},
	}
	got := mgRenames(changes)
	if got["areas/x.html"] != "archive/2024/areas/x.html" {
		t.Errorf("archive mapping not preferred: %v", got)
	}
	if got["areas/y.html"] == "" {
		t.Errorf("plain rename missed: %v", got)
	}
	if _, ok := got["areas/z.html"]; ok {
		t.Errorf("pure delete taken as rename: %v", got)
	}
	if mgUnarchive("archive/2024/a/b.html") != "a/b.html" || mgUnarchive("archive/20x4/a") != "archive/20x4/a" || mgUnarchive("areas/a") != "areas/a" {
		t.Error("mgUnarchive")
	}
}
