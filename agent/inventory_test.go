package agent

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/demo"
)

// The inventory's work for a commit is proportional to the paths it changed, not to the
// repo (the 100k-file target, counted rather than timed, as the scrape-cost
// benchmark does): an edited, a new and a deleted memory and a deleted path that held no
// memories touch 3 entries at 200 files and at 2000, the snapshot after it touches none
// (the counts are kept, the ledger's are kept until a note changes state), and the counts
// equal a fresh full build's.
func TestInventoryWorkPerCommitIsProportionalToChanges(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{200, 2000} {
		root := t.TempDir()
		if _, err := demo.Generate(root, demo.Options{Memories: n, Now: now, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		cfg := memd.DefaultConfig()
		cfg.Repo = root
		inv := buildInventory(cfg, nil)
		if len(inv.files) < n/2 {
			t.Fatalf("%d files: inventory has %d entries", n, len(inv.files))
		}
		inv.snapshot(now) // counts the ledger once
		var mems []string
		for p := range inv.files {
			if strings.HasPrefix(p, "areas/") {
				mems = append(mems, p)
			}
		}
		sort.Strings(mems)
		edited, deleted := mems[0], mems[1]
		added := filepath.ToSlash(filepath.Join(filepath.Dir(edited), "zz-new-memory.html"))
		data, err := os.ReadFile(filepath.Join(root, edited))
		if err != nil {
			t.Fatal(err)
		}
		must(t, os.WriteFile(filepath.Join(root, added), data, 0o644))
		must(t, os.WriteFile(filepath.Join(root, edited), append(data, "\n<!-- edited -->\n"...), 0o644))
		must(t, os.Chtimes(filepath.Join(root, edited), now, now.Add(time.Minute))) // a new mtime, whatever the clock
		must(t, os.Remove(filepath.Join(root, deleted)))

		inv.touched = 0
		inv.update(root, []string{edited, added, deleted, "notes/gone"})
		if inv.touched != 3 {
			t.Errorf("%d files: the update touched %d entries, want 3 (one per changed memory)", n, inv.touched)
		}
		inv.touched = 0
		got := inv.snapshot(now.Add(time.Second))
		if inv.touched != 0 {
			t.Errorf("%d files: the snapshot touched %d entries, want 0", n, inv.touched)
		}
		want := buildInventory(cfg, nil).snapshot(now.Add(time.Second))
		if !reflect.DeepEqual(got.Memories, want.Memories) || got.Inbox != want.Inbox || got.TaskInbox != want.TaskInbox ||
			got.Invalid != want.Invalid || got.Arcs != want.Arcs || !reflect.DeepEqual(got.LedgerRecords, want.LedgerRecords) ||
			!reflect.DeepEqual(got.LedgerNotes, want.LedgerNotes) {
			t.Errorf("%d files: kept counts differ from a full build:\n got %+v\nwant %+v", n, got.Snapshot, want.Snapshot)
		}
	}
}

// The ledger's note counts follow the clock without a change to the ledger: a snapshot past
// a note's expiry counts again and moves it from live to expired.
func TestInventoryLedgerCountsFollowTheClock(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	root := t.TempDir()
	ledger := `{"type":"note","id":"n1","text":"until tomorrow","created":"2026-11-30T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-12-01T00:00:00Z"}}` + "\n"
	must(t, os.WriteFile(filepath.Join(root, "memory.jsonl"), []byte(ledger), 0o644))
	cfg := memd.DefaultConfig()
	cfg.Repo = root
	inv := buildInventory(cfg, nil)
	live := inv.snapshot(now)
	if inv.lc.records == nil || live.LedgerRecords["note"] != 1 {
		t.Fatalf("ledger not read: %+v (records %v)", live.LedgerNotes, live.LedgerRecords)
	}
	inv.touched = 0
	inv.snapshot(now.Add(time.Hour))
	if inv.touched != 0 {
		t.Errorf("a snapshot before the note's expiry re-counted the ledger (%d touched)", inv.touched)
	}
	later := inv.snapshot(now.Add(13 * time.Hour))
	if inv.touched == 0 {
		t.Errorf("a snapshot past the note's expiry did not re-count the ledger")
	}
	lk := func(s invSnapshot) map[string]int {
		m := map[string]int{}
		for k, v := range s.LedgerNotes {
			m[k.State] += v
		}
		return m
	}
	if lk(live)["live"] != 1 || lk(later)["expired"] != 1 {
		t.Errorf("note states: at first %v, past expiry %v", lk(live), lk(later))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memhtml's generated listings, its .memhtml/ directory and a root README.html are not
// memories: never counted (memories, inbox depth, invalid) in the metrics and status.
func TestInventorySkipsNonMemories(t *testing.T) {
	root := t.TempDir()
	valid := `<!doctype html><html><head><title>T</title>
<meta name="memhtml-type" content="semantic"><meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2026-01-01"><meta name="memhtml-updated" content="2026-01-01">
</head><body><article><p><mark>A claim.</mark></p></article></body></html>`
	for rel, data := range map[string]string{
		"areas/inbox/a.html":        valid,
		"areas/inbox/index.html":    "<html><body><ul><li>a</li></ul></body></html>",
		"areas/index.html":          "<html><body>listing</body></html>",
		"sitemap.xml":               "<urlset/>",
		"README.html":               "<html><body><h1>repo</h1></body></html>",
		".memhtml/sleep/run-1.html": "<html><body>report</body></html>",
	} {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := memd.DefaultConfig()
	cfg.Repo = root
	s := buildInventory(cfg, nil).snapshot(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	total := 0
	for _, n := range s.Memories {
		total += n
	}
	if total != 1 || s.Inbox != 1 || s.Invalid != 0 {
		t.Errorf("memories %v (total %d), inbox %d, invalid %d: want 1, 1, 0", s.Memories, total, s.Inbox, s.Invalid)
	}
}

// Duplicate articles (one content hash on two active memories, which memhtml's index
// refuses) are counted as the tree changes, and the inbox counts tasks as memhtml's doctor.
func TestInventoryDuplicatesAndInbox(t *testing.T) {
	root := t.TempDir()
	doc := func(typ, claim, extra string) []byte {
		return []byte("<!doctype html>\n<html>\n<head>\n<title>T</title>\n<meta name=\"memhtml-type\" content=\"" + typ + "\">\n" +
			"<meta name=\"memhtml-status\" content=\"active\">\n<meta name=\"memhtml-created\" content=\"2025-01-01\">\n" +
			"<meta name=\"memhtml-updated\" content=\"2025-01-01\">\n" + extra + "</head>\n<body>\n<article>\n<p><mark>" + claim + "</mark></p>\n</article>\n</body>\n</html>\n")
	}
	files := map[string][]byte{
		"areas/x/a.html":           doc("semantic", "Same claim.", ""),
		"areas/y/b.html":           doc("semantic", "Same claim.", ""),
		"archive/2026/c.html":      doc("semantic", "Same claim.", ""),
		"areas/inbox/tasks/t.html": doc("task", "A task.", "<meta name=\"memhtml-task-status\" content=\"todo\">\n"),
		"areas/inbox/n.html":       doc("semantic", "Unplaced.", ""),
	}
	for p, b := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(root, p), b, 0o644))
	}
	cfg := memd.DefaultConfig()
	cfg.Repo = root
	inv := buildInventory(cfg, nil)
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if s := inv.snapshot(now); s.Duplicates != 1 || s.Inbox != 2 || s.TaskInbox != 1 {
		t.Errorf("duplicates %d, inbox %d, task inbox %d; want 1, 2, 1", s.Duplicates, s.Inbox, s.TaskInbox)
	}
	must(t, os.Remove(filepath.Join(root, "areas/y/b.html")))
	inv.update(root, []string{"areas/y/b.html"})
	if s := inv.snapshot(now); s.Duplicates != 0 {
		t.Errorf("duplicates %d after one copy went, want 0", s.Duplicates)
	}
}
