package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// fakeCheckClock is a checkClock the test moves by hand.
type fakeCheckClock struct {
	wall time.Time
	mono time.Duration
}

func (f *fakeCheckClock) clock() checkClock {
	return checkClock{
		wall:  func() time.Time { return f.wall },
		mono:  func() time.Duration { return f.mono },
		after: func(time.Duration) (<-chan time.Time, func()) { return nil, func() {} },
	}
}

// advance moves both clocks (a machine that stays awake).
func (f *fakeCheckClock) advance(d time.Duration) { f.wall = f.wall.Add(d); f.mono += d }

// TestRemoteCheckPace: every tick looks while something changed within the hour; idle past
// it, only every pull_interval; a local change, a wake from suspend (the wall clock jumps,
// the monotonic one does not) or the network returning make every tick look again.
func TestRemoteCheckPace(t *testing.T) {
	f := &fakeCheckClock{wall: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	c := newRemoteChecker(f.clock(), nil, nil)
	check, pull := 10*time.Second, 5*time.Minute
	c.setConfig(gitrepo.RemoteOptions{}, check, pull)
	tick := func() bool { f.advance(check); look, _ := c.due(); return look }
	look := func(res lookResult) bool { return c.noteLook(res, plumbing.ZeroHash) }

	if !tick() {
		t.Fatal("fresh: a tick does not look")
	}
	look(lookSame)
	f.advance(checkIdleAfter)
	looks := 0
	for range int(pull / check) {
		if tick() {
			looks++
			look(lookSame)
		}
	}
	if looks != 1 {
		t.Fatalf("idle past an hour: %d looks in one pull_interval, want 1", looks)
	}
	c.changed()
	if !tick() {
		t.Fatal("after a local change a tick does not look")
	}

	// Idle again, then the machine sleeps three hours: the wall clock jumps, not the monotonic.
	f.advance(checkIdleAfter)
	for tick() {
		look(lookSame)
	}
	f.wall = f.wall.Add(3 * time.Hour)
	if !tick() {
		t.Fatal("after a wake from suspend a tick does not look")
	}
	look(lookSame)

	// Idle, then the remote stops answering: every tick looks until it answers, and its
	// return asks for a sync.
	f.advance(checkIdleAfter)
	for tick() {
		look(lookSame)
	}
	f.advance(pull)
	if !tick() || look(lookFailed) {
		t.Fatal("the pull_interval look did not happen, or a failed look asked for a sync")
	}
	if !tick() {
		t.Fatal("while the remote fails, a tick does not look")
	}
	if !look(lookSame) {
		t.Fatal("the network returning did not ask for a sync")
	}
	if !look(lookMoved) {
		t.Fatal("a moved ref did not ask for a sync")
	}
}

// TestRemoteCheckVouches: the looks answer for the branch only while the last one answered,
// found it at the hash asked about, and is no older than the checker's own wait between looks
// and half again (check_interval; pull_interval once slowed).
func TestRemoteCheckVouches(t *testing.T) {
	f := &fakeCheckClock{wall: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	c := newRemoteChecker(f.clock(), nil, nil)
	check, pull := 10*time.Second, 5*time.Minute
	c.setConfig(gitrepo.RemoteOptions{}, check, pull)
	h, other := plumbing.NewHash("1111111111111111111111111111111111111111"), plumbing.NewHash("2222222222222222222222222222222222222222")
	if c.vouches(h) {
		t.Fatal("no look yet, and it vouches")
	}
	c.noteLook(lookSame, h)
	if !c.vouches(h) {
		t.Fatal("a fresh look that found the branch at h does not vouch for h")
	}
	if c.vouches(other) || c.vouches(plumbing.ZeroHash) {
		t.Fatal("it vouches for a hash the look did not find")
	}
	f.advance(check + check/2 + time.Second)
	if c.vouches(h) {
		t.Fatal("a look older than check_interval and a half still vouches")
	}
	for _, res := range []lookResult{lookMoved, lookFailed, lookCannot} {
		c.noteLook(res, h)
		if c.vouches(h) {
			t.Fatalf("look result %d vouches", res)
		}
	}
	// Slowed (idle past the hour): one look every pull_interval, so one stays good that long.
	c.noteLook(lookSame, h)
	f.advance(checkIdleAfter)
	c.noteLook(lookSame, h)
	f.advance(pull)
	if !c.vouches(h) {
		t.Fatal("slowed: a look pull_interval old does not vouch")
	}
	f.advance(pull)
	if c.vouches(h) {
		t.Fatal("slowed: a look two pull_intervals old still vouches")
	}
	// A reload (another remote or branch, maybe) forgets what the looks found.
	c.noteLook(lookSame, h)
	c.setConfig(gitrepo.RemoteOptions{}, check, pull)
	if c.vouches(h) {
		t.Fatal("after a reload, the look made before it still vouches")
	}
	// A pull_interval no longer than check_interval asks for the fetches themselves.
	c.setConfig(gitrepo.RemoteOptions{}, check, check)
	c.changed()
	c.noteLook(lookSame, h)
	if c.vouches(h) {
		t.Fatal("pull_interval = check_interval, and a look vouches")
	}
}

// TestRemoteCheckFetchesMovedRef pins sync.check_interval in a running agent with a
// smart-HTTP remote and pull_interval an hour: a push from elsewhere reaches the work tree
// through the looks alone, and while nothing moves each look is one small request.
func TestRemoteCheckFetchesMovedRef(t *testing.T) {
	a, srv, bare, root, dir, logs := lookingAgent(t, 300*time.Millisecond, time.Hour)
	atRemote := func() bool {
		h, _ := a.repo.TrackingHead(gitrepo.RemoteOptions{})
		return h.String() == remoteHead(bare)
	}

	// Another machine pushes.
	other := filepath.Join(root, "other")
	gitOK(t, root, "clone", "-q", bare, other)
	if err := os.WriteFile(filepath.Join(other, "from-other.md"), []byte("lesson\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOK(t, other, "add", "-A")
	gitOK(t, other, "-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "-m", "other")
	gitOK(t, other, "push", "-q", "origin", "main")
	testutil.WaitFor(t, "the other machine's file in the work tree", 20*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "from-other.md"))
		return err == nil && string(b) == "lesson\n"
	}, logs.String)

	// Nothing moves now: wait out what the fetch started, then count three looks.
	testutil.WaitFor(t, "the sync done", 20*time.Second, func() bool { return atRemote() && a.current.Load().name == "" }, logs.String)
	// The fetch's last request may be counted after the ref moved: one look more first.
	n, _ := srv.Served()
	testutil.WaitFor(t, "a look", 20*time.Second, func() bool { m, _ := srv.Served(); return m > n }, logs.String)
	n0, b0 := srv.Served()
	testutil.WaitFor(t, "three more looks", 20*time.Second, func() bool { n, _ := srv.Served(); return n >= n0+3 }, logs.String)
	n1, b1 := srv.Served()
	if per := (b1 - b0) / (n1 - n0); per > 1024 {
		t.Fatalf("unmoved remote: %d requests of %d bytes on average; a look is one request under 1 KiB", n1-n0, per)
	}
	if strings.Count(logs.String(), `msg="sync failed`) > 0 {
		t.Fatalf("a sync failed\n%s", logs.String())
	}
}

// TestPullStandsDownWhileLooksVouch: with the looks following an unmoved remote, the
// pull_interval timer fetches nothing (every request stays a look's, under 1 KiB, where a
// fetch's advertisement of the 200 refs is ~17 KiB); once HEAD is not where the tracking ref
// is (a person's own fetch moved it), the timer's full sync runs again and merges it.
//
// A pull is vouched for only by a look at most check_interval and a half old: on a loaded
// machine a late look lets a pull fetch, as it should. The request count is judged only over
// a window with no sync in it; the windows are tried until one is (the deadline bounds it).
func TestPullStandsDownWhileLooksVouch(t *testing.T) {
	a, srv, bare, root, dir, logs := lookingAgent(t, 300*time.Millisecond, time.Second)
	stoodDown := func() int { return strings.Count(logs.String(), "the looks found the branch in step") }
	syncs := func() int { return strings.Count(logs.String(), `msg="sync round"`) }
	testutil.WaitFor(t, "a pull that stood down", 20*time.Second, func() bool { return stoodDown() > 0 }, logs.String)
	judged := false
	for deadline := time.Now().Add(30 * time.Second); !judged && time.Now().Before(deadline); {
		n0, b0 := srv.Served()
		k, s0 := stoodDown(), syncs()
		testutil.WaitFor(t, "two more pulls that stood down", 20*time.Second, func() bool { return stoodDown() >= k+2 }, logs.String)
		n1, b1 := srv.Served()
		if syncs() != s0 {
			t.Logf("a pull fetched in this window (a late look); judging the next")
			continue
		}
		judged = true
		if n1 == n0 {
			t.Fatal("no looks while the pulls stood down")
		}
		if per := (b1 - b0) / (n1 - n0); per > 1024 {
			t.Fatalf("pulls standing down: %d requests of %d bytes on average; a fetch ran (a look is under 1 KiB)", n1-n0, per)
		}
	}
	if !judged {
		t.Fatalf("no window of two stood-down pulls without a sync in 30 s\n%s", logs.String())
	}

	// A person's own `git fetch` brings another machine's push into the tracking ref, and a
	// look then finds the remote where the tracking ref is: the looks vouch for the remote,
	// but HEAD is behind, and the pull must not stand down (only the full sync merges it).
	// Run on the owner goroutine (a page job), so memd syncs nothing meanwhile.
	other := filepath.Join(root, "other")
	gitOK(t, root, "clone", "-q", bare, other)
	err := pageActions{a}.run(context.Background(), "test", func(context.Context) error {
		// The looks go on beside the owner: wait for one fresh enough to vouch.
		for deadline := time.Now().Add(20 * time.Second); !a.pullVouched(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				return errors.New("an unmoved remote, HEAD at the tracking ref: the pull does not stand down")
			}
		}
		if err := os.WriteFile(filepath.Join(other, "from-other.md"), []byte("lesson\n"), 0o644); err != nil {
			return err
		}
		// Not gitOK: this is the owner goroutine, where a test must not FailNow.
		for _, c := range []struct {
			dir  string
			args []string
		}{{other, []string{"add", "-A"}}, {other, []string{"-c", "user.name=o", "-c", "user.email=o@o", "commit", "-q", "-m", "other"}},
			{other, []string{"push", "-q", "origin", "main"}}, {dir, []string{"fetch", "-q", "origin"}}} {
			if _, err := hostGit.Run(c.dir, nil, c.args...); err != nil {
				return err
			}
		}
		moved, _ := a.repo.TrackingHead(gitrepo.RemoteOptions{})
		deadline := time.Now().Add(20 * time.Second)
		// vouches and then pullVouched: a look gone stale between the two only makes
		// pullVouched false as well, never a false failure.
		for !a.check.vouches(moved) {
			if time.Now().After(deadline) {
				return errors.New("no look found the remote at the fetched tracking ref")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if a.pullVouched() {
			return errors.New("HEAD behind the tracking ref, and the pull stands down")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	testutil.WaitFor(t, "the pull merges what the person fetched", 20*time.Second, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "from-other.md"))
		return err == nil && string(b) == "lesson\n"
	}, logs.String)
	if strings.Count(logs.String(), `msg="sync failed`) > 0 {
		t.Fatalf("a sync failed\n%s", logs.String())
	}
}

// lookingAgent runs an agent on a repo whose origin is a smart-HTTP remote with 200 extra
// refs (a forge's pull-request refs: a full advertisement is ~17 KiB), at the given
// check_interval and pull_interval, and returns once the start-up sync is done.
func lookingAgent(t *testing.T, check, pull time.Duration) (a *Agent, srv *testutil.GitHTTPServer, bare, root, dir string, logs *testutil.LockedBuffer) {
	t.Helper()
	isolateGit(t)
	dir = newRepo(t)
	root = t.TempDir()
	bare = filepath.Join(root, "mem.git")
	gitOK(t, root, "init", "-q", "--bare", "-b", "main", bare)
	gitOK(t, bare, "config", "http.receivepack", "true")
	gitOK(t, dir, "push", "-q", bare, "main")
	srv = testutil.NewGitHTTPServer(t, root, "")
	gitOK(t, dir, "remote", "add", "origin", srv.URL("mem.git"))
	gitOK(t, dir, "fetch", "-q", "origin")
	// 200 other refs (a forge's pull-request refs): a full advertisement is ~17 KiB.
	var refs strings.Builder
	head := remoteHead(bare)
	for i := range 200 {
		fmt.Fprintf(&refs, "create refs/pull/%d/head %s\n", i, head)
	}
	cmd := exec.Command("git", "update-ref", "--stdin")
	cmd.Dir, cmd.Stdin = bare, strings.NewReader(refs.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-ref: %v %s", err, out)
	}

	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(100 * time.Millisecond)
	cfg.Sleep.CatchUp = false
	cfg.Sync.PullInterval = memd.Duration(pull)
	cfg.Sync.CheckInterval = memd.Duration(check)
	logs = &testutil.LockedBuffer{}
	a, err := New(Options{Config: cfg, Version: "test",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testutil.WaitFor(t, "start-up reconcile", 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "start-up reconcile done")
	}, logs.String)

	atRemote := func() bool {
		h, _ := a.repo.TrackingHead(gitrepo.RemoteOptions{})
		return h.String() == remoteHead(bare)
	}
	testutil.WaitFor(t, "the start-up sync done", 20*time.Second, func() bool {
		return atRemote() && a.current.Load().name == ""
	}, logs.String)
	return a, srv, bare, root, dir, logs
}

// remoteHead is the bare remote's main, or "" while git cannot say.
func remoteHead(bare string) string {
	out, _ := hostGit.Run(bare, nil, "rev-parse", "main")
	return strings.TrimSpace(out)
}
