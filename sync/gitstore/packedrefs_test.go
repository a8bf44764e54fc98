package gitstore

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestReadPackedRefSorted: every ref of a sorted packed-refs with peeled lines is found by
// the binary search, an absent one is zero; an unsorted file is scanned.
func TestReadPackedRefSorted(t *testing.T) {
	for _, sorted := range []bool{true, false} {
		dir := t.TempDir()
		var b strings.Builder
		if sorted {
			b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
		}
		want := map[string]plumbing.Hash{}
		for i := range 500 {
			name := fmt.Sprintf("refs/tags/v%04d", i)
			h := plumbing.NewHash(fmt.Sprintf("%040x", i+1))
			want[name] = h
			fmt.Fprintf(&b, "%s %s\n", h, name)
			if i%3 == 0 {
				fmt.Fprintf(&b, "^%040x\n", 9999-i)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "packed-refs"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, h := range want {
			if got, err := readPackedRef(dir, name); err != nil || got != h {
				t.Fatalf("sorted=%v %s = %s, %v; want %s", sorted, name, got, err, h)
			}
		}
		for _, name := range []string{"refs/tags/v", "refs/tags/v9999", "refs/heads/main", "a", "zzz"} {
			if got, err := readPackedRef(dir, name); err != nil || !got.IsZero() {
				t.Fatalf("sorted=%v absent %s = %s, %v", sorted, name, got, err)
			}
		}
	}
}
