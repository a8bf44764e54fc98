package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// TestFileRemotePushSeenAtOnce: with a remote that is a path on this machine and both the
// looks and the pulls an hour apart, another clone's `git push` reaches the work tree
// within seconds: receive-pack renaming the branch's ref into place is an inotify event
// that makes the checker look (remotewatch.go). Without the watch nothing would fetch for
// an hour. A reload keeps the watch (it is restarted for the config's remote).
func TestFileRemotePushSeenAtOnce(t *testing.T) {
	isolateGit(t)
	dir := newRepo(t)
	root := t.TempDir()
	bare := filepath.Join(root, "mem.git")
	gitOK(t, root, "init", "-q", "--bare", "-b", "main", bare)
	gitOK(t, dir, "push", "-q", bare, "main")
	gitOK(t, dir, "remote", "add", "origin", bare)
	gitOK(t, dir, "fetch", "-q", "origin")

	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(100 * time.Millisecond)
	cfg.Sleep.CatchUp = false
	cfg.Sync.PullInterval = memd.Duration(time.Hour)
	cfg.Sync.CheckInterval = memd.Duration(time.Hour)
	a, logs, stop := startAgent(t, cfg)
	t.Cleanup(stop)
	testutil.WaitFor(t, "the start-up sync done", 20*time.Second, func() bool {
		h, _ := a.repo.TrackingHead(gitrepo.RemoteOptions{})
		return strings.Contains(logs.String(), "start-up reconcile done") && h.String() == remoteHead(bare) && a.current.Load().name == ""
	}, logs.String)

	other := filepath.Join(root, "other")
	gitOK(t, root, "clone", "-q", bare, other)
	push := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(other, name), []byte("lesson "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitOK(t, other, "add", "-A")
		gitOK(t, other, "-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "-m", name)
		gitOK(t, other, "push", "-q", "origin", "main")
		testutil.WaitFor(t, name+" in the work tree", 20*time.Second, func() bool {
			b, err := os.ReadFile(filepath.Join(dir, name))
			return err == nil && string(b) == "lesson "+name+"\n"
		}, logs.String)
	}
	push("from-other.md")
	a.Reload()
	testutil.WaitFor(t, "the reload", 20*time.Second, func() bool { return a.current.Load().name == "" }, logs.String)
	push("after-reload.md")
}
