package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/memd-dev/memd/internal/testutil"
)

func rec(id string) string {
	return `{"id":"` + id + `","createdAt":"2026-11-30T12:00:00Z","text":"` + id + `"}` + "\n"
}

func appendFile(t testing.TB, dir, rel, s string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, rel), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// ledgerCase: A appends r1 and pushes; B syncs while a writer appends r2 to B's ledger at
// the moment set by arm. Both records must end up in B's file, B's HEAD and the remote.
// remerged says which way the edit must come back: merged again after the ref moved
// (mergeEditsLocked, edits.go), or committed on the old HEAD before it moved.
func ledgerCase(t *testing.T, remerged bool, arm func(r *Repo, fire func())) {
	w := newSyncWorld(t, map[string]string{"memory.jsonl": rec("r0")})
	appendFile(t, w.aDir, "memory.jsonl", rec("r1"))
	mustCommit(t, w.a, "memory.jsonl")
	mustSync(t, w.a)
	fired := false
	arm(w.b, func() {
		if !fired {
			fired = true
			appendFile(t, w.bDir, "memory.jsonl", rec("r2"))
		}
	})
	mustSync(t, w.b)
	if !fired {
		t.Fatal("the writer never ran: the test proves nothing")
	}
	b, _ := os.ReadFile(filepath.Join(w.bDir, "memory.jsonl"))
	for _, id := range []string{"r0", "r1", "r2"} {
		if strings.Count(string(b), `"id":"`+id+`"`) != 1 {
			t.Fatalf("work tree ledger lacks %s once:\n%s", id, b)
		}
		for _, d := range []string{w.bDir, w.bare} {
			if got := testutil.RunGit(t, d, "show", "main:memory.jsonl"); strings.Count(got, `"id":"`+id+`"`) != 1 {
				t.Fatalf("%s: main lacks %s once:\n%s", d, id, got)
			}
		}
	}
	statusClean(t, w.b)
	fsck(t, w.bDir)
	if log := testutil.RunGit(t, w.bDir, "log", "--format=%s", "main"); strings.Contains(log, "edits made during checkout") != remerged {
		t.Fatalf("remerged = %v, want %v:\n%s", !remerged, remerged, log)
	}
}

// An edit between the check and the ref move: ErrWorktreeChanged (HEAD not moved), the
// edit is committed on the old HEAD and merged, nothing clobbered.
func TestCheckoutEditBeforeRefMove(t *testing.T) {
	ledgerCase(t, false, func(r *Repo, fire func()) {
		r.setCrashHooks(&crashHooks{beforeVerify: fire})
		t.Cleanup(func() { r.setCrashHooks(nil) })
	})
}

// An edit after the ref moved, before the file's rename: CommitIf refuses to clobber it,
// the edit is committed on the old head and merged into the new one (mergeEditsLocked, edits.go).
func TestCheckoutEditAfterRefMove(t *testing.T) {
	ledgerCase(t, true, func(r *Repo, fire func()) {
		r.setCrashHooks(&crashHooks{afterRefMove: func() error { fire(); return nil }})
		t.Cleanup(func() { r.setCrashHooks(nil) })
	})
}

