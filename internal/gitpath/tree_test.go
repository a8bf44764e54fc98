package gitpath

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/memd-dev/memd/sync/treemerge"
)

type rawEntry struct {
	mode, name string
	hash       plumbing.Hash
}

func putTree(t testing.TB, s *memory.Storage, ents []rawEntry) plumbing.Hash {
	var b bytes.Buffer
	for _, e := range ents {
		b.WriteString(e.mode + " " + e.name + "\x00")
		b.Write(e.hash[:])
	}
	return putObj(t, s, plumbing.TreeObject, b.Bytes())
}

func putObj(t testing.TB, s *memory.Storage, typ plumbing.ObjectType, data []byte) plumbing.Hash {
	o := s.NewEncodedObject()
	o.SetType(typ)
	w, _ := o.Writer()
	w.Write(data)
	w.Close()
	h, err := s.SetEncodedObject(o)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// chainTree builds a tree from "\n"-separated specs, each a mode letter (d directory,
// l link, f file, D a duplicate of the previous name) and a name; a directory holds the
// specs after it.
func chainTree(t testing.TB, s *memory.Storage, spec string) plumbing.Hash {
	blob := putObj(t, s, plumbing.BlobObject, []byte("x"))
	specs := strings.Split(spec, "\n")
	child := putTree(t, s, nil)
	for i := len(specs) - 1; i >= 0; i-- {
		sp := specs[i]
		if sp == "" {
			continue
		}
		kind, name := sp[0], sp[1:]
		var ents []rawEntry
		switch kind {
		case 'd':
			ents = []rawEntry{{"40000", name, child}}
		case 'l':
			ents = []rawEntry{{"120000", name, blob}, {"40000", "z", child}}
		case 'D':
			ents = []rawEntry{{"100644", name, blob}, {"40000", name, child}}
		default:
			ents = []rawEntry{{"100644", name, blob}, {"40000", "z", child}}
		}
		child = putTree(t, s, ents)
	}
	return child
}

func TestCheckTreeRefuses(t *testing.T) {
	for _, spec := range []string{"d..\nfx", "d.git\nfhooks", "d.GIT", "dx\nd.git.", "dgit~1", "fa/b", "Ddup", "d\nfx", "d.", "da\nl.gitmodules", "dx\x00y"} {
		s := memory.NewStorage()
		err := CheckTree(s, plumbing.ZeroHash, chainTree(t, s, spec), plumbing.ZeroHash)
		var ue *UnsafeTreeError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnsafeTree) {
			t.Errorf("%q: %v, want an UnsafeTreeError", spec, err)
		}
	}
	s := memory.NewStorage()
	if err := CheckTree(s, plumbing.ZeroHash, chainTree(t, s, "dareas\nd記憶\nfx.html\nl.gitignorex"), plumbing.ZeroHash); err != nil {
		t.Errorf("valid tree refused: %v", err)
	}
	// Too deep: 4097 levels of one-byte names would pass the path limit only with
	// shorter names, so the path limit refuses first; both bound the walk.
	deep := strings.Repeat("dd\n", 5000)
	if err := CheckTree(s, plumbing.ZeroHash, chainTree(t, s, deep), plumbing.ZeroHash); !errors.Is(err, ErrUnsafeTree) {
		t.Errorf("5000-deep tree: %v", err)
	}
}

// FuzzTreeNames: whatever names a remote puts in its trees, a tree the validator lets
// through yields only paths that stay inside the work tree and never touch .git.
func FuzzTreeNames(f *testing.F) {
	for _, s := range []string{"d..\nfx", "d.git", "fa/b", "da\ndb\nfc", "d.git.\nfx", "dgit~1", "d.g\u200cit", "Dx", "d \nf."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s := memory.NewStorage()
		tree := chainTree(t, s, spec)
		if err := CheckTree(s, plumbing.ZeroHash, tree, plumbing.ZeroHash); err != nil {
			if !errors.Is(err, ErrUnsafeTree) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		changes := map[string]treemerge.Change{}
		if err := treemerge.DiffTrees(s, plumbing.ZeroHash, tree, "", changes); err != nil {
			t.Fatal(err)
		}
		root := "/work/tree"
		for p := range changes {
			if !filepath.IsLocal(filepath.FromSlash(p)) {
				t.Fatalf("path %q leaves the root", p)
			}
			abs := filepath.Join(root, filepath.FromSlash(p))
			if !strings.HasPrefix(abs, root+"/") {
				t.Fatalf("path %q joins to %q", p, abs)
			}
			for _, c := range strings.Split(p, "/") {
				if strings.EqualFold(strings.TrimRight(c, ". "), ".git") || c == "" || c == "." || c == ".." {
					t.Fatalf("path %q has component %q", p, c)
				}
			}
		}
	})
}

// A name longer than NAME_MAX is refused before the branch moves.
func TestCheckTreeNameMax(t *testing.T) {
	s := memory.NewStorage()
	long := strings.Repeat("x", 256)
	if err := CheckTree(s, plumbing.ZeroHash, chainTree(t, s, "dareas\nf"+long), plumbing.ZeroHash); !errors.Is(err, ErrUnsafeTree) {
		t.Fatalf("256-byte name: %v", err)
	}
	if err := CheckTree(s, plumbing.ZeroHash, chainTree(t, s, "dareas\nf"+long[:255]), plumbing.ZeroHash); err != nil {
		t.Fatalf("255-byte name: %v", err)
	}
}
