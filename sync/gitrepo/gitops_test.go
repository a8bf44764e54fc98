package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestStandAsideReasons: each state another writer leaves in .git, made by hand where git
// makes it, gives its reason; the repo as memd left it gives none.
func TestStandAsideReasons(t *testing.T) {
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "a.html", "a\n")
	r := openTest(t, dir, testOptions())
	mustCommit(t, r, "a.html")
	must(t, r.RefreshIndex())
	if a := r.StandAside(); a.Reason != "" {
		t.Fatalf("fresh repo: %+v", a)
	}
	gitDir := filepath.Join(dir, ".git")
	for _, c := range []struct{ name, want string }{
		{"MERGE_HEAD", "a merge is in progress"},
		{"CHERRY_PICK_HEAD", "a cherry-pick is in progress"},
		{"REVERT_HEAD", "a revert is in progress"},
		{"BISECT_LOG", "a bisect is in progress"},
		{"rebase-merge/", "a rebase is in progress"},
		{"rebase-apply/", "a rebase (or git am) is in progress"},
		{"sequencer/", "a cherry-pick or revert is in progress"},
		{"index.lock", "git is writing the index (.git/index.lock)"},
	} {
		p := filepath.Join(gitDir, strings.TrimSuffix(c.name, "/"))
		if strings.HasSuffix(c.name, "/") {
			must(t, os.Mkdir(p, 0o755))
		} else {
			must(t, os.WriteFile(p, []byte("0000000000000000000000000000000000000000\n"), 0o644))
		}
		if a := r.StandAside(); a.Reason != c.want {
			t.Errorf("%s: reason %q, want %q", c.name, a.Reason, c.want)
		}
		must(t, os.RemoveAll(p))
	}
	// A finished rebase leaves REBASE_HEAD behind (git's own status ignores it).
	must(t, os.WriteFile(filepath.Join(gitDir, "REBASE_HEAD"), []byte("x\n"), 0o644))
	if a := r.StandAside(); a.Reason != "" {
		t.Errorf("REBASE_HEAD alone: %+v", a)
	}
	// An index.lock left by a killed process (old, no git running) holds nothing up.
	lock := filepath.Join(gitDir, "index.lock")
	must(t, os.WriteFile(lock, nil, 0o644))
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(lock, old, old))
	if live, canSee := r.liveGitProcess(); canSee && !live {
		if a := r.StandAside(); a.Reason != "" {
			t.Errorf("stale index.lock: %+v", a)
		}
	}
	must(t, os.Remove(lock))

	testutil.RunGit(t, dir, "checkout", "-q", "-b", "sleep/2026-12-01")
	if a := r.StandAside(); a.Reason != "HEAD is on sleep/2026-12-01, not main" || a.Brief != "HEAD on sleep/2026-12-01" {
		t.Errorf("other branch: %+v", a)
	}
	testutil.RunGit(t, dir, "checkout", "-q", "--detach")
	if a := r.StandAside(); !strings.HasPrefix(a.Reason, "HEAD is detached at ") {
		t.Errorf("detached: %+v", a)
	}
}

// TestCommitStandsAside: a commit while HEAD is on another branch commits nothing, and one
// whose branch switch comes between its objects and its ref move (the compare-and-set)
// leaves main where it was.
func TestCommitStandsAside(t *testing.T) {
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "a.html", "a\n")
	r := openTest(t, dir, testOptions())
	mustCommit(t, r, "a.html")
	must(t, r.RefreshIndex())
	main := testutil.RunGit(t, dir, "rev-parse", "main")

	testutil.RunGit(t, dir, "checkout", "-q", "-b", "other")
	testutil.WriteFile(t, dir, "b.html", "b\n")
	_, err := r.CommitPaths([]string{"b.html"})
	if a, ok := AsideOf(err); !errors.Is(err, ErrStandAside) || !ok || a.Reason != "HEAD is on other, not main" {
		t.Fatalf("commit on other: %v", err)
	}
	testutil.RunGit(t, dir, "checkout", "-q", "main")

	r.testBeforeRef = func() { testutil.RunGit(t, dir, "checkout", "-q", "other") }
	_, err = r.CommitPaths([]string{"b.html"})
	r.testBeforeRef = nil
	if !errors.Is(err, ErrStandAside) {
		t.Fatalf("branch switched before the ref move: %v", err)
	}
	if got := testutil.RunGit(t, dir, "rev-parse", "main"); got != main {
		t.Fatalf("main moved: %s -> %s", main, got)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStandAside: the gate's cost, paid two or three times per commit and sync (on
// Linux mostly the /proc scan for a running git).
func BenchmarkStandAside(b *testing.B) {
	dir := newGitDir(b)
	r := openTest(b, dir, testOptions())
	for b.Loop() {
		if a := r.StandAside(); a.Reason != "" {
			b.Fatal(a.Reason)
		}
	}
}