// prepareCheckout in strict mode reports an edit made before it as ErrWorktreeChanged and
// leaves no temp file and no directory behind.
func TestCheckoutAllOrNothing(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.aDir, "areas/a.html", "a2\n")
	testutil.WriteFile(t, w.aDir, "new/deep/n.html", "n\n")
	mustCommit(t, w.a, "areas/a.html", "new")
	mustSync(t, w.a)
	if err := w.b.Fetch(t.Context(), pushOpts()); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.bDir, "areas/a.html", "edited on b\n")
	head := testutil.RunGit(t, w.bDir, "rev-parse", "HEAD")
	changes, err := w.b.commitDiffLocked(mustHash(t, w.bDir, "HEAD"), mustHash(t, w.bDir, "origin/main"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.b.prepareCheckout(changes, true)
	var wc *WorktreeChangedError
	if !errors.As(err, &wc) || wc.Moved || len(wc.Paths) != 1 || wc.Paths[0] != "areas/a.html" {
		t.Fatalf("prepare: %v, want ErrWorktreeChanged for areas/a.html", err)
	}
	if _, err := os.Stat(filepath.Join(w.bDir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a directory of the aborted checkout stayed: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(w.bDir, "areas"))
	if len(ents) != 1 {
		t.Fatalf("temp files left: %v", ents)
	}
	if testutil.RunGit(t, w.bDir, "rev-parse", "HEAD") != head {
		t.Fatal("HEAD moved")
	}
}

func mustHash(t *testing.T, dir, rev string) plumbing.Hash {
	return plumbing.NewHash(revParse(t, dir, rev))
}

// A checkout interrupted after the ref moved that cannot be finished (a rename fails) is
// undone: HEAD back at the old head, the work tree as it was, the marker gone, commits
// possible; the next sync merges again.
func TestInterruptedMergeUndoneWhenUnfinishable(t *testing.T) {
	w := divergedWorld(t)
	oldHead := revParse(t, w.bDir, "HEAD")
	w.b.setCrashHooks(&crashHooks{afterRefMove: func() error { return errSimulatedCrash }})
	_, err := w.b.Sync(t.Context(), RemoteOptions{})
	w.b.setCrashHooks(nil)
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("Sync err = %v", err)
	}
	if revParse(t, w.bDir, "HEAD") == oldHead {
		t.Fatal("ref did not move")
	}
	b2 := openTest(t, w.bDir, hostOptions("hostb"))
	b2.setCrashHooks(&crashHooks{applyErr: func(rel string) error {
		if rel == "projects/new/one.html" {
			return errors.New("simulated ENOSPC")
		}
		return nil
	}})
	done, err := b2.FinishInterruptedMerge()
	b2.setCrashHooks(nil)
	if err != nil || !done {
		t.Fatalf("FinishInterruptedMerge = %v, %v; want undone", done, err)
	}
	if revParse(t, w.bDir, "HEAD") != oldHead {
		t.Fatal("not undone: HEAD is not the old head")
	}
	if _, err := os.Stat(filepath.Join(w.bDir, ".git/memd/merge-in-progress")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left: %v", err)
	}
	statusClean(t, b2)
	testutil.WriteFile(t, w.bDir, "areas/after.html", "after\n")
	mustCommit(t, b2, "areas/after.html")
	w.b = b2
	checkDivergedResult(t, w)
}

// A large blob is streamed from the object store to its file: the checkout allocates a
// small fraction of its size (the fetch itself, in go-git, holds the object once).
func TestCheckoutStreamsBlobs(t *testing.T) {
	const size = 40 << 20
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(w.aDir, "resources"), 0o755))
	f, err := os.Create(filepath.Join(w.aDir, "resources", "big.html"))
	must(err)
	chunk := []byte(strings.Repeat("0123456789abcdef", 4096))
	for n := 0; n < size; n += len(chunk) {
		_, err := f.Write(chunk)
		must(err)
	}
	must(f.Close())
	mustCommit(t, w.a, "resources")
	mustSync(t, w.a)
	must(w.b.Fetch(t.Context(), pushOpts()))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	mustSync(t, w.b)
	runtime.ReadMemStats(&m1)
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > size/4 {
		t.Fatalf("checkout of a %d MiB blob allocated %d MiB: not streamed", size>>20, alloc>>20)
	} else {
		t.Logf("checkout of a %d MiB blob allocated %d KiB", size>>20, alloc>>10)
	}
	fi, err := os.Stat(filepath.Join(w.bDir, "resources", "big.html"))
	if err != nil || fi.Size() != size {
		t.Fatalf("big.html: %v %v", fi, err)
	}
}

// A checkout of many new files holds few descriptors: run in a child process whose
// RLIMIT_NOFILE is 128, it checks out 1,000 files.
func TestCheckoutFewDescriptors(t *testing.T) {
	if dir := os.Getenv("MEMD_FD_HELPER_DIR"); dir != "" {
		lim := syscall.Rlimit{Cur: 128, Max: 128}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Skip("cannot lower RLIMIT_NOFILE:", err)
		}
		r, err := Open(dir, hostOptions("hostb"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Sync(t.Context(), RemoteOptions{}); err != nil {
			t.Fatalf("sync under RLIMIT_NOFILE 128: %v", err)
		}
		r.Close() // the index refresh finishes
		return
	}
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	paths := make([]string, 0, 1000)
	for i := range 1000 {
		p := fmt.Sprintf("resources/many/m%04d.html", i)
		testutil.WriteFile(t, w.aDir, p, p+"\n")
		paths = append(paths, p)
	}
	mustCommit(t, w.a, "resources")
	mustSync(t, w.a)
	cmd := exec.Command(os.Args[0], "-test.run=^TestCheckoutFewDescriptors$", "-test.count=1", "-test.v")
	cmd.Env = append(testutil.GitEnv(), "MEMD_FD_HELPER_DIR="+w.bDir)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "SKIP") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, p := range paths[:3] {
		if readWork(t, w.bDir, p) != p+"\n" {
			t.Fatalf("%s not checked out", p)
		}
	}
	statusClean(t, openTest(t, w.bDir, hostOptions("hostb")))
}
