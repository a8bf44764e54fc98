package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/doctor"
)

// The inventory counts the duplicates doctor reports (active memories of one content hash;
// archived ones and tasks aside), and keeps the count as files change.
func TestInventoryCountsDuplicatesAsDoctorDoes(t *testing.T) {
	root := t.TempDir()
	mem := func(title string) string {
		return `<!doctype html><html><head><title>` + title + `</title>
<meta name="memhtml-type" content="semantic"><meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2026-01-01"><meta name="memhtml-updated" content="2026-01-01">
</head><body><article><p><mark>One claim.</mark></p></article></body></html>`
	}
	write := func(rel, data string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(data), 0o644))
	}
	write("areas/a/one.html", mem("One"))
	write("areas/a/two.html", mem("Two"))
	write("resources/b/three.html", mem("Three"))
	write("archive/2025/areas/a/old.html", mem("Old"))
	cfg := memd.DefaultConfig()
	cfg.Repo = root
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	v := buildInventory(cfg, nil)
	rep, err := doctor.Check(root, doctor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, f := range rep.Findings {
		if f.Check == "duplicate" {
			dups++
		}
	}
	if s := v.snapshot(now); s.Duplicates != 2 || dups != 1 {
		t.Fatalf("inventory duplicates %d (want 2: three memories of one hash), doctor findings %d", s.Duplicates, dups)
	}
	must(t, os.Remove(filepath.Join(root, "areas/a/two.html")))
	v.update(root, []string{"areas/a/two.html"})
	if s := v.snapshot(now); s.Duplicates != 1 {
		t.Fatalf("after a removal: %d duplicates, want 1", s.Duplicates)
	}
}
