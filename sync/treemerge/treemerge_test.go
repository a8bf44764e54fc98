package treemerge

import (
	"errors"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/memd-dev/memd/internal/testutil"
)

// storeWriter writes objects through go-git's own storer (sync writes loose
// objects itself; any writer does for the tree merge).
func storeWriter(s storer.EncodedObjectStorer) func(plumbing.ObjectType, []byte) (plumbing.Hash, error) {
	return func(typ plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
		o := s.NewEncodedObject()
		o.SetType(typ)
		o.SetSize(int64(len(content)))
		w, err := o.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(content); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		return s.SetEncodedObject(o)
	}
}

func TestPatchTreeAndDiff(t *testing.T) {
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	for p, c := range map[string]string{"a/b/c.txt": "c\n", "a/d.txt": "d\n", "top.txt": "t\n"} {
		testutil.WriteFile(t, dir, p, c)
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "x")
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := repo.Storer
	root := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD^{tree}")))
	st := NewStore(s, storeWriter(s))
	blob, err := st.WriteBlob([]byte("new\n"))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := st.readBlob(&Entry{Hash: blob}); err != nil || string(b) != "new\n" {
		t.Fatalf("blob not readable before flush: %q, %v", b, err)
	}
	e := &Entry{Hash: blob, Mode: filemode.Regular}
	cases := []struct {
		name    string
		changes map[string]*Entry
		want    map[string]Change // expected diff root → result (To only checked)
		err     error
	}{
		{"add deep", map[string]*Entry{"x/y/z.txt": e}, map[string]Change{"x/y/z.txt": {To: e}}, nil},
		{"delete last file drops dirs", map[string]*Entry{"a/b/c.txt": nil}, map[string]Change{"a/b/c.txt": {}}, nil},
		{"file replaces dir", map[string]*Entry{"a/b/c.txt": nil, "a/b": e}, map[string]Change{"a/b/c.txt": {}, "a/b": {To: e}}, nil},
		{"dir replaces file", map[string]*Entry{"top.txt": nil, "top.txt/in": e}, map[string]Change{"top.txt": {}, "top.txt/in": {To: e}}, nil},
		{"file onto live dir", map[string]*Entry{"a": e}, nil, ErrPathConflict},
		{"dir under live file", map[string]*Entry{"top.txt/in": e}, nil, ErrPathConflict},
		{"delete missing is no-op", map[string]*Entry{"nope/x": nil}, map[string]Change{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := PatchTree(st, root, c.changes)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("err = %v, want %v", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			diff := map[string]Change{}
			if err := DiffTrees(s, root, h, "", diff); err != nil {
				t.Fatal(err)
			}
			if len(diff) != len(c.want) {
				t.Fatalf("diff %v, want %v", diff, c.want)
			}
			for p, w := range c.want {
				if got, ok := diff[p]; !ok || !got.To.Same(w.To) {
					t.Errorf("path %s: %+v, want To %+v", p, got, w.To)
				}
			}
			// git agrees the tree is well formed.
			testutil.RunGit(t, dir, "ls-tree", "-r", h.String())
		})
	}
}

func TestRenameDetection(t *testing.T) {
	h1, h2 := plumbing.NewHash("1111111111111111111111111111111111111111"), plumbing.NewHash("2222222222222222222222222222222222222222")
	e1, e2 := &Entry{Hash: h1, Mode: filemode.Regular}, &Entry{Hash: h2, Mode: filemode.Regular}
	changes := map[string]Change{
		"areas/x.html":                    {From: e1},
		"areas/copy.html":                 {To: e1},
		"archive/2024/areas/x.html":       {To: e1},
		"areas/y.html":                    {From: e2},
		"resources/y.html":                {To: e2},
		"areas/z.html":                    {From: &Entry{Hash: plumbing.NewHash("3333333333333333333333333333333333333333"), Mode: filemode.Regular}},
		"areas/modified.html":             {From: e1, To: e2},
		"archive/2023/areas/nothing.html": {To: e2},
	}
	got := renames(changes)
	if got["areas/x.html"] != "archive/2024/areas/x.html" {
		t.Errorf("archive mapping not preferred: %v", got)
	}
	if got["areas/y.html"] == "" {
		t.Errorf("plain rename missed: %v", got)
	}
	if _, ok := got["areas/z.html"]; ok {
		t.Errorf("pure delete taken as rename: %v", got)
	}
	if unarchive("archive/2024/a/b.html") != "a/b.html" || unarchive("archive/20x4/a") != "archive/20x4/a" || unarchive("areas/a") != "areas/a" {
		t.Error("unarchive")
	}
}
