package gitrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// lateWriter arms the finding-11 race on B for rel (docs/RELIABILITY.md): a writer
// that takes no lock opens rel just before the checkout's last re-stat of it
// (crashHooks.beforeReplace) and writes after the checkout replaced or removed it
// (crashHooks.afterWorkWrite, or the next path's hook for a removal), through the descriptor
// it opened: into the version taken off the name. flag is the writer's open flags;
// write does the writing. It reports whether the writer ran.
func lateWriter(t *testing.T, r *Repo, dir, rel string, flag int, write func(f *os.File)) (ran func() bool) {
	var f *os.File
	done := false
	finish := func() {
		if f != nil && !done {
			done = true
			write(f)
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}
	}
	beforeReplace := func(p string) {
		if p == rel && f == nil {
			var err error
			if f, err = os.OpenFile(filepath.Join(dir, rel), flag, 0); err != nil {
				t.Fatal(err)
			}
			return
		}
		finish() // a removal has no after-hook: the next path's check is after it
	}
	r.setCrashHooks(&crashHooks{beforeReplace: beforeReplace, afterWorkWrite: func(string) { finish() }})
	t.Cleanup(func() { r.setCrashHooks(nil) })
	return func() bool { finish(); return done }
}

// shortHold releases held versions as soon as a sync's edit merges are done.
func shortHold(t *testing.T) {
	heldMin = 0
	t.Cleanup(func() { heldMin = 2 * time.Second })
}

func heldCount(r *Repo) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.held)
}

func noneHeld(t *testing.T, r *Repo) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.held) != 0 {
		t.Errorf("%d versions still held after the sync", len(r.held))
	}
}

// TestAppendIntoReplacedLedger is finding 11, made deterministic: B's writer opens
// memory.jsonl O_APPEND before the checkout's re-stat and appends its record after the
// merged ledger was renamed over it. The record went into the replaced inode and into
// no git object; now the checkout holds that inode, sees the append and merges it.
func TestAppendIntoReplacedLedger(t *testing.T) {
	shortHold(t)
	w := ledgerRaceWorld(t)
	ran := lateWriter(t, w.b, w.bDir, "memory.jsonl", os.O_WRONLY|os.O_APPEND, func(f *os.File) {
		if _, err := f.WriteString(ledgerRec("b-late")); err != nil {
			t.Fatal(err)
		}
	})
	res := mustSync(t, w.b)
	if !ran() {
		t.Fatal("the writer never ran: the test proves nothing")
	}
	if res.EditMerges != 1 {
		t.Errorf("EditMerges = %d, want 1", res.EditMerges)
	}
	all := []string{"r0", "a1", "b1", "b-late"}
	wantIDs(t, "work tree", readWork(t, w.bDir, "memory.jsonl"), all...)
	wantIDs(t, "HEAD", testutil.RunGit(t, w.bDir, "show", "HEAD:memory.jsonl"), all...)
	wantIDs(t, "remote", testutil.RunGit(t, w.bare, "show", "main:memory.jsonl"), all...)
	statusClean(t, w.b)
	fsck(t, w.bDir)
	noneHeld(t, w.b)
	if cr := mustCommit(t, w.b, "memory.jsonl"); cr.Hash != "" {
		t.Errorf("a commit after the sync changed memory.jsonl: %+v", cr.Changes)
	}
}

// A writer that truncates and rewrites a memory in place (not an append) through a
// descriptor opened before the re-stat, after the merge's version was renamed over
// it: its version is not lost; both it and A's are in the tree (one at the path, the
// other in a conflict copy beside it).
func TestRewriteIntoReplacedMemory(t *testing.T) {
	shortHold(t)
	w := newSyncWorld(t, map[string]string{"areas/a.html": "v1\n"})
	testutil.WriteFile(t, w.aDir, "areas/a.html", "from A\n")
	mustCommit(t, w.a, "areas/a.html")
	mustSync(t, w.a)
	ran := lateWriter(t, w.b, w.bDir, "areas/a.html", os.O_WRONLY, func(f *os.File) {
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("from B, late\n"), 0); err != nil {
			t.Fatal(err)
		}
	})
	rb := mustSync(t, w.b)
	if !ran() {
		t.Fatal("the writer never ran")
	}
	for _, d := range []string{w.bDir, w.bare} {
		tree := lsTree(t, d)
		var found []string
		for p := range tree {
			if p == "areas/a.html" || strings.HasPrefix(p, "areas/a.conflict-") {
				found = append(found, testutil.RunGit(t, d, "show", "main:"+p))
			}
		}
		got := strings.Join(found, "|")
		if len(found) != 2 || !strings.Contains(got, "from A") || !strings.Contains(got, "from B, late") {
			t.Fatalf("%s: versions at areas/a.html and its conflict copies: %q (conflicts %v)", d, found, rb.Conflicts)
		}
	}
	statusClean(t, w.b)
	noneHeld(t, w.b)
}

