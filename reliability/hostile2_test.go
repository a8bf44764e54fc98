package reliability

// The second hostile-input pass (issue 31): what a remote can still make memd do, each case
// built from raw objects, with a snapshot of everything outside the work tree and the same
// input given to plain git.

import (
	"io/fs"
	"os"
	"path/filepath"
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

// A committed memory.jsonl that is a symlink to a file outside: sleep reads tracked files
// by the rule it writes them (internal/safefs: never through a link), so it refuses naming
// the path and prints nothing from the outside file. On main it read through the link and
// printed a note id from the outside file before refusing to write.
func TestHostileSleepReadsNoLedgerLink(t *testing.T) {
	u := newULWorld(t, false)
	outsideLedger := filepath.Join(u.outside, "ledger.jsonl")
	must(t, os.WriteFile(outsideLedger, []byte(`{"id":"OUTSIDE-NOTE-7f3a","type":"note","role":"general","text":"private","createdAt":"2020-01-01T10:00:00.000Z","lifecycle":{"mode":"read-count","remainingReads":0}}`+"\n"), 0o600))
	_ = os.Remove(filepath.Join(u.attacker, "memory.jsonl"))
	must(t, os.Symlink("../outside/ledger.jsonl", filepath.Join(u.attacker, "memory.jsonl")))
	u.push("ledger lives elsewhere")
	if out, code := u.sync(); code != 0 {
		t.Fatalf("memd sync of the link commit: exit %d\n%s", code, out)
	}
	if fi, err := os.Lstat(u.path("memory.jsonl")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("memory.jsonl was not checked out as a link: %v %v", fi, err)
	}
	head := u.head()
	before := u.snapshot()
	out, code := u.memd("sleep", "--now", sleepNow, "--config", u.config, "--repo", u.repo)
	t.Logf("memd sleep: exit %d\n%s", code, out)
	if strings.Contains(out, "OUTSIDE-NOTE") || strings.Contains(out, "private") {
		t.Fatalf("sleep printed what the outside file holds:\n%s", out)
	}
	if !strings.Contains(out, "memory.jsonl") || !strings.Contains(out, "symbolic link") {
		t.Fatalf("sleep does not name memory.jsonl and the link:\n%s", out)
	}
	var problems []string
	u.expectUnchanged(before, "memd sleep over a linked ledger", &problems)
	if len(problems) > 0 {
		t.Fatal(strings.Join(problems, "\n"))
	}
	if b, _ := os.ReadFile(outsideLedger); !strings.Contains(string(b), "OUTSIDE-NOTE-7f3a") {
		t.Fatalf("the outside file changed: %q", b)
	}
	if u.git("show", "-s", "--format=%H", "HEAD") != head && u.gitLinkChanged(head) {
		t.Fatal("sleep committed through the link")
	}
	// Plain git: the link is a link; `git show HEAD:memory.jsonl` is its target, not the file.
	if got := u.git("show", "HEAD:memory.jsonl"); got != "../outside/ledger.jsonl" {
		t.Logf("git show HEAD:memory.jsonl = %q", got)
	}
}

// gitLinkChanged reports whether memory.jsonl's blob differs between since and HEAD.
func (u *ulWorld) gitLinkChanged(since string) bool {
	out, err := u.gitRun(u.repo, nil, "diff", "--name-only", since, "HEAD", "--", "memory.jsonl")
	return err != nil || strings.TrimSpace(out) != ""
}
