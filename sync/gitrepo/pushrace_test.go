package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

// racingPeer makes A commit and push a new file every time B's sync finishes the local
// part of a round (LocalWork), up to n times: B's push that follows finds the remote moved.
func racingPeer(t *testing.T, w *syncWorld, n int, locked *int) RemoteOptions {
	ro := pushOpts()
	ro.PushRetryJitter = time.Millisecond
	pushes := 0
	ro.LocalWork = func(fn func() error) error {
		*locked++
		err := fn()
		if pushes < n {
			pushes++
			testutil.WriteFile(t, w.aDir, fmt.Sprintf("areas/race-%d.html", pushes), "race\n")
			mustCommit(t, w.a, "areas")
			mustSync(t, w.a)
		}
		return err
	}
	return ro
}

// TestPushRaceRetriesAtOnce: a push rejected because another machine pushed first is
// retried in the same Sync after a fetch and a merge, and succeeds; the local work of
// each round ran inside LocalWork (the writer lock), the fetches and pushes outside. The
// remote is a path here, whose ref file shows the move before any push: the two lost
// rounds make no push attempt (pushExpect), the third pushes.
func TestPushRaceRetriesAtOnce(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.bDir, "areas/b.html", "b\n")
	mustCommit(t, w.b, "areas")
	locked := 0
	res, err := w.b.Sync(t.Context(), racingPeer(t, w, 2, &locked))
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !res.Pushed || res.PushAttempts != 1 || res.Rounds != 3 || locked != 3 {
		t.Errorf("Pushed %v, PushAttempts %d, Rounds %d, locked rounds %d; want true, 1, 3, 3", res.Pushed, res.PushAttempts, res.Rounds, locked)
	}
	if got := testutil.RunGit(t, w.bare, "rev-parse", "main"); got != testutil.RunGit(t, w.bDir, "rev-parse", "HEAD") {
		t.Errorf("remote main %s is not B's HEAD", got)
	}
	for _, p := range []string{"areas/b.html", "areas/race-1.html", "areas/race-2.html"} {
		testutil.RunGit(t, w.bare, "cat-file", "-e", "main:"+p)
	}
}

// TestPushRaceLostEveryRoundIsNotOffline: a remote that answers but where another machine
// wins every round is contention: ErrPushRejected, never ErrOffline. (A file remote: every
// round sees the move in its ref file, so no push is attempted.)
func TestPushRaceLostEveryRoundIsNotOffline(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.bDir, "areas/b.html", "b\n")
	mustCommit(t, w.b, "areas")
	locked := 0
	res, err := w.b.Sync(t.Context(), racingPeer(t, w, MaxSyncAttempts, &locked))
	if !errors.Is(err, gitremote.ErrPushRejected) || errors.Is(err, gitremote.ErrOffline) || errors.Is(err, gitremote.ErrAuth) {
		t.Fatalf("Sync err = %v, want gitremote.ErrPushRejected only", err)
	}
	if res.PushAttempts != 0 || res.Rounds != MaxSyncAttempts || res.Ahead == 0 {
		t.Errorf("PushAttempts %d (want 0), rounds %d (want %d), ahead %d (want > 0)", res.PushAttempts, res.Rounds, MaxSyncAttempts, res.Ahead)
	}
	// The next sync, unraced, pushes everything.
	mustSync(t, w.b)
	testutil.RunGit(t, w.bare, "cat-file", "-e", "main:areas/b.html")
}

// TestRaceRejectionKinds: only "someone pushed first" is contention; a refusal that
// retrying cannot change (a hook, a full disk) is not, and neither is an outage.
func TestRaceRejectionKinds(t *testing.T) {
	for msg, want := range map[string]bool{
		"non-fast-forward update: refs/heads/main":                                                         true,
		"refs/heads/main: cannot lock ref 'refs/heads/main': is at 1234 but expected 5678":                 true,
		"cannot lock ref 'refs/heads/main': Unable to create '/r.git/refs/heads/main.lock': File exists.":  true,
		"command error on refs/heads/main: failed to update ref":                                           true,
		"refs/heads/main: pre-receive hook declined":                                                       false,
		"cannot lock ref 'refs/heads/main': Unable to create '/r.git/refs/heads/main.lock': No space left": false,
		"unpack-objects abnormal exit":                                                                     false,
	} {
		err := gitremote.Classify("push", "origin", "", errors.New(msg))
		if got := errors.Is(err, gitremote.ErrPushRejected); got != want {
			t.Errorf("%q: gitremote.ErrPushRejected = %v, want %v", msg, got, want)
		}
		if errors.Is(err, gitremote.ErrOffline) {
			t.Errorf("%q: classified offline", msg)
		}
	}
}

