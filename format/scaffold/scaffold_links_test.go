package scaffold

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
)

// `memd init --remote` scaffolds a tree the remote just wrote: a skeleton folder or a
// .gitignore that is a symlink to elsewhere is refused, and nothing is made through it.
func TestScaffoldNeverWritesThroughLinks(t *testing.T) {
	for _, link := range []string{string(memd.BucketAreas), ".gitignore"} {
		t.Run(link, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			repo := filepath.Join(dir, "repo")
			if err := os.Mkdir(repo, 0o755); err != nil {
				t.Fatal(err)
			}
			target := outside
			if link == ".gitignore" {
				target = filepath.Join(outside, "victim")
				if err := os.WriteFile(target, []byte("precious\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(target, filepath.Join(repo, link)); err != nil {
				t.Fatal(err)
			}
			_, err := Init(repo)
			if link == string(memd.BucketAreas) && !errors.Is(err, safefs.ErrSymlink) {
				t.Fatalf("Init over a linked %s: %v, want ErrSymlink", link, err)
			}
			if link == ".gitignore" && !errors.Is(err, safefs.ErrSymlink) {
				t.Fatalf("Init over a linked .gitignore: %v, want ErrSymlink", err)
			}
			ents, _ := os.ReadDir(outside)
			if link == string(memd.BucketAreas) && len(ents) != 0 {
				t.Fatalf("Init wrote outside the repo: %v", ents)
			}
			if b, _ := os.ReadFile(filepath.Join(outside, "victim")); link == ".gitignore" && string(b) != "precious\n" {
				t.Fatalf("victim written: %q", b)
			}
		})
	}
}
