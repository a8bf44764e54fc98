package sleep

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memd-dev/memd/internal/safefs"
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
	safeTemp := filepath.Join(dir, ".memd-abcdefghijklmnop.tmp")
	keep := []string{filepath.Join(dir, "x[1].html"), filepath.Join(dir, ".other.html.memd-9.tmp"), filepath.Join(dir, "user.tmp")}
	for _, p := range append([]string{temp, safeTemp}, keep...) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := safefs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	sweepTemps(tree, []journalEntry{{Kind: "write", Path: "areas/arcs/x[1].html"}})
	for _, p := range []string{temp, safeTemp} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Fatalf("temp file %s left: %v", p, err)
		}
	}
	for _, p := range keep {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s removed: %v", p, err)
		}
	}
}
