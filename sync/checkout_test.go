package sync

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
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
func ledgerCase(t *testing.T, remerged bool, arm func(fire func())) {
	w := newSyncWorld(t, map[string]string{"memory.jsonl": rec("r0")})
	appendFile(t, w.aDir, "memory.jsonl", rec("r1"))
	mustCommit(t, w.a, "memory.jsonl")
	mustSync(t, w.a)
	fired := false
	arm(func() {
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
			if got := runGit(t, d, "show", "main:memory.jsonl"); strings.Count(got, `"id":"`+id+`"`) != 1 {
				t.Fatalf("%s: main lacks %s once:\n%s", d, id, got)
			}
		}
	}
	statusClean(t, w.b)
	fsck(t, w.bDir)
	if log := runGit(t, w.bDir, "log", "--format=%s", "main"); strings.Contains(log, "edits made during checkout") != remerged {
		t.Fatalf("remerged = %v, want %v:\n%s", !remerged, remerged, log)
	}
}

// An edit between the check and the ref move: ErrWorktreeChanged (HEAD not moved), the
// edit is committed on the old HEAD and merged, nothing clobbered.
func TestCheckoutEditBeforeRefMove(t *testing.T) {
	ledgerCase(t, false, func(fire func()) {
		hookBeforeVerify = fire
		t.Cleanup(func() { hookBeforeVerify = nil })
	})
}

// An edit after the ref moved, before the file's rename: CommitIf refuses to clobber it,
// the edit is committed on the old head and merged into the new one (mergeEditsLocked, edits.go).
func TestCheckoutEditAfterRefMove(t *testing.T) {
	ledgerCase(t, true, func(fire func()) {
		hookAfterRefMove = func() error { fire(); return nil }
		t.Cleanup(func() { hookAfterRefMove = nil })
	})
}

// prepareCheckout in strict mode reports an edit made before it as ErrWorktreeChanged and
// leaves no temp file and no directory behind.
func TestCheckoutAllOrNothing(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	writeFile(t, w.aDir, "areas/a.html", "a2\n")
	writeFile(t, w.aDir, "new/deep/n.html", "n\n")
	mustCommit(t, w.a, "areas/a.html", "new")
	mustSync(t, w.a)
	if err := w.b.Fetch(t.Context(), pushOpts()); err != nil {
		t.Fatal(err)
	}
	writeFile(t, w.bDir, "areas/a.html", "edited on b\n")
	head := runGit(t, w.bDir, "rev-parse", "HEAD")
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
	if runGit(t, w.bDir, "rev-parse", "HEAD") != head {
		t.Fatal("HEAD moved")
	}
}

func mustHash(t *testing.T, dir, rev string) plumbing.Hash {
	return plumbing.NewHash(revParse(t, dir, rev))
}