// TestSyncLockCoversLocalWorkOnly: the writer lock (LocalWork) is taken after the fetch
// and released before the push, and the merge computation, the checkout's temp files and
// the fsyncs that make the checkout durable (the marker's included) happen outside it:
// while it is held only the verify, the ref move and the renames run, so the marker
// stands before it is taken and when it is released, and is gone when Sync returns. The
// new index is written after it too, with .git/index.lock held from the checkout until
// then (durable.go): the lock is still there when the writer lock goes, and Sync returns
// with it gone and the index HEAD's.
func TestSyncLockCoversLocalWorkOnly(t *testing.T) {
	w := divergedWorld(t)
	ro := pushOpts()
	calls := 0
	ro.LocalWork = func(fn func() error) error {
		calls++
		tracking := testutil.RunGit(t, w.bDir, "rev-parse", "refs/remotes/origin/main")
		if tracking != testutil.RunGit(t, w.bare, "rev-parse", "main") {
			t.Error("the lock was taken before the fetch")
		}
		// The merge commit exists already (planned before the lock), and so does the
		// marker naming the move (written while planning).
		if _, ok, _, _ := readMarker(w.b); !ok {
			t.Error("the merge marker was not written before the lock")
		}
		before := testutil.RunGit(t, w.bDir, "count-objects")
		err := fn()
		if after := testutil.RunGit(t, w.bDir, "count-objects"); after != before {
			t.Errorf("objects written under the lock: %s -> %s", before, after)
		}
		if _, ok, _, _ := readMarker(w.b); !ok {
			t.Error("the checkout's durability tail ran under the lock (marker gone)")
		}
		if _, err := os.Lstat(filepath.Join(w.bDir, ".git", "index.lock")); err != nil {
			t.Errorf("index.lock not held when the writer lock goes (the index written under it?): %v", err)
		}
		if testutil.RunGit(t, w.bare, "rev-parse", "main") == testutil.RunGit(t, w.bDir, "rev-parse", "HEAD") {
			t.Error("pushed under the lock")
		}
		return err
	}
	res, err := w.b.Sync(t.Context(), ro)
	if err != nil || !res.Merged || !res.Pushed || calls != 1 {
		t.Fatalf("Sync: %v, %+v, %d lock calls", err, res, calls)
	}
	if _, ok, _, _ := readMarker(w.b); ok {
		t.Error("merge marker left after Sync")
	}
	if _, err := os.Lstat(filepath.Join(w.bDir, ".git", "index.lock")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("index.lock after Sync: %v", err)
	}
	indexMatchesHead(t, w.bDir, "the merge")
	checkDivergedResult(t, w)
}

// TestSyncCommitsEditsInTheWayFirst: an uncommitted edit on a path the merge must check
// out is committed through CommitFirst (the agent's commit, which holds the lock only to
// read) before the lock is taken for the checkout, and the merge is planned again on it.
func TestSyncCommitsEditsInTheWayFirst(t *testing.T) {
	w := divergedWorld(t)
	testutil.WriteFile(t, w.bDir, "areas/a.html", "a edited on B, not committed\n")
	ro := pushOpts()
	var committed [][]string
	ro.CommitFirst = func(paths []string) error {
		committed = append(committed, paths)
		_, err := w.b.CommitPaths(paths)
		return err
	}
	locked := 0
	ro.LocalWork = func(fn func() error) error {
		locked++
		head := testutil.RunGit(t, w.bDir, "rev-parse", "HEAD")
		err := fn()
		// The merge's first parent is the head the lock was taken at: no commit in between.
		if got := testutil.RunGit(t, w.bDir, "rev-parse", "HEAD^1"); got != head {
			t.Errorf("a commit was made under the checkout's lock: HEAD^1 %s, head at lock %s", got, head)
		}
		return err
	}
	res, err := w.b.Sync(t.Context(), ro)
	if err != nil || !res.Merged || !res.Pushed {
		t.Fatalf("Sync: %v %+v", err, res)
	}
	if len(committed) != 1 || len(committed[0]) != 1 || committed[0][0] != "areas/a.html" || locked != 1 {
		t.Errorf("CommitFirst calls %v, LocalWork calls %d; want [[areas/a.html]], 1", committed, locked)
	}
	// Both versions kept: A's at the path, B's edit in a conflict copy.
	if got := readWork(t, w.bDir, "areas/a.html"); got != "a from A\n" {
		t.Errorf("areas/a.html = %q", got)
	}
	if len(res.Conflicts) != 1 || testutil.RunGit(t, w.bare, "show", "main:"+res.Conflicts[0]) != "a edited on B, not committed\n" {
		t.Errorf("conflict copies %v", res.Conflicts)
	}
}
