package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// TestConflictCacheDescribesOnlyWhatChanged: publish's conflict list hashes a copy and its
// original again only when the watcher or a job named one of them (or a directory above),
// or after a scan; the blob ids follow the files.
func TestConflictCacheDescribesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 12, 2, 13, 0, 0, 0, time.UTC)
	a1 := memd.ConflictCopyPath("areas/a.html", "vm", at)
	b1 := memd.ConflictCopyPath("notes/b.html", "vm", at)
	for _, p := range []string{"areas/a.html", a1, "notes/b.html", b1} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	calls := map[string]int{}
	c := &conflictCache{describe: func(d, cp string) (statusline.Conflict, error) {
		calls[cp]++
		return gitrepo.ConflictOf(d, cp)
	}}
	copies := []string{b1, a1}
	want := func(step string, a, b int) []statusline.Conflict {
		t.Helper()
		got := c.list(dir, copies)
		if calls[a1] != a || calls[b1] != b {
			t.Fatalf("%s: described %s %d times, %s %d times; want %d, %d", step, a1, calls[a1], b1, calls[b1], a, b)
		}
		if len(got) != len(copies) {
			t.Fatalf("%s: %d conflicts, want %d", step, len(got), len(copies))
		}
		return got
	}
	first := want("first list", 1, 1)
	if first[0].Copy != a1 || first[1].Copy != b1 {
		t.Fatalf("not sorted by copy: %+v", first)
	}
	want("nothing changed", 1, 1)
	c.touch([]string{"areas/other.html"})
	want("another file", 1, 1)
	c.touch([]string{"areas/a.html"}) // the original: its blob id is Theirs
	want("the original", 2, 1)
	c.touch([]string{"notes"}) // a directory the watcher named
	want("a directory above", 2, 2)
	c.touchAll()
	want("a scan", 3, 3)

	// The blob id follows an edit of the copy once the watcher reports it.
	if err := os.WriteFile(filepath.Join(dir, a1), []byte("edited"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.touch([]string{a1})
	got := want("the copy edited", 4, 3)
	fresh, err := gitrepo.ConflictOf(dir, a1)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Ours != fresh.Ours || got[0].Ours == first[0].Ours {
		t.Fatalf("Ours after the edit %s, want %s (before %s)", got[0].Ours, fresh.Ours, first[0].Ours)
	}

	// A copy resolved away leaves the list; a new one is described.
	copies = []string{a1}
	if got := want("b resolved", 4, 3); len(got) != 1 || got[0].Copy != a1 {
		t.Fatalf("after b's copy left: %+v", got)
	}
	copies = []string{a1, b1}
	want("b back", 4, 4)
}