// A writer appends to a file the merge deletes (A removed it) through a descriptor
// opened before the checkout's removal: its edit comes back (an edit beats a delete).
func TestAppendIntoRemovedFile(t *testing.T) {
	shortHold(t)
	w := newSyncWorld(t, map[string]string{"areas/a.html": "v1\n", "areas/b.html": "b\n"})
	if err := os.Remove(filepath.Join(w.aDir, "areas/a.html")); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.aDir, "areas/b.html", "b2\n")
	mustCommit(t, w.a, "areas/a.html", "areas/b.html")
	mustSync(t, w.a)
	ran := lateWriter(t, w.b, w.bDir, "areas/a.html", os.O_WRONLY|os.O_APPEND, func(f *os.File) {
		if _, err := f.WriteString("added on B, late\n"); err != nil {
			t.Fatal(err)
		}
	})
	mustSync(t, w.b)
	if !ran() {
		t.Fatal("the writer never ran")
	}
	for _, d := range []string{w.bDir, w.bare} {
		if got := testutil.RunGit(t, d, "show", "main:areas/a.html"); !strings.Contains(got, "added on B, late") {
			t.Fatalf("%s: areas/a.html = %q, want B's late edit", d, got)
		}
	}
	if got := readWork(t, w.bDir, "areas/a.html"); !strings.Contains(got, "added on B, late") {
		t.Fatalf("work tree: %q", got)
	}
	statusClean(t, w.b)
	noneHeld(t, w.b)
}

// A checkout no writer races holds the replaced versions only for the sync: released,
// no edit merge.
func TestHeldReleasedWithoutWriter(t *testing.T) {
	shortHold(t)
	w := ledgerRaceWorld(t)
	res := mustSync(t, w.b)
	if res.EditMerges != 0 {
		t.Errorf("EditMerges = %d, want 0", res.EditMerges)
	}
	noneHeld(t, w.b)
	wantIDs(t, "work tree", readWork(t, w.bDir, "memory.jsonl"), "r0", "a1", "b1")
}

// A writer that opened memory.jsonl before the swap and appends only after the sync
// ended: the version is still held (heldMin), and the next commit merges the append
// before it commits; a commit after heldMin releases the version.
func TestAppendAfterSyncCarriedByNextCommit(t *testing.T) {
	heldMin = time.Hour
	t.Cleanup(func() { heldMin = 2 * time.Second })
	w := ledgerRaceWorld(t)
	var f *os.File
	w.b.setCrashHooks(&crashHooks{beforeReplace: func(p string) {
		if p == "memory.jsonl" && f == nil {
			var err error
			if f, err = os.OpenFile(filepath.Join(w.bDir, p), os.O_WRONLY|os.O_APPEND, 0); err != nil {
				t.Fatal(err)
			}
		}
	}})
	t.Cleanup(func() { w.b.setCrashHooks(nil) })
	mustSync(t, w.b)
	w.b.setCrashHooks(nil)
	if f == nil {
		t.Fatal("the writer never opened the file")
	}
	if n := heldCount(w.b); n != 1 {
		t.Fatalf("%d versions held after the sync, want the ledger's", n)
	}
	if _, err := f.WriteString(ledgerRec("b-after-sync")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	testutil.WriteFile(t, w.bDir, "areas/n.html", "n\n")
	mustCommit(t, w.b, "areas/n.html")
	all := []string{"r0", "a1", "b1", "b-after-sync"}
	wantIDs(t, "work tree", readWork(t, w.bDir, "memory.jsonl"), all...)
	wantIDs(t, "HEAD", testutil.RunGit(t, w.bDir, "show", "HEAD:memory.jsonl"), all...)
	if got := testutil.RunGit(t, w.bDir, "show", "HEAD:areas/n.html"); got != "n\n" {
		t.Fatalf("the commit itself: areas/n.html = %q", got)
	}
	statusClean(t, w.b)
	mustSync(t, w.b)
	wantIDs(t, "remote", testutil.RunGit(t, w.bare, "show", "main:memory.jsonl"), all...)
	heldMin = 0
	testutil.WriteFile(t, w.bDir, "areas/n.html", "n2\n")
	mustCommit(t, w.b, "areas/n.html")
	noneHeld(t, w.b)
}

// A held version whose stamp has not moved since it last held base is not read again
// until it is due for release (heldMin): the checkouts of the two seconds it outlives its
// sync do not each read it. The read at heldMin still finds what a writer left in it that
// the stamp did not show (a rewrite in place within one timestamp tick, simulated by
// taking the stamp after the write as the one seen), before the version can go.
func TestHeldVersionReadWhenDue(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "v1\n"})
	testutil.WriteFile(t, w.aDir, "areas/a.html", "from A\n")
	mustCommit(t, w.a, "areas/a.html")
	mustSync(t, w.a)
	// A writer that opened the file before B's checkout replaced it.
	f, err := os.OpenFile(filepath.Join(w.bDir, "areas/a.html"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mustSync(t, w.b)
	if n := heldCount(w.b); n != 1 {
		t.Fatalf("%d versions held after the fast-forward, want 1", n)
	}
	if _, err := f.WriteAt([]byte("v9\n"), 0); err != nil {
		t.Fatal(err)
	}
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	hv := w.b.held[0]
	st, err := hv.d.Stat()
	if err != nil {
		t.Fatal(err)
	}
	hv.seen = st // the write left the stamp as it was
	if got := w.b.heldEditsLocked(hv.at.Add(heldMin - time.Millisecond)); len(got) != 0 {
		t.Errorf("a young held version with an unmoved stamp was read: %d edits", len(got))
	}
	got := w.b.heldEditsLocked(hv.at.Add(heldMin))
	if len(got) != 1 || string(got[0].data) != "v9\n" {
		t.Fatalf("held version due for release: edits %d, want the writer's v9", len(got))
	}
}
