package gitrepo

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// ChangedPaths agrees with git diff --name-only, across adds, edits, deletes and a mode change,
// and from the empty tree.
func TestChangedPathsMatchesGit(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/a.html", "a")
	testutil.WriteFile(t, dir, "areas/deep/b.html", "b")
	testutil.WriteFile(t, dir, "keep.md", "k")
	first := mustCommit(t, r, "areas", "keep.md").Hash
	testutil.WriteFile(t, dir, "areas/a.html", "a2")
	if err := os.Remove(filepath.Join(dir, "areas/deep/b.html")); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, dir, "resources/c.html", "c")
	if err := os.Chmod(filepath.Join(dir, "keep.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	second := mustCommit(t, r, "areas", "resources", "keep.md").Hash

	got, err := r.ChangedPaths(first, second)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(testutil.RunGit(t, dir, "diff", "--name-only", first, second))
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChangedPaths = %q, git diff says %q", got, want)
	}
	all, err := r.ChangedPaths("", first)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"areas/a.html", "areas/deep/b.html", "keep.md"}; !reflect.DeepEqual(all, want) {
		t.Errorf("from the empty tree: %q, want %q", all, want)
	}
	if same, err := r.ChangedPaths(second, second); err != nil || len(same) != 0 {
		t.Errorf("same commit: %q, %v", same, err)
	}
	for _, bad := range []string{"HEAD", "zz", strings.Repeat("0", 39) + "1"} {
		if _, err := r.ChangedPaths(bad, second); err == nil {
			t.Errorf("ChangedPaths(%q) = nil error", bad)
		}
	}
}
