package repofiles_test

import (
	"io/fs"
	"slices"
	"testing"

	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
)

// TestWalkMixedRepo: the definition itself on the tree every consumer is checked against
// (agent.TestEveryConsumerSeesTheSameFiles, sleep.TestWalkSeesTheRepoFiles).
func TestWalkMixedRepo(t *testing.T) {
	m := testutil.NewMixedRepo(t)
	ig, err := repofiles.New(m.Root, testutil.MixedRepoIgnore)
	if err != nil {
		t.Fatal(err)
	}
	var files, links, dirs []string
	err = repofiles.Walk(m.Root, "", ig.Ignored, repofiles.Funcs{
		Dir: func(rel string) { dirs = append(dirs, rel) },
		File: func(rel string, d fs.DirEntry) error {
			files = append(files, rel)
			if d.Type()&fs.ModeSymlink != 0 {
				links = append(links, rel)
			}
			return nil
		},
		Fail: func(rel string, err error) { t.Errorf("walk failed at %s: %v", rel, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(files, m.Files) {
		t.Errorf("files:\n got %q\nwant %q", files, m.Files)
	}
	if slices.Sort(links); !slices.Equal(links, m.Links) {
		t.Errorf("links: got %q, want %q", links, m.Links)
	}
	if slices.Sort(dirs); !slices.Equal(dirs, m.Dirs) {
		t.Errorf("dirs: got %q, want %q", dirs, m.Dirs)
	}
	for _, d := range m.Decoys {
		if !ig.Ignored(d, false) && !repofiles.InNestedRepo(m.Root, d, nil) {
			t.Errorf("decoy %s is neither ignored nor in a nested repository", d)
		}
	}
	// The same rules with Build (one walk reading the .gitignore files as it goes) and
	// with Extend from a subtree.
	var built []string
	if _, err := repofiles.Build(m.Root, testutil.MixedRepoIgnore, repofiles.Funcs{File: func(rel string, _ fs.DirEntry) error {
		built = append(built, rel)
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(built, m.Files) {
		t.Errorf("Build's walk:\n got %q\nwant %q", built, m.Files)
	}
}

// TestWalkStopsOnFileError: a File error ends the walk and is returned.
func TestWalkStopsOnFileError(t *testing.T) {
	m := testutil.NewMixedRepo(t)
	n := 0
	err := repofiles.Walk(m.Root, "", nil, repofiles.Funcs{File: func(string, fs.DirEntry) error {
		n++
		return fs.ErrInvalid
	}})
	if err != fs.ErrInvalid || n != 1 {
		t.Fatalf("Walk = %v after %d files, want fs.ErrInvalid after 1", err, n)
	}
	if err := repofiles.Walk(m.Root, "no/such/dir", nil, repofiles.Funcs{}); err == nil {
		t.Fatal("Walk of a missing start: no error")
	}
}
