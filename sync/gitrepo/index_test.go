package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitstore"
)

func TestIndexFollowsCommitsInBackground(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	testutil.WriteFile(t, dir, "areas/b.html", "b")
	mustCommit(t, r, "a.html", "areas")
	// The commit schedules a refresh by itself; wait for git to agree.
	testutil.WaitFor(t, "background index refresh", 10*time.Second, func() bool {
		return testutil.RunGit(t, dir, "status", "--porcelain", "-uall") == ""
	}, nil)
	r.WaitIndexRefresh()
	// Several commits in a row: each refresh is incremental, and the
	// result still matches HEAD exactly.
	for i := 0; i < 5; i++ {
		testutil.WriteFile(t, dir, "areas/b.html", strings.Repeat("b", i+2))
		testutil.WriteFile(t, dir, "n/new"+string(rune('0'+i))+".html", "n")
		mustCommit(t, r, "areas/b.html", "n")
	}
	if err := os.Remove(filepath.Join(dir, "a.html")); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, r, "a.html")
	r.WaitIndexRefresh()
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("status after incremental refreshes:\n%s", out)
	}
	if ls := testutil.RunGit(t, dir, "ls-files"); strings.Contains(ls, "a.html\n") && !strings.Contains(ls, "b.html") {
		t.Fatalf("ls-files %q", ls)
	}
	// Index entries carry stat data: git needs no racy re-read for them
	// and diff-files (stat-only compare) reports nothing.
	if out := testutil.RunGit(t, dir, "diff-files", "--name-only"); out != "" {
		t.Fatalf("diff-files: %q", out)
	}
}

func TestIndexShowsUncommittedEdits(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	testutil.WriteFile(t, dir, "gone.html", "g")
	mustCommit(t, r, ".")
	// Edits memd has not committed yet must stay visible to git after a
	// (full) refresh: the index names HEAD's blobs, not the work tree's.
	testutil.WriteFile(t, dir, "a.html", "edited but not committed")
	os.Remove(filepath.Join(dir, "gone.html"))
	os.Remove(filepath.Join(dir, ".git/index")) // force a full rebuild
	if err := r.RefreshIndex(); err != nil {
		t.Fatal(err)
	}
	out := testutil.RunGit(t, dir, "status", "--porcelain")
	if !strings.Contains(out, " M a.html") || !strings.Contains(out, " D gone.html") {
		t.Fatalf("status should show the edit and deletion:\n%s", out)
	}
	if strings.Contains(out, "M  ") || strings.Contains(out, "D  ") {
		t.Fatalf("nothing should be staged:\n%s", out)
	}
}

func TestIndexAfterOutsideCommitFullRefresh(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	mustCommit(t, r, "a.html")
	r.WaitIndexRefresh()
	// git itself commits (and rewrites the index); then memd commits.
	testutil.WriteFile(t, dir, "g.md", "git")
	testutil.RunGit(t, dir, "add", "g.md")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "by git")
	testutil.WriteFile(t, dir, "m.html", "memd")
	mustCommit(t, r, "m.html")
	r.WaitIndexRefresh()
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("status:\n%s", out)
	}
}

