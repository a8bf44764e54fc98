package gitstore

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
)

// TestWritePackGitReadsIt: the pack and index WritePack makes are what git makes: `git
// verify-pack` checks both (checksums, CRCs, every object's name against its content), and
// `git cat-file` and Storage read each object back. Sizes cover the one-byte entry header
// and the longer ones (a 200 KB blob).
func TestWritePackGitReadsIt(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	gitDir := filepath.Join(dir, ".git")
	contents := [][]byte{[]byte("tiny\n"), []byte("a line of some thirty bytes\n"), bytes.Repeat([]byte("memd "), 40000), {}}
	var objs []RawObject
	for _, c := range contents {
		objs = append(objs, RawObject{Hash: HashObject(plumbing.BlobObject, c), Type: plumbing.BlobObject, Content: c})
	}
	if err := WritePack(gitDir, objs); err != nil {
		t.Fatal(err)
	}
	idx, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "pack-*.idx"))
	if len(idx) != 1 {
		t.Fatalf("pack indexes: %v", idx)
	}
	if out, err := exec.Command("git", "-C", dir, "verify-pack", "-v", idx[0]).CombinedOutput(); err != nil {
		t.Fatalf("git verify-pack: %v: %s", err, out)
	}
	if left, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "tmp_*")); len(left) > 0 {
		t.Errorf("temp files left: %v", left)
	}
	s := NewStorage(gitDir, cache.NewObjectLRU(0), 1<<20)
	defer s.Close()
	for i, o := range objs {
		out, err := exec.Command("git", "-C", dir, "cat-file", "blob", o.Hash.String()).Output()
		if err != nil || !bytes.Equal(out, contents[i]) {
			t.Errorf("git cat-file %s: %v, %d bytes (want %d)", o.Hash, err, len(out), len(contents[i]))
		}
		typ, b, err := s.ReadBounded(o.Hash, 1<<20)
		if err != nil || typ != plumbing.BlobObject || !bytes.Equal(b, contents[i]) {
			t.Errorf("ReadBounded %s: %v %v, %d bytes", o.Hash, typ, err, len(b))
		}
	}
	if _, _, err := s.ReadBounded(objs[2].Hash, 1000); !errors.Is(err, ErrObjectTooBig) {
		t.Errorf("ReadBounded of 200 KB under a 1000-byte bound: %v, want ErrObjectTooBig", err)
	}
	// The same objects again: the same pack, already there.
	if err := WritePack(gitDir, objs); err != nil {
		t.Fatal(err)
	}
	if again, _ := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*")); len(again) != 2 {
		t.Errorf("after writing the same pack again: %v", again)
	}
	st, err := os.Stat(strings.TrimSuffix(idx[0], ".idx") + ".pack")
	if err != nil || st.Mode().Perm() != 0o444 {
		t.Errorf("pack mode: %v %v, want 0444 as git's", st.Mode(), err)
	}
}
