package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/internal/testutil"
)

// brakeWorld is a remote with n memories in resources/m/ (plus the ledger), cloned twice;
// A has sync.max_deletes = max and the state directory's allowance.
func brakeWorld(t *testing.T, n, max int) (*syncWorld, *statedir.Dir) {
	t.Helper()
	files := map[string]string{"memory.jsonl": "{}\n"}
	for i := range n {
		files[fmt.Sprintf("resources/m/n%03d.html", i)] = fmt.Sprintf("<p>%d</p>\n", i)
	}
	w := newSyncWorld(t, files)
	sd, err := statedir.Create(memd.StateDir(w.aDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sd.Close() })
	o := hostOptions("hosta")
	o.MaxDeletes, o.Deletions = max, sd
	_ = w.a.Close()
	w.a = openTest(t, w.aDir, o)
	return w, sd
}

func removeMemories(t *testing.T, dir string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		removeFile(t, dir, fmt.Sprintf("resources/m/n%03d.html", i))
	}
}

func TestMassDeletionBrakeLocal(t *testing.T) {
	w, sd := brakeWorld(t, 40, 5)
	// Archive moves are renames, not deletions: 18 of 40 in one commit pass.
	for i := 12; i < 30; i++ {
		renameFile(t, w.aDir, fmt.Sprintf("resources/m/n%03d.html", i), fmt.Sprintf("archive/2026/resources/m/n%03d.html", i))
	}
	if res := mustCommit(t, w.a, "resources", "archive"); res.Added != 18 || res.Deleted != 18 {
		t.Fatalf("archive moves %+v", res)
	}
	head := testutil.RunGit(t, w.aDir, "rev-parse", "HEAD")
	removeMemories(t, w.aDir, 0, 12) // 12 of 40: over 5 and over 20%
	testutil.WriteFile(t, w.aDir, "resources/m/new.html", "<p>new</p>\n")
	_, err := w.a.CommitPaths([]string{"resources"})
	var md *MassDeletionError
	if !errors.As(err, &md) || !errors.Is(err, ErrMassDeletion) {
		t.Fatalf("commit of 12 deletions of 40: err %v, want a held mass deletion", err)
	}
	if md.Side != SideLocal || md.Deleted != 12 || md.Total != 40 {
		t.Fatalf("held %+v", md)
	}
	want := "mass deletion: 12 memory files deleted locally (of 40); memd resume --allow-deletes lets it through"
	if md.Error() != want {
		t.Fatalf("reason %q, want %q", md.Error(), want)
	}
	if testutil.RunGit(t, w.aDir, "rev-parse", "HEAD") != head {
		t.Fatal("a held deletion moved HEAD")
	}
	absent(t, w.aDir, "resources/m/n000.html") // stays deleted on disk, uncommitted
	// A few deletions pass.
	if res := mustCommit(t, w.a, "resources/m/n000.html", "resources/m/n001.html"); res.Deleted != 2 {
		t.Fatalf("two deletions %+v", res)
	}
	// memd resume --allow-deletes lets the next one through, once.
	if err := sd.AllowDeletes(testNow); err != nil {
		t.Fatal(err)
	}
	res := mustCommit(t, w.a, "resources")
	if res.Deleted != 10 || res.Added != 1 {
		t.Fatalf("allowed commit %+v", res)
	}
	if sd.DeletesAllowed() {
		t.Fatal("the allowance was not used up")
	}
}

func TestMassDeletionBrakeRemote(t *testing.T) {
	w, sd := brakeWorld(t, 40, 5)
	// Another machine (plain git) deletes 20 memories and pushes.
	for i := range 20 {
		testutil.RunGit(t, w.bDir, "rm", "-q", fmt.Sprintf("resources/m/n%03d.html", i))
	}
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "rm -r the wrong folder")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	testutil.WriteFile(t, w.aDir, "resources/m/a.html", "<p>A</p>\n")
	mustCommit(t, w.a, "resources/m/a.html")
	_, err := w.a.Sync(t.Context(), pushOpts())
	var md *MassDeletionError
	if !errors.As(err, &md) || md.Side != SideRemote || md.Deleted != 20 || md.Total != 41 {
		t.Fatalf("sync: err %v (%+v), want the remote's deletion held", err, md)
	}
	if !strings.Contains(err.Error(), "deleted by the remote (of 41)") {
		t.Fatalf("reason %q", err)
	}
	if _, err := os.Stat(filepath.Join(w.aDir, "resources/m/n000.html")); err != nil {
		t.Fatalf("the remote's deletion reached the work tree: %v", err)
	}
	if c := testutil.RunGit(t, w.aDir, "rev-list", "--count", "HEAD"); strings.TrimSpace(c) != "2" {
		t.Fatalf("the remote's commit was merged: %s commits", c)
	}
	if err := sd.AllowDeletes(testNow); err != nil {
		t.Fatal(err)
	}
	res := mustSync(t, w.a)
	if !res.Merged || !res.Pushed {
		t.Fatalf("allowed sync %+v", res)
	}
	absent(t, w.aDir, "resources/m/n000.html")
	if sd.DeletesAllowed() {
		t.Fatal("the allowance was not used up")
	}
	fsck(t, w.aDir)
}

