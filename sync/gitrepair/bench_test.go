package gitrepair

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// BenchmarkDiagnose: the start-up look over a repo of 10k files in loose objects, shallow
// (every start) and deep (after an unclean stop).
func BenchmarkDiagnose(b *testing.B) {
	dir := b.TempDir()
	testutil.RunGit(b, dir, "init", "-q", "-b", "main")
	testutil.RunGit(b, dir, "config", "gc.auto", "0") // the objects stay loose
	for i := range 10000 {
		p := filepath.Join(dir, fmt.Sprintf("areas/d%02d/m%05d.html", i%100, i))
		if i < 100 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("<p>memory %d</p>\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	testutil.RunGit(b, dir, "add", "-A")
	testutil.RunGit(b, dir, "commit", "-q", "-m", "all")
	for _, deep := range []bool{false, true} {
		b.Run(fmt.Sprintf("deep=%v", deep), func(b *testing.B) {
			o := Options{GitDir: filepath.Join(dir, ".git"), WorkDir: dir, Deep: deep}
			for b.Loop() {
				if ps, err := Diagnose(context.Background(), o); err != nil || len(ps) != 0 {
					b.Fatal(ps, err)
				}
			}
		})
	}
}
