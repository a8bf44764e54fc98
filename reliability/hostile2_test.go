package reliability

// The second hostile-input pass (issue 31): what a remote can still make memd do, each case
// built from raw objects, with a snapshot of everything outside the work tree and the same
// input given to plain git.

import (
	"os"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// A remote replaces a folder that holds a new local file by a symlink. The sync never
// fails half-way: whatever it does, it does before HEAD moves or not at all, so no merge
// marker is left and the next run has nothing to finish. On main the first sync failed
// with "fsync … through a symbolic link" after HEAD moved, leaving a merge marker.
func TestHostileFolderBecomesLink(t *testing.T) {
	u := newUTWorld(t)
	u.write("areas/foo/old.html", "old\n")
	u.sync(0)
	// Upstream: areas/foo is now a link to a folder outside.
	root := u.remoteRoot()
	var areas []testutil.Entry
	for _, e := range u.obj.TreeOf(testutil.Git{Env: u.env}, "refs/heads/main:areas") {
		if e.Name != "foo" {
			areas = append(areas, e)
		}
	}
	areas = append(areas, testutil.TreeLink("foo", u.outside))
	bad := u.push("foo becomes a link", replaceEntries(root, testutil.TreeDir("areas", areas...))...)
	// Locally: a new file in the folder, not yet committed.
	u.write("areas/foo/new.html", "new local work\n")
	before := u.outsideSnapshot()
	headBefore := u.head()
	out, code := u.memd("sync", "--config", u.config, "--repo", u.repo)
	t.Logf("memd sync: exit %d\n%s", code, out)
	if strings.Contains(out, "through a symbolic link") {
		t.Fatalf("the sync failed half-way:\n%s", out)
	}
	if m := u.conflictMarkers(); len(m) > 0 {
		t.Fatalf("a merge marker was left: %v\n%s", m, out)
	}
	if _, err := os.Stat(u.path(".git/memd/merge-in-progress")); err == nil {
		t.Fatalf("a merge marker was left\n%s", out)
	}
	if code != 0 && u.head() != headBefore && !u.isAncestor(u.repo, headBefore, "HEAD") {
		t.Fatalf("HEAD moved off the local history")
	}
	if d := utDiff(before, u.outsideSnapshot()); d != "" {
		t.Fatalf("memd sync changed things outside the work tree:\n%s", d)
	}
	// Nothing is lost: the local file is committed (a conflict copy beside the link).
	if got, err := u.gitRun(u.repo, nil, "grep", "-l", "new local work", "HEAD"); err != nil || strings.TrimSpace(got) == "" {
		t.Fatalf("the local file is in no commit: %v %s", err, out)
	}
	if b, err := os.ReadFile(u.outside + "/victim.html"); err != nil || string(b) != "victim\n" {
		t.Fatalf("victim changed: %q %v", b, err)
	}
	// A second sync has nothing to finish.
	if out2 := u.sync(0); strings.Contains(out2, "finish") || strings.Contains(out2, "merged") {
		t.Errorf("the second sync had work left over:\n%s", out2)
	}
	// Plain git, the same untracked file in the same folder: `git pull` refuses to move.
	u.write("../gitclone/areas/foo/new.html", "new local work\n")
	refused, gout := u.gitPull()
	t.Logf("git pull of %s over an untracked file in the folder: refused=%v %s", bad[:12], refused, firstLines(gout, 3))
}
