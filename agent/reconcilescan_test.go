package agent

import (
	"testing"
	"time"

	memd "github.com/memd-dev/memd"
	tu "github.com/memd-dev/memd/internal/testutil"
)

// The watch.reconcile timer's reconcile runs git status but no inventory walk (at 100k files
// the walk was most of an idle daemon's CPU); a rescan asked for (KickReconcile, the
// watcher's overflow, a stand-aside's end) still walks. Fails on the old code: every
// reconcile after the start-up one walked.
func TestPeriodicReconcileSkipsTheInventoryWalk(t *testing.T) {
	isolateGit(t)
	dir := newRepo(t)
	cfg := hookConfig(dir)
	cfg.Watch.Reconcile = memd.Duration(20 * time.Millisecond)
	a, logs, stop := startAgent(t, cfg)
	defer stop()
	tu.WaitFor(t, "three timer reconciles", 20*time.Second, func() bool { return a.reconciles.Load() >= 4 }, logs.String)
	if n := a.inventoryScans.Load(); n != 0 {
		t.Fatalf("%d inventory walks after %d timer reconciles, want 0", n, a.reconciles.Load()-1)
	}
	a.KickReconcile()
	tu.WaitFor(t, "the asked-for rescan's walk", 20*time.Second, func() bool { return a.inventoryScans.Load() == 1 }, logs.String)
}
