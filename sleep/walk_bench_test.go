package sleep

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/memd-dev/memd/internal/repofiles"
)

// BenchmarkWalkTree100k is sleep's snapshot walk over 100k memory files in 1,000
// directories with the committer's rules (a .gitignore and memd's list), as a nightly run
// does it:
//
//	go test -run '^$' -bench WalkTree100k -benchtime 5x ./sleep/
func BenchmarkWalkTree100k(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.log\nbuild/\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for d := range 1000 {
		dir := filepath.Join(root, "areas", fmt.Sprintf("a%02d", d/100), fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := range 100 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("20260101-m%03d.html", f)), []byte("x"), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	ign, err := repofiles.New(root, []string{"*.bak"})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		tr, err := walkTree(root, ign.Ignored)
		if err != nil || len(tr.files) != 100001 {
			b.Fatalf("walk: %v, %d files", err, len(tr.files))
		}
	}
}
