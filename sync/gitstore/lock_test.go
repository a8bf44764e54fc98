package gitstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"
)

const (
	hashA = "1111111111111111111111111111111111111111"
	hashB = "2222222222222222222222222222222222222222"
)

// ReadRef reads a loose ref before packed-refs, follows a symbolic ref, says zero for a
// missing one and names the ref whose file holds no hash.
func TestReadRef(t *testing.T) {
	g := t.TempDir()
	testutil.WriteFile(t, g, "packed-refs", "# pack-refs with: peeled fully-peeled sorted\n"+
		hashA+" refs/heads/main\n"+hashA+" refs/heads/packed\n^"+hashB+"\n")
	testutil.WriteFile(t, g, "refs/heads/main", hashB+"\n")
	testutil.WriteFile(t, g, "HEAD", "ref: refs/heads/main\n")
	testutil.WriteFile(t, g, "refs/heads/bad", "not a hash\n")
	for name, want := range map[string]string{"refs/heads/main": hashB, "HEAD": hashB, "refs/heads/packed": hashA} {
		if h, err := ReadRef(g, name); err != nil || h != plumbing.NewHash(want) {
			t.Errorf("ReadRef(%s) = %s, %v; want %s", name, h, err, want)
		}
	}
	if h, err := ReadRef(g, "refs/heads/none"); err != nil || !h.IsZero() {
		t.Errorf("missing ref = %s, %v; want zero, nil", h, err)
	}
	if _, err := ReadRef(g, "refs/heads/bad"); err == nil || !strings.Contains(err.Error(), "refs/heads/bad") {
		t.Errorf("bad ref err = %v, want one naming it", err)
	}
}

// A held lock is ErrLocked after the wait and its holder's file is left alone; a taken
// lock committed replaces the file, rolled back leaves it as it was.
func TestLockProtocol(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "ref")
	testutil.WriteFile(t, dir, "ref", "old\n")
	f, err := CreateLock(p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateLock(p, 0); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: err = %v, want ErrLocked", err)
	}
	RollbackLock(f)
	if b, _ := os.ReadFile(p); string(b) != "old\n" {
		t.Fatalf("after rollback: %q", b)
	}
	f, err = CreateLock(p, 0)
	if err != nil {
		t.Fatalf("lock after rollback: %v", err)
	}
	if _, err := f.WriteString("new\n"); err != nil {
		t.Fatal(err)
	}
	if err := CommitLock(f, p); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "new\n" {
		t.Fatalf("after commit: %q", b)
	}
	if _, err := os.Lstat(p + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file left behind: %v", err)
	}
}
