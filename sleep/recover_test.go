package sleep

import (
	"os"
	"path/filepath"
	"testing"
)

// A killed apply leaves writeAtomic's temp files beside its targets; recovery removes them
// and nothing else.
func TestSweepTempsRemovesOnlyApplyTemps(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "areas", "arcs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	temp := filepath.Join(dir, ".x[1].html.memd-123.tmp")
	keep := []string{filepath.Join(dir, "x[1].html"), filepath.Join(dir, ".other.html.memd-9.tmp"), filepath.Join(dir, "user.tmp")}
	for _, p := range append([]string{temp}, keep...) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sweepTemps(root, []journalEntry{{Kind: "write", Path: "areas/arcs/x[1].html"}})
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Fatalf("temp file left: %v", err)
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s removed: %v", p, err)
		}
	}
}
