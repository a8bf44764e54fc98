package sleep

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// swapArcs replaces areas/arcs by a symlink to the real folder moved aside (a local
// writer's symlink swap), and back.
func swapArcs(t *testing.T, dir string) (undo func()) {
	t.Helper()
	arcs, aside := filepath.Join(dir, "areas", "arcs"), filepath.Join(dir, "areas", "arcs.aside")
	if err := os.Rename(arcs, aside); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("arcs.aside", arcs); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(arcs); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(aside, arcs); err != nil {
			t.Fatal(err)
		}
	}
}

// swappingStore swaps areas/arcs for a link during the commit's read, and back after.
type swappingStore struct {
	*gitrepo.Repo
	t   *testing.T
	dir string
}

func (s swappingStore) CommitPathsMessage(paths []string, msg string, kind memd.CommitKind) (memd.CommitResult, error) {
	undo := swapArcs(s.t, s.dir)
	defer undo()
	return s.Repo.CommitPathsMessage(paths, msg, kind)
}

// The arcs phase commits exactly what it reports, or reports what it committed, under a
// local symlink swap of areas/arcs: during the apply, the phase fails before any commit and
// is undone; during the commit, the commit keeps what it took and the phase names the rest.
// On main the second reported every arc created while the commit took none of them (the
// first was already refused by the apply's own safefs writes; it guards the undo).
func TestArcsCommitMatchesReport(t *testing.T) {
	t.Run("swap during the apply", func(t *testing.T) {
		dir := t.TempDir()
		buildFixture(t, dir)
		store := openStore(t, dir)
		h := head(t, dir)
		var undo func()
		rep := runSleep(t, dir, store, testConfig(), func(o *Options) {
			o.Phases = []memd.Phase{"arcs"}
			o.afterOp = func(ph memd.Phase, i int) error {
				if i == 0 && undo == nil {
					if err := os.MkdirAll(filepath.Join(dir, "areas", "arcs"), 0o755); err != nil {
						t.Fatal(err)
					}
					undo = swapArcs(t, dir)
				}
				return nil
			}
		})
		pr := rep.Phases[0]
		if pr.Err == nil || pr.Commit != "" || head(t, dir) != h {
			t.Fatalf("arcs over a swapped folder: err %v, commit %q, HEAD moved %v (counts %v)", pr.Err, pr.Commit, head(t, dir) != h, pr.Counts)
		}
		if !strings.Contains(pr.Err.Error(), "areas/arcs/") {
			t.Errorf("the error does not name the arc: %v", pr.Err)
		}
	})
	t.Run("swap during the commit", func(t *testing.T) {
		dir := t.TempDir()
		buildFixture(t, dir)
		store := openStore(t, dir)
		rep := runSleep(t, dir, swappingStore{Repo: store, t: t, dir: dir}, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"arcs"} })
		pr := rep.Phases[0]
		if pr.Counts["created"] == 0 {
			t.Fatalf("the fixture made no arc: %v", pr.Counts)
		}
		if !errors.Is(pr.Err, ErrNotCommitted) || !strings.Contains(pr.Err.Error(), "areas/arcs/") {
			t.Fatalf("arcs reported %v (err %v, commit %q) although the commit took none of them", pr.Counts, pr.Err, pr.Commit)
		}
		if n := strings.TrimSpace(testutil.RunGit(t, dir, "ls-files", "--others", "areas/arcs")); n == "" {
			t.Fatalf("the arcs not committed are not on disk for the next commit")
		}
	})
}
