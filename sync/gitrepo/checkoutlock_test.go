package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// The stash race (issue 25): memd's checkout holds .git/index.lock from its verify to its
// last rename (checkoutlock.go), so a git that needs the index between two of its steps
// finds the lock, and a git that holds it first makes memd stand aside.

// indexLockWorld: A has a user's uncommitted edit of notes/b.html; B pushed a change of
// notes/a.html that A's next sync checks out.
func indexLockWorld(t *testing.T) *syncWorld {
	t.Helper()
	w := newSyncWorld(t, map[string]string{"notes/a.html": "a\n", "notes/b.html": "b\n"})
	testutil.WriteFile(t, w.bDir, "notes/a.html", "a from B\n")
	mustCommit(t, w.b, "notes/a.html")
	mustSync(t, w.b)
	return w
}

func readRel(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A `git stash` that runs while memd's checkout writes the work tree fails on index.lock
// before it changes anything (on main it saved and reset the user's edit under the
// checkout); once the sync is done the stash and its pop go through and nothing is lost.
func TestCheckoutHoldsIndexLockAgainstGitStash(t *testing.T) {
	w := indexLockWorld(t)
	testutil.WriteFile(t, w.aDir, "notes/b.html", "b, the user's edit\n")
	var held bool
	var stashOut string
	var stashErr error
	w.a.setCrashHooks(&crashHooks{afterRefMove: func() error {
		_, err := os.Lstat(filepath.Join(w.aDir, ".git", "index.lock"))
		held = err == nil
		cmd := exec.Command("git", "stash")
		cmd.Dir, cmd.Env = w.aDir, testutil.GitEnv()
		out, err := cmd.CombinedOutput()
		stashOut, stashErr = string(out), err
		return nil
	}})
	mustSync(t, w.a)
	w.a.setCrashHooks(nil)
	if !held {
		t.Fatal("index.lock not held while the checkout moved the branch and wrote the work tree")
	}
	if stashErr == nil {
		t.Fatalf("git stash during the checkout went through (output %q); want it refused on index.lock", stashOut)
	}
	w.a.WaitIndexRefresh() // the refresh after the checkout takes the lock for its rename
	if _, err := os.Lstat(filepath.Join(w.aDir, ".git", "index.lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index.lock left after the checkout: %v", err)
	}
	if got := readRel(t, w.aDir, "notes/a.html"); got != "a from B\n" {
		t.Fatalf("notes/a.html = %q, want B's change", got)
	}
	if got := readRel(t, w.aDir, "notes/b.html"); got != "b, the user's edit\n" {
		t.Fatalf("notes/b.html = %q: the user's edit was stashed away under the checkout", got)
	}
	if got := testutil.RunGit(t, w.aDir, "stash", "list"); got != "" {
		t.Fatalf("stash list %q, want empty", got)
	}
	testutil.RunGit(t, w.aDir, "stash")
	testutil.RunGit(t, w.aDir, "stash", "pop")
	if got := readRel(t, w.aDir, "notes/b.html"); got != "b, the user's edit\n" {
		t.Fatalf("after stash and pop notes/b.html = %q", got)
	}
	fsck(t, w.aDir)
}

// A git that holds index.lock when memd's checkout wants it makes memd stand aside
// (passing: it tries again), HEAD and the work tree as they were and no temp left; once
// git drops the lock the same sync goes through.
func TestCheckoutStandsAsideForGitIndexLock(t *testing.T) {
	w := indexLockWorld(t)
	head := revParse(t, w.aDir, "HEAD")
	lock := filepath.Join(w.aDir, ".git", "index.lock")
	var took bool
	w.a.setCrashHooks(&crashHooks{beforeVerify: func() {
		if !took { // a git takes the lock between memd's prepare and its checkout
			took = os.WriteFile(lock, nil, 0o644) == nil
		}
	}})
	t0 := time.Now()
	_, err := w.a.Sync(t.Context(), pushOpts())
	w.a.setCrashHooks(nil)
	if !took {
		t.Fatal("the hook did not take index.lock")
	}
	a, ok := AsideOf(err)
	if !errors.Is(err, ErrStandAside) || !ok || !a.Passing {
		t.Fatalf("Sync with git holding index.lock: %v; want a passing stand-aside", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("stood aside after %v", d)
	}
	if got := revParse(t, w.aDir, "HEAD"); got != head {
		t.Fatal("HEAD moved while git held index.lock")
	}
	if got := readRel(t, w.aDir, "notes/a.html"); got != "a\n" {
		t.Fatalf("notes/a.html = %q written while git held index.lock", got)
	}
	if _, err := os.Lstat(lock); err != nil {
		t.Fatalf("memd removed git's live index.lock: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(w.aDir, "notes", ".memd-*.tmp")); len(m) > 0 {
		t.Fatalf("temps left: %q", m)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	mustSync(t, w.a)
	if got := readRel(t, w.aDir, "notes/a.html"); got != "a from B\n" {
		t.Fatalf("notes/a.html = %q after git dropped the lock", got)
	}
	w.a.WaitIndexRefresh()
	statusClean(t, w.a)
}

// A checkout memd was killed in holds index.lock still; the next start clears it (no
// process owns it, older than indexLockMinAge) and finishes the checkout.
func TestInterruptedCheckoutClearsItsStaleIndexLock(t *testing.T) {
	w := indexLockWorld(t)
	w.a.setCrashHooks(&crashHooks{afterRefMove: func() error { return errSimulatedCrash }})
	_, err := w.a.Sync(t.Context(), pushOpts())
	w.a.setCrashHooks(nil)
	if !errors.Is(err, errSimulatedCrash) {
		t.Fatalf("Sync err = %v", err)
	}
	lock := filepath.Join(w.aDir, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil { // as the killed checkout left it
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * indexLockMinAge)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	a2 := openTest(t, w.aDir, hostOptions("hosta"))
	done, err := a2.FinishInterruptedMerge()
	if err != nil || !done {
		t.Fatalf("FinishInterruptedMerge = %v, %v", done, err)
	}
	if _, err := os.Lstat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale index.lock not cleared: %v", err)
	}
	if got := readRel(t, w.aDir, "notes/a.html"); got != "a from B\n" {
		t.Fatalf("notes/a.html = %q, want the finished checkout's", got)
	}
	a2.WaitIndexRefresh()
	statusClean(t, a2)
}

// holdRefresher keeps memd's background index refresher from doing any work until the test
// ends (as on a loaded machine, where it runs late): whatever the index says right after a
// sync is what the checkout itself wrote.
func holdRefresher(t *testing.T, r *Repo) {
	t.Helper()
	r.WaitIndexRefresh()
	gate := make(chan struct{})
	r.testDuringRefresh = func() { <-gate }
	t.Cleanup(func() {
		close(gate)
		r.WaitIndexRefresh()
	})
}

// indexMatchesHead: `git status` is clean and the index is HEAD's tree, with no wait and no
// refresh of memd's.
func indexMatchesHead(t *testing.T, dir, after string) {
	t.Helper()
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("after %s, git status:\n%s", after, out)
	}
	cmd := exec.Command("git", "diff", "--cached", "--quiet", "HEAD")
	cmd.Dir, cmd.Env = dir, testutil.GitEnv()
	if err := cmd.Run(); err != nil {
		t.Fatalf("after %s, the index is not HEAD's tree (git diff --cached HEAD: %v)", after, err)
	}
}

// memd's checkout writes the new index itself, under the index.lock it holds, as git's
// checkout and merge do: right after a sync that fast-forwards and one that merges, the
// index is HEAD's with the refresher held back. Before, HEAD moved first and the index
// followed later (the refresher), and a git in between worked from the old head's index.
func TestCheckoutWritesTheIndex(t *testing.T) {
	w := indexLockWorld(t)
	w.a.WaitIndexRefresh()
	holdRefresher(t, w.a)
	mustSync(t, w.a) // a fast-forward to B's change of notes/a.html
	if got := readRel(t, w.aDir, "notes/a.html"); got != "a from B\n" {
		t.Fatalf("notes/a.html = %q, want B's change", got)
	}
	indexMatchesHead(t, w.aDir, "a fast-forward")

	testutil.WriteFile(t, w.bDir, "notes/c.html", "c from B\n")
	mustCommit(t, w.b, "notes/c.html")
	mustSync(t, w.b)
	testutil.WriteFile(t, w.aDir, "notes/b.html", "b from A\n")
	mustCommit(t, w.a, "notes/b.html")
	mustSync(t, w.a) // a merge: A's commit and B's
	if n := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-list", "--count", "--merges", "HEAD")); n != "1" {
		t.Fatalf("%s merge commits, want 1", n)
	}
	indexMatchesHead(t, w.aDir, "a merge")
	fsck(t, w.aDir)
}

// A person's `git add` and `git commit` right after memd's checkout, round after round (a
// fast-forward, then merges with the person's commits), never drops or reverts a file memd
// checked out: the commit is made from an index that already is the new HEAD's. Before, the
// index lagged until the refresher caught up (at a person's speed, not held back: 4 runs in
// 5 failed) and the person's commit put back the old content of the file B changed and
// dropped B's new one.
func TestGitCommitRightAfterCheckoutKeepsMemdsFiles(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.html": "a\n"})
	w.a.WaitIndexRefresh()
	want := map[string]string{"notes/a.html": "a\n"}
	for i := range 4 {
		nw := fmt.Sprintf("notes/b%d.html", i)
		testutil.WriteFile(t, w.bDir, nw, nw+" from B\n")
		testutil.WriteFile(t, w.bDir, "notes/a.html", fmt.Sprintf("a, round %d\n", i))
		mustCommit(t, w.b, nw, "notes/a.html")
		mustSync(t, w.b)
		want[nw], want["notes/a.html"] = nw+" from B\n", fmt.Sprintf("a, round %d\n", i)

		mustSync(t, w.a) // round 0 fast-forwards; later rounds merge the person's commit
		mine := fmt.Sprintf("notes/user%d.html", i)
		testutil.WriteFile(t, w.aDir, mine, "the user's\n")
		testutil.RunGit(t, w.aDir, "add", mine)
		testutil.RunGit(t, w.aDir, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "the user's "+mine)
		want[mine] = "the user's\n"
		for p, c := range want {
			if got := testutil.RunGit(t, w.aDir, "show", "HEAD:"+p); got != c {
				t.Fatalf("round %d: the person's commit has %s = %q, want %q (made from an index memd's checkout left behind)", i, p, got, c)
			}
		}
	}
	fsck(t, w.aDir)
}

// A checkout after a person's git rewrote the index (`git add` of a file of theirs) splices
// memd's paths into git's file rather than walking the whole tree under index.lock: right
// after the sync B's change is in the index and the person's staged file still staged, as
// git's checkout keeps it. The refresher then walks the tree off the lock, as before (memd
// owns the index: the staging goes, the file stays).
func TestCheckoutSplicesIntoAnIndexGitWrote(t *testing.T) {
	w := indexLockWorld(t)
	if err := w.a.RefreshIndex(); err != nil { // memd's file, as the agent writes it at start
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.aDir, "notes/user.html", "the user's\n")
	testutil.RunGit(t, w.aDir, "add", "notes/user.html")
	gate := make(chan struct{})
	w.a.testDuringRefresh = func() { <-gate }
	mustSync(t, w.a)
	staged := testutil.RunGit(t, w.aDir, "diff", "--cached", "--name-status", "HEAD")
	status := testutil.RunGit(t, w.aDir, "status", "--porcelain", "-uall")
	close(gate)
	w.a.WaitIndexRefresh()
	w.a.testDuringRefresh = nil
	if staged != "A\tnotes/user.html\n" || status != "A  notes/user.html\n" {
		t.Fatalf("right after the checkout: staged %q, status %q; want only the person's file staged", staged, status)
	}
	if got := testutil.RunGit(t, w.aDir, "status", "--porcelain", "-uall"); got != "?? notes/user.html\n" {
		t.Fatalf("after the refresher: status %q, want the person's file untracked (memd's index, HEAD's tree)", got)
	}
}

// A git command that starts in the repo while a sync fetches and plans (a daemon's
// reconcile `git status` beside a one-shot `memd sync`, a person's git) and ends within a
// moment is waited out before the merge, not stood aside for: the sync goes through. On
// the old code it stood aside ("a git command is running in the repo"), the CI flake of
// e2e's TestOneShotSleepAndSyncShowInDaemon.
func TestSyncWaitsOutAGitStartedDuringTheFetch(t *testing.T) {
	w := indexLockWorld(t)
	var git *exec.Cmd
	w.a.setCrashHooks(&crashHooks{afterPlan: func() {
		if git != nil {
			return
		}
		git = exec.Command("git", "-c", "alias.pause=!sleep 0.5", "pause")
		git.Dir = w.aDir
		if err := git.Start(); err != nil {
			t.Error(err)
			return
		}
		// Every git command writes the index; now it is a stranger's, written just now.
		now := time.Now()
		if err := os.Chtimes(filepath.Join(w.aDir, ".git", "index"), now, now); err != nil {
			t.Error(err)
		}
		if a := w.a.StandAside(); a != gitRunningAside {
			t.Errorf("with the git running StandAside = %+v, want %+v", a, gitRunningAside)
		}
	}})
	_, err := w.a.Sync(t.Context(), pushOpts())
	w.a.setCrashHooks(nil)
	if git == nil {
		t.Fatal("the hook did not run")
	}
	_ = git.Wait()
	if err != nil {
		t.Fatalf("Sync with a git passing in the repo: %v", err)
	}
	if got := readRel(t, w.aDir, "notes/a.html"); got != "a from B\n" {
		t.Fatalf("notes/a.html = %q, want B's change", got)
	}
}