func TestIndexLockHeldBacksOff(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	mustCommit(t, r, "a.html")
	r.WaitIndexRefresh()
	r.idx.mu.Lock()
	r.idx.closed = true // no background refresh between the commit and the lock below
	r.idx.mu.Unlock()
	testutil.WriteFile(t, dir, "b.html", "b")
	mustCommit(t, r, "b.html")
	r.idx.mu.Lock()
	r.idx.closed = false
	r.idx.mu.Unlock()
	lock := filepath.Join(dir, ".git/index.lock")
	if err := os.WriteFile(lock, []byte("someone"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.RefreshIndex(); !errors.Is(err, gitstore.ErrLocked) {
		t.Fatalf("RefreshIndex with held lock: %v", err)
	}
	if b, err := os.ReadFile(lock); err != nil || string(b) != "someone" {
		t.Fatal("a held index.lock was touched")
	}
	// docs/ARCHITECTURE.md §11: a live index.lock memd did not take is a git at work, which a commit waits
	// out (passingWait); this one has no git behind it, so once it is indexLockMinAge old it
	// is a killed process's and the commit goes through (its ref, not the index).
	testutil.WriteFile(t, dir, "c.html", "c")
	t0 := time.Now()
	if _, err := r.CommitPaths([]string{"c.html"}); err != nil {
		t.Fatalf("commit under a dead index.lock: %v", err)
	}
	if live, canSee := r.liveGitProcess(); canSee && !live && time.Since(t0) < indexLockMinAge/2 {
		t.Fatalf("the commit did not wait for the young index.lock (%s)", time.Since(t0))
	}
	// The background refresher retries; once the holder lets go (or the lock, with no git
	// behind it, is judged a killed process's and cleared) the index catches up.
	r.ScheduleIndexRefresh()
	if err := os.Remove(lock); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "index to catch up after the lock is released", 20*time.Second, func() bool {
		return testutil.RunGit(t, dir, "status", "--porcelain", "-uall") == ""
	}, nil)
}

// TestIndexLockHeldOnlyForTheRename: by the time the refresh holds .git/index.lock, the
// new index is complete and durable in its temp file (every entry of HEAD encoded) and
// the work tree has been read: the lock spans a stat and a rename, so a user's own
// `git commit` in the repo does not find it held for the length of a refresh.
func TestIndexLockHeldOnlyForTheRename(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	for i := 0; i < 50; i++ {
		testutil.WriteFile(t, dir, fmt.Sprintf("areas/f%02d.html", i), strings.Repeat("x", i))
	}
	mustCommit(t, r, "areas")
	r.WaitIndexRefresh()
	calls := 0
	r.setCrashHooks(&crashHooks{indexLockHeld: func(tmp string) {
		calls++
		idx, _ := readIndexFile(tmp)
		if idx == nil || len(idx.Entries) != 51 {
			t.Errorf("under index.lock the temp index is not complete: %v", idx)
		}
		if _, err := os.Stat(filepath.Join(dir, ".git", "index.lock")); err != nil {
			t.Errorf("hook ran without the lock held: %v", err)
		}
	}})
	defer r.setCrashHooks(nil)
	testutil.WriteFile(t, dir, "areas/new.html", "new")
	mustCommit(t, r, "areas/new.html")
	r.WaitIndexRefresh()
	r.setCrashHooks(nil)
	if calls != 1 {
		t.Errorf("index written %d times, want 1", calls)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "index.lock")); !os.IsNotExist(err) {
		t.Errorf("index.lock left behind: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".git", "memd", "index-*.tmp")); len(m) > 0 {
		t.Errorf("temp index files left behind: %v", m)
	}
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Errorf("git status after the refresh:\n%s", out)
	}
	// A user's git commit right after works (nothing of memd's is held).
	testutil.WriteFile(t, dir, "areas/user.html", "user")
	testutil.RunGit(t, dir, "add", "areas/user.html")
	testutil.RunGit(t, dir, "-c", "user.name=u", "-c", "user.email=u@example.invalid", "commit", "-q", "-m", "user")
}

// TestIndexRefreshRefusesASymlinkedStateDir: .git/memd a symlink to a directory outside the
// repo; the refresh's temp file is made through statedir, so it is refused there and nothing
// is created in the directory the link points at (os.CreateTemp followed the link).
func TestIndexRefreshRefusesASymlinkedStateDir(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	mustCommit(t, r, "a.html")
	r.WaitIndexRefresh()
	outside := t.TempDir()
	state := filepath.Join(dir, ".git", "memd")
	if err := os.RemoveAll(state); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, state); err != nil {
		t.Fatal(err)
	}
	if err := r.RefreshIndex(); err == nil {
		t.Fatal("RefreshIndex through a symlinked .git/memd: no error")
	} else if !strings.Contains(err.Error(), state) {
		t.Fatalf("error does not name the state dir %s: %v", state, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("the refresh wrote through the symlink: %v", ents)
	}
}