// clockedBrake reopens A of brakeWorld with a clock the test moves.
func clockedBrake(t *testing.T, w *syncWorld, sd *statedir.Dir, max int, now *time.Time) *Repo {
	t.Helper()
	o := hostOptions("hosta")
	o.MaxDeletes, o.Deletions = max, sd
	o.Now = func() time.Time { return *now }
	if w.a != nil {
		_ = w.a.Close()
	}
	w.a = openTest(t, w.aDir, o)
	return w.a
}

func heldLocal(t *testing.T, r *Repo) *MassDeletionError {
	t.Helper()
	_, err := r.CommitPaths([]string{"resources"})
	var md *MassDeletionError
	if !errors.As(err, &md) {
		t.Fatalf("commit: err %v, want a held mass deletion", err)
	}
	return md
}

// An rm of 10 of 40 in two batches of 5 (sync.max_deletes 5): each passes alone, together
// they are a mass deletion, so the second is held. The window survives a restart, does not
// slide while held, ends its hold at the next change that passes, and expires.
func TestMassDeletionBrakeWindow(t *testing.T) {
	w, sd := brakeWorld(t, 40, 5)
	now := testNow
	r := clockedBrake(t, w, sd, 5, &now)
	removeMemories(t, w.aDir, 0, 5)
	if res := mustCommit(t, r, "resources"); res.Deleted != 5 {
		t.Fatalf("first batch %+v", res)
	}
	now = now.Add(3 * time.Minute)
	head := testutil.RunGit(t, w.aDir, "rev-parse", "HEAD")
	removeMemories(t, w.aDir, 5, 10)
	md := heldLocal(t, r)
	if md.Side != SideLocal || md.Deleted != 10 || md.Total != 40 || md.Earlier != 5 {
		t.Fatalf("held %+v", md)
	}
	want := "mass deletion: 10 memory files deleted locally in the last 10 minutes (of 40; 5 already in); memd resume --allow-deletes lets the rest through"
	if md.Error() != want {
		t.Fatalf("reason %q, want %q", md.Error(), want)
	}
	// A restart in the middle of the rm: the window is in the state directory.
	r = clockedBrake(t, w, sd, 5, &now)
	heldLocal(t, r)
	// Waiting does not let it through: a held window stops sliding.
	now = now.Add(time.Hour)
	heldLocal(t, r)
	if testutil.RunGit(t, w.aDir, "rev-parse", "HEAD") != head {
		t.Fatal("a held deletion moved HEAD")
	}
	// Undone (the files back): the next change passes and ends the hold; later deletions
	// are judged by a window of their own.
	testutil.RunGit(t, w.aDir, "checkout", "--", "resources/m")
	testutil.WriteFile(t, w.aDir, "resources/m/new.html", "<p>new</p>\n")
	mustCommit(t, r, "resources")
	removeMemories(t, w.aDir, 5, 10)
	if res := mustCommit(t, r, "resources"); res.Deleted != 5 {
		t.Fatalf("deletions an hour later %+v", res)
	}
}

// memd resume --allow-deletes lets the held part through and empties the window.
func TestMassDeletionBrakeWindowRelease(t *testing.T) {
	w, sd := brakeWorld(t, 40, 5)
	now := testNow
	r := clockedBrake(t, w, sd, 5, &now)
	removeMemories(t, w.aDir, 0, 5)
	mustCommit(t, r, "resources")
	removeMemories(t, w.aDir, 5, 10)
	heldLocal(t, r)
	if err := sd.AllowDeletes(now); err != nil {
		t.Fatal(err)
	}
	if res := mustCommit(t, r, "resources"); res.Deleted != 5 {
		t.Fatalf("allowed batch %+v", res)
	}
	if sd.DeletesAllowed() {
		t.Fatal("the allowance was not used up")
	}
	removeMemories(t, w.aDir, 10, 15) // a new window: 5 pass
	if res := mustCommit(t, r, "resources"); res.Deleted != 5 {
		t.Fatalf("after the release %+v", res)
	}
}

// Another machine's rm pushed in two parts: the second fetch is held.
// TestMassDeletionBrakeRemoteJudgesEachFetch: a fetched change is judged on its own (the
// window is the local side's): two parts of 5 pushed by another writer, under the bar each,
// both merge; one fetched change of 10 is held.
func TestMassDeletionBrakeRemoteJudgesEachFetch(t *testing.T) {
	w, sd := brakeWorld(t, 40, 5)
	now := testNow
	r := clockedBrake(t, w, sd, 5, &now)
	push := func(from, to int) {
		for i := from; i < to; i++ {
			testutil.RunGit(t, w.bDir, "rm", "-q", fmt.Sprintf("resources/m/n%03d.html", i))
		}
		testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "rm part")
		testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	}
	push(0, 5)
	if res := mustSync(t, r); !res.FastForward {
		t.Fatalf("first part %+v", res)
	}
	push(5, 10)
	now = now.Add(time.Minute)
	if res := mustSync(t, r); !res.FastForward {
		t.Fatalf("second part %+v", res)
	}
	absent(t, w.aDir, "resources/m/n009.html")
	push(10, 20)
	now = now.Add(time.Minute)
	_, err := r.Sync(t.Context(), pushOpts())
	var md *MassDeletionError
	if !errors.As(err, &md) || md.Side != SideRemote || md.Deleted != 10 || md.Earlier != 0 || md.Total != 30 {
		t.Fatalf("a fetch of 10: err %v (%+v), want it held", err, md)
	}
	if _, err := os.Stat(filepath.Join(w.aDir, "resources/m/n010.html")); err != nil {
		t.Fatalf("the held change reached the work tree: %v", err)
	}
}
