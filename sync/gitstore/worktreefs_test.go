package gitstore

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/cache"
)

// In a linked worktree, go-git's removal of a packed ref rewrites the common dir's
// packed-refs, the one git reads, and leaves no file in the worktree's git dir.
func TestWorktreeStorageRemovesPackedRef(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "main")
	gitIndex(t, dir, "init", "-q", "-b", "main", main)
	gitIndex(t, main, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
	gitIndex(t, main, "update-ref", "refs/remotes/origin/gone", "HEAD")
	gitIndex(t, main, "pack-refs", "--all")
	linked := filepath.Join(dir, "linked")
	gitIndex(t, main, "worktree", "add", "-q", "-b", "side", linked)
	gitDir := filepath.Join(main, ".git", "worktrees", "linked")
	s := NewWorktreeStorage(gitDir, filepath.Join(main, ".git"), cache.NewObjectLRUDefault(), 0)
	if err := s.RemoveReference("refs/remotes/origin/gone"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "show-ref")
	cmd.Dir = linked
	out, _ := cmd.Output()
	if bytes.Contains(out, []byte("origin/gone")) {
		t.Fatalf("git still sees the removed ref:\n%s", out)
	}
	ents, _ := os.ReadDir(gitDir)
	for _, e := range ents {
		if bytes.Contains([]byte(e.Name()), []byte("packed-refs")) {
			t.Fatalf("%s in the worktree's git dir", e.Name())
		}
	}
}
