package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestCommitOnStaleIndexLosesNothing: memd commits a new file, then another writer's
// `git commit` is built on an index that lagged memd's commit (as memhtml's `git add` +
// `git commit` can be, when it comes between memd's commit and its index refresh), so it
// leaves the file out of the branch. The file is still in the work tree, unchanged: no
// watcher event comes for it, and memd must commit it again without waiting for the next
// periodic reconcile (watch.reconcile, 10 minutes).
func TestCommitOnStaleIndexLosesNothing(t *testing.T) {
	_, dir, _, cfg := brakeWorld(t)
	_, logs, _ := runBrakeAgent(t, cfg)
	testutil.WaitFor(t, "memd running", 20*time.Second, func() bool { return strings.Contains(logs.String(), `msg="start-up reconcile done"`) }, logs.String)
	before := gitOK(t, dir, "rev-parse", "HEAD")
	p := filepath.Join(dir, "resources", "writer", "0208.html")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("<p>0208</p>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inHead := func() bool {
		out, err := hostGit.Run(dir, nil, "ls-tree", "--name-only", "HEAD", "resources/writer/0208.html")
		return err == nil && strings.TrimSpace(out) != ""
	}
	testutil.WaitFor(t, "memd commits the file", 20*time.Second, inHead, logs.String)
	// memd's index refresh after its commit takes index.lock for a moment; the other
	// writer's git below would find it there (a person's git that starts mid-refresh is
	// refused, as with any two gits: TestUserGitNotRefusedByIndexRefresh measures how
	// often). The refresh is done once the index holds HEAD and the lock is gone.
	testutil.WaitFor(t, "memd's index refresh after its commit", 20*time.Second, func() bool {
		if _, err := os.Lstat(filepath.Join(dir, ".git", "index.lock")); err == nil {
			return false
		}
		_, err := hostGit.Run(dir, nil, "diff-index", "--cached", "--quiet", "HEAD")
		return err == nil
	}, logs.String)
	// The other writer: its index is the one before memd's commit; its commit drops the file.
	gitOK(t, dir, "read-tree", before)
	gitOK(t, dir, "commit", "-q", "--allow-empty", "-m", "another writer, on a stale index")
	if inHead() {
		t.Fatal("the other writer's commit kept the file: the test did not make the stale-index commit")
	}
	testutil.WaitFor(t, "memd commits the file again", 10*time.Second, inHead, logs.String)
}
