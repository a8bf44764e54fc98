package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// memd doctor names what a crash left in .git and what memd run will do; --repair does it,
// and the repo is whole after, its work tree as it was.
func TestDoctorRepairsGitDir(t *testing.T) {
	isolateHome(t)
	base := t.TempDir()
	remote, dir := filepath.Join(base, "r.git"), filepath.Join(base, "memory")
	testutil.RunGit(t, base, "init", "-q", "--bare", "-b", "main", remote)
	if code, _, stderr := runApp(t, "init", "--remote", remote, dir); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	tree := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD:areas"))
	if err := os.Truncate(filepath.Join(dir, ".git/objects", tree[:2], tree[2:]), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git/HEAD"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runApp(t, "doctor", "--repo", dir)
	if code != 1 || !strings.Contains(out, "HEAD is empty; memd run will rewrite HEAD") ||
		!strings.Contains(out, "loose object "+tree+" is corrupt (empty); memd run will move it aside") {
		t.Fatalf("doctor: %d\n%s", code, out)
	}
	code, out, stderr := runApp(t, "doctor", "--repo", dir, "--repair")
	if code != 0 || !strings.Contains(out, "repaired: HEAD was empty") {
		t.Fatalf("doctor --repair: %d\n%s\n%s", code, out, stderr)
	}
	testutil.RunGit(t, dir, "fsck", "--full", "--strict")
	if st := testutil.RunGit(t, dir, "status", "--porcelain"); st != "" {
		t.Fatalf("status after repair: %q", st)
	}
	if code, out, _ := runApp(t, "doctor", "--repo", dir); code != 0 || strings.Contains(out, " git ") {
		t.Fatalf("doctor after repair: %d\n%s", code, out)
	}
}
