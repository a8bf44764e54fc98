package gitrepo

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestFileRemoteFetchCopiesObjects: a small fast-forward from a file remote is copied from
// its objects into one pack (no git upload-pack, pack-objects or index-pack); the clone
// then has the history git's fetch would give it, and git's fsck finds the pack, its index
// and every object whole. A fetch past maxCopyObjects goes through index-pack.
func TestFileRemoteFetchCopiesObjects(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/base.html": "base\n", "resources/r/x.html": "x\n"})
	mustSync(t, w.a)
	copied := []int{}
	w.a.testFileCopied = func(n int) { copied = append(copied, n) }
	packs := w.a.packCount()
	testutil.WriteFile(t, w.bDir, "areas/b1.html", "b one\n")
	testutil.WriteFile(t, w.bDir, "resources/r/x.html", "x edited\n")
	mustCommit(t, w.b, "areas/b1.html", "resources/r/x.html")
	testutil.WriteFile(t, w.bDir, "projects/p/b2.html", "b two\n")
	mustCommit(t, w.b, "projects/p/b2.html")
	mustSync(t, w.b)

	mustSync(t, w.a)
	// Two commits: each a commit and a root tree; a blob and its trees for each file.
	if len(copied) != 1 || copied[0] < 8 {
		t.Errorf("copies %v: want one of at least 8 objects", copied)
	}
	if got := w.a.packCount(); got != packs+1 {
		t.Errorf("packs on A %d → %d: want the copy's one", packs, got)
	}
	remote := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	if got := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "origin/main", "HEAD")); got != remote+"\n"+remote {
		t.Fatalf("A's origin/main and HEAD:\n%s\nwant the remote's %s twice", got, remote)
	}
	fsck(t, w.aDir)
	w.check(t)
	if got := readWork(t, w.aDir, "resources/r/x.html"); got != "x edited\n" {
		t.Errorf("x.html on A: %q", got)
	}

	// 120 new files: past maxCopyObjects (lowered to git's transfer.unpackLimit), a pack.
	defer func(n int) { maxCopyObjects = n }(maxCopyObjects)
	maxCopyObjects = 100
	for i := 0; i < 120; i++ {
		testutil.WriteFile(t, w.bDir, fmt.Sprintf("resources/many/f%03d.html", i), fmt.Sprintf("f %d\n", i))
	}
	testutil.RunGit(t, w.bDir, "add", "-A")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "many")
	mustSync(t, w.b)
	mustSync(t, w.a)
	if len(copied) != 1 {
		t.Errorf("copies %v: the fetch of 120 objects was copied too", copied)
	}
	if got := w.a.packCount(); got != packs+2 {
		t.Errorf("packs on A %d → %d after a fetch of 120 objects: want index-pack's too", packs, got)
	}
	fsck(t, w.aDir)
	w.check(t)
}

// TestFileRemoteFetchObjectNotItsName: a loose object in the remote whose content is not
// what its name says (written by hand) is not copied: the copy declines, git's fetch meets
// the same object and fails, and the clone keeps its branch, tracking ref and whole objects.
func TestFileRemoteFetchObjectNotItsName(t *testing.T) {
	t.Run("copied", testObjectNotItsName)
	t.Run("git", func(t *testing.T) {
		// git's fetch: index-pack files the forged bytes under their true name, and the
		// connectivity check (checkConnectedLocked) finds the blob missing.
		copyFileFetches = false
		defer func() { copyFileFetches = true }()
		testObjectNotItsName(t)
	})
}

func testObjectNotItsName(t *testing.T) {
	directFilePushes = false // B's push through receive-pack, which leaves the blob loose
	defer func() { directFilePushes = true }()
	w := newSyncWorld(t, map[string]string{"areas/base.html": "base\n"})
	mustSync(t, w.a)
	before := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "origin/main"))
	testutil.WriteFile(t, w.bDir, "areas/b.html", "the real content\n")
	mustCommit(t, w.b, "areas/b.html")
	mustSync(t, w.b)
	blob := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main:areas/b.html"))
	loose := filepath.Join(w.bare, "objects", blob[:2], blob[2:])
	if _, err := os.Stat(loose); err != nil {
		t.Fatalf("the pushed blob is not loose in the remote (%v): the test cannot forge it", err)
	}
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	fmt.Fprintf(zw, "blob %d\x00%s", len("a forged content\n"), "a forged content\n")
	zw.Close()
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, filepath.Dir(loose), filepath.Base(loose), z.String())

	_, err := w.a.Sync(t.Context(), pushOpts())
	if err == nil {
		t.Fatalf("A synced a remote whose blob %s is forged", blob[:12])
	}
	if got := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "origin/main")); got != before {
		t.Errorf("A's origin/main moved to %s past a forged object", got)
	}
	if _, err := os.Stat(filepath.Join(w.aDir, ".git", "objects", blob[:2], blob[2:])); err == nil {
		t.Errorf("A holds an object named %s", blob[:12])
	}
	fsck(t, w.aDir)
	if got := readWork(t, w.aDir, "areas/base.html"); got != "base\n" {
		t.Errorf("base.html on A: %q", got)
	}
}
