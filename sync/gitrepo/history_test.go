package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/commitmsg"
	"github.com/memd-dev/memd/internal/testutil"
)

// conflictRepo is a repo with areas/n/x.html committed as theirs and ours beside it as the
// conflict copy a merge makes, both committed.
func conflictRepo(t *testing.T) (*Repo, string) {
	t.Helper()
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/n/x.html", "<p>theirs</p>\n")
	testutil.WriteFile(t, dir, "areas/n/x.conflict-laptop-20261130T143135Z.html", "<p>ours</p>\n")
	mustCommit(t, r, "areas")
	return r, dir
}

func TestConflictsListAndBlobIDs(t *testing.T) {
	_, dir := conflictRepo(t)
	list, err := ListConflicts(dir, nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("ListConflicts = %v, %v; want one", list, err)
	}
	c := list[0]
	tree := lsTree(t, dir)
	if c.Path != "areas/n/x.html" || c.Machine != "laptop" || !c.At.Equal(time.Date(2026, 11, 30, 14, 31, 35, 0, time.UTC)) {
		t.Errorf("conflict = %+v", c)
	}
	// The blob ids are git's own for both versions.
	if "100644 "+c.Ours != tree[c.Copy] || "100644 "+c.Theirs != tree[c.Path] {
		t.Errorf("blob ids ours %s theirs %s, git has %q and %q", c.Ours, c.Theirs, tree[c.Copy], tree[c.Path])
	}
}

func TestResolveKeeps(t *testing.T) {
	for _, keep := range []string{KeepOurs, KeepTheirs, KeepBoth} {
		t.Run(keep, func(t *testing.T) {
			r, dir := conflictRepo(t)
			c, err := FindConflict(dir, "areas/n/x.html", nil)
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Resolve(c, keep)
			if err != nil {
				t.Fatal(err)
			}
			tree := lsTree(t, dir)
			if _, ok := tree[c.Copy]; ok {
				t.Errorf("the copy is still committed: %v", tree)
			}
			want := map[string]string{KeepOurs: "<p>ours</p>\n", KeepTheirs: "<p>theirs</p>\n", KeepBoth: "<p>theirs</p>\n"}[keep]
			if got := testutil.RunGit(t, dir, "show", "HEAD:areas/n/x.html"); got != want {
				t.Errorf("HEAD:areas/n/x.html = %q, want %q", got, want)
			}
			if keep == KeepBoth {
				if out.Kept != "areas/n/x-laptop.html" {
					t.Errorf("kept as %q", out.Kept)
				}
				if got := testutil.RunGit(t, dir, "show", "HEAD:"+out.Kept); got != "<p>ours</p>\n" {
					t.Errorf("kept copy = %q", got)
				}
			}
			msg := testutil.RunGit(t, dir, "log", "-1", "--format=%B")
			tr := commitmsg.Trailers(msg)
			if tr[TrailerAction] != "resolve" || tr[TrailerKeep] != keep || tr[TrailerHost] != "testhost" {
				t.Errorf("trailers %v of %q", tr, msg)
			}
			if _, err := FindConflict(dir, "areas/n/x.html", nil); !errors.Is(err, ErrNoConflict) {
				t.Errorf("after resolve FindConflict err = %v, want ErrNoConflict", err)
			}
			statusClean(t, r)
		})
	}
}

// A copy a writer edited after it was listed is not dropped.
func TestResolveRefusesChangedCopy(t *testing.T) {
	r, dir := conflictRepo(t)
	c, err := FindConflict(dir, c0, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, dir, c.Copy, "<p>ours, edited</p>\n")
	if _, err := r.Resolve(c, KeepTheirs); err == nil || !strings.Contains(err.Error(), "changed since") {
		t.Fatalf("Resolve err = %v, want the copy changed", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, c.Copy)); string(b) != "<p>ours, edited</p>\n" {
		t.Errorf("copy = %q", b)
	}
}

const c0 = "areas/n/x.html"

func TestFindConflictAmbiguous(t *testing.T) {
	r, dir := conflictRepo(t)
	testutil.WriteFile(t, dir, "areas/n/x.conflict-desk-20261130T150000Z.html", "<p>desk</p>\n")
	mustCommit(t, r, "areas")
	if _, err := FindConflict(dir, c0, nil); !errors.Is(err, ErrAmbiguousConflict) || !strings.Contains(err.Error(), "desk") {
		t.Fatalf("err = %v, want ambiguous naming both copies", err)
	}
	if _, err := FindConflict(dir, "areas/n/y.html", nil); !errors.Is(err, ErrNoConflict) {
		t.Fatalf("err = %v, want ErrNoConflict", err)
	}
}

