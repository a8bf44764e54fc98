package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

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