// Log follows a rename made by git and an archive move, and restore brings the archived
// memory back under its name, then an older version with --at.
func TestLogFollowsMovesAndRestore(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/old.html", "<p>v1</p>\n")
	mustCommit(t, r, "areas")
	v1 := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD"))
	testutil.WriteFile(t, dir, "areas/old.html", "<p>v2</p>\n")
	mustCommit(t, r, "areas")
	// memd refreshes .git/index in the background after its commits: let it finish before
	// git's own commands write the index, or one overwrites the other.
	r.WaitIndexRefresh()
	testutil.RunGit(t, dir, "mv", "areas/old.html", "areas/new.html")
	testutil.RunGit(t, dir, "commit", "-qm", "rename")
	os.MkdirAll(filepath.Join(dir, "archive/2026/areas"), 0o755)
	testutil.RunGit(t, dir, "mv", "areas/new.html", "archive/2026/areas/new.html")
	testutil.RunGit(t, dir, "commit", "-qm", "archive")

	log, err := r.History().Log("archive/2026/areas/new.html")
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, e := range log {
		acts = append(acts, e.Action+":"+e.Path)
	}
	want := "archived:archive/2026/areas/new.html renamed:areas/new.html modified:areas/old.html added:areas/old.html"
	if got := strings.Join(acts, " "); got != want {
		t.Fatalf("log = %s\nwant  %s", got, want)
	}

	target, v, err := r.History().PlanRestore("areas/new.html", "")
	if err != nil || target != "areas/new.html" || string(v.Data) != "<p>v2</p>\n" {
		t.Fatalf("PlanRestore = %q %q %v", target, v.Data, err)
	}
	if _, err := r.History().Restore(target, v); err != nil {
		t.Fatal(err)
	}
	tree := lsTree(t, dir)
	if _, ok := tree["archive/2026/areas/new.html"]; ok {
		t.Errorf("archived twin still committed: %v", tree)
	}
	if got := testutil.RunGit(t, dir, "show", "HEAD:areas/new.html"); got != "<p>v2</p>\n" {
		t.Errorf("restored = %q", got)
	}
	// --at the first commit: the version it had then, under its old name, back under the new one.
	target, v, err = r.History().PlanRestore("areas/new.html", v1[:8])
	if err != nil || string(v.Data) != "<p>v1</p>\n" || v.Path != "areas/old.html" {
		t.Fatalf("PlanRestore --at = %q %q %q %v", target, v.Path, v.Data, err)
	}
	if _, err := r.History().Restore(target, v); err != nil {
		t.Fatal(err)
	}
	if got := testutil.RunGit(t, dir, "show", "HEAD:areas/new.html"); got != "<p>v1</p>\n" {
		t.Errorf("restored --at = %q", got)
	}
	if tr := commitmsg.Trailers(testutil.RunGit(t, dir, "log", "-1", "--format=%B")); tr[TrailerAction] != "restore" || tr[TrailerFrom] != v1 {
		t.Errorf("trailers %v", tr)
	}
	if _, _, err := r.History().PlanRestore("areas/new.html", ""); !errors.Is(err, ErrNothingToRestore) {
		t.Errorf("restore of a present file without --at: %v", err)
	}
	if _, _, err := r.History().PlanRestore("areas/new.html", "2001-01-01T00:00:00Z"); !errors.Is(err, ErrBadAt) {
		t.Errorf("--at before history: %v", err)
	}
	statusClean(t, r)
	fsck(t, dir)
}

func TestRestoreDeleted(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "resources/a.html", "<p>a</p>\n")
	mustCommit(t, r, "resources")
	os.Remove(filepath.Join(dir, "resources/a.html"))
	mustCommit(t, r, "resources/a.html")
	target, v, err := r.History().PlanRestore("resources/a.html", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.History().Restore(target, v); err != nil {
		t.Fatal(err)
	}
	if got := testutil.RunGit(t, dir, "show", "HEAD:resources/a.html"); got != "<p>a</p>\n" {
		t.Errorf("restored = %q", got)
	}
	if _, err := r.History().Log("resources/none.html"); !errors.Is(err, ErrNoHistory) {
		t.Errorf("log of a path never there: %v", err)
	}
}
