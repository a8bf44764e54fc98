package agent

// The cheap look at the remote branch (docs/ARCHITECTURE.md §11, sync.check_interval): every check_interval
// one small request asks the remote where the branch is (sync.Repo.RemoteHead); a sync
// (fetch, merge) is kicked only when it is not where the last fetch or push left it. After
// an hour with no local or remote change the looks slow to sync.pull_interval; a local
// change (a commit), a remote change (a sync that brought something in), a wake from
// suspend or the network returning bring them back to check_interval at once.
//
// It runs on its own goroutine: a look waits on the network, and the owner loop must not.
// It reads the repo only through RemoteHead and TrackingHead (the remote's URL under the
// repo's lock, a ref file), and asks the owner for a sync through the sync kick.
//
// The pull_interval timer's full fetch stands down while the looks vouch for the branch
// (vouches, Agent.pullVouched): a fetch of an unmoved branch brings nothing, and at 100k files
// its job (a commit check, two status publishes, the sync's plan, the memory trim after) was
// ~130 of a 10-minute idle window's ~800 wakeups. Where the looks cannot (no cheap look at the
// remote), fail, or fall behind, the full fetch runs every pull_interval as before.
//
// Timers: one, re-armed every check_interval also while slowed, because a wake from
// suspend is only seen by looking at the clocks (Go's timers run on the monotonic clock,
// which stops while the machine sleeps): 0.1 wakeups a second at the default.

import (
	"context"
	"errors"
	stdsync "sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// checkIdleAfter is how long without a local or remote change before the looks slow down.
const checkIdleAfter = time.Hour

// wakeJump is how far the wall clock must run ahead of the monotonic one between two ticks
// to count as a wake from suspend (NTP slews by milliseconds; a suspend is seconds at least).
const wakeJump = 5 * time.Second

// checkClock is what the checker reads time from: the wall clock (which runs on through a
// suspend), the monotonic one (which stops) and a timer on the monotonic one. Tests inject it.
type checkClock struct {
	wall  func() time.Time
	mono  func() time.Duration
	after func(d time.Duration) (<-chan time.Time, func())
}

func realCheckClock() checkClock {
	start := time.Now()
	return checkClock{
		wall: func() time.Time { return time.Now().Round(0) }, // Round(0): the wall reading only
		mono: func() time.Duration { return time.Since(start) },
		after: func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTimer(d)
			return t.C, func() { t.Stop() }
		},
	}
}

// lookResult is what one look found.
type lookResult int

const (
	lookSame   lookResult = iota // the remote is where the tracking ref says
	lookMoved                    // it moved: a sync fetches it
	lookFailed                   // the remote did not answer (offline) or refused
	lookCannot                   // no cheap look at this remote (ErrCheckUnsupported)
)

// remoteChecker schedules the looks.
type remoteChecker struct {
	clock checkClock
	// look asks the remote (and says where it found the branch); moved asks the owner for
	// a sync.
	look  func(ctx context.Context, ro gitrepo.RemoteOptions) (lookResult, plumbing.Hash)
	moved func()

	mu          stdsync.Mutex
	ro          gitrepo.RemoteOptions
	check, pull time.Duration
	changedAt   time.Duration // monotonic time of the last local or remote change
	lookedAt    time.Duration // of the last look
	failing     bool          // the last look failed: the next comes at check_interval
	cannot      bool          // the remote has no cheap look: one every pull_interval
	// seen: where the last look found the branch when it found it unmoved (lookSame); zero
	// before any look, after any other answer and after a reload: nothing vouched for.
	seen     plumbing.Hash
	lastWall time.Time
	lastMono time.Duration

	stop func()
	done chan struct{}
	// poked: a look now, asked by the watch of a file remote's branch (remotewatch.go).
	poked chan struct{}
}

// poke asks for a look at once (the remote's branch changed on this machine's disk).
func (c *remoteChecker) poke() {
	select {
	case c.poked <- struct{}{}:
	default:
	}
}

func newRemoteChecker(clock checkClock, look func(context.Context, gitrepo.RemoteOptions) (lookResult, plumbing.Hash), moved func()) *remoteChecker {
	c := &remoteChecker{clock: clock, look: look, moved: moved, poked: make(chan struct{}, 1)}
	c.lastWall, c.lastMono = clock.wall(), clock.mono()
	c.changedAt, c.lookedAt = c.lastMono, c.lastMono
	return c
}

// setConfig takes the remote's options and the two intervals (start, reload).
func (c *remoteChecker) setConfig(ro gitrepo.RemoteOptions, check, pull time.Duration) {
	c.mu.Lock()
	c.ro, c.check, c.pull = ro, check, pull
	c.seen = plumbing.ZeroHash // a reload may name another remote or branch: no look has answered for it
	c.mu.Unlock()
}

// changed notes a local or remote change: the looks go back to check_interval.
func (c *remoteChecker) changed() {
	c.mu.Lock()
	c.changedAt = c.clock.mono()
	c.mu.Unlock()
}

// due is one tick's decision: whether to look now. A wake (the wall clock ran ahead of the
// monotonic one) counts as a change.
func (c *remoteChecker) due() (bool, gitrepo.RemoteOptions) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall, mono := c.clock.wall(), c.clock.mono()
	if wall.Sub(c.lastWall)-(mono-c.lastMono) > wakeJump {
		c.changedAt = mono
	}
	c.lastWall, c.lastMono = wall, mono
	return c.fastLocked(mono) || mono-c.lookedAt >= c.pull, c.ro
}

// fastLocked is whether every tick looks now (c.mu held): a change within the hour, or the
// looks failing; never for a remote with no cheap look.
func (c *remoteChecker) fastLocked(mono time.Duration) bool {
	return !c.cannot && (c.failing || mono-c.changedAt < checkIdleAfter)
}

// vouches is whether the looks answer for the branch being at h now: the last look answered,
// found the remote branch at h, and is fresh, taken within the wait the checker itself keeps
// between looks (check_interval, pull_interval when slowed) and half as much again for the
// look's own time. A full fetch then would bring nothing: the look was the same ls-refs of
// the branch a fetch starts with. A pull_interval no longer than check_interval is never
// vouched for: that config asks for the fetches themselves.
func (c *remoteChecker) vouches(h plumbing.Hash) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.IsZero() || c.seen != h {
		return false
	}
	if c.check >= c.pull {
		return false // pulls as often as looks or more: the pull is the pace asked for
	}
	mono := c.clock.mono()
	wait := c.pull
	if c.fastLocked(mono) {
		wait = c.check
	}
	return mono-c.lookedAt <= wait+wait/2
}

// noteLook records a look's result: a move is a remote change, and so is the network
// coming back after failed looks (the sync then pushes what waited, at once).
func (c *remoteChecker) noteLook(res lookResult, seen plumbing.Hash) (kick bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lookedAt = c.clock.mono()
	c.seen = plumbing.ZeroHash
	if res == lookSame {
		c.seen = seen
	}
	back := c.failing && res != lookFailed
	c.failing = res == lookFailed
	c.cannot = res == lookCannot
	if res == lookMoved || back {
		c.changedAt = c.lookedAt
		return true
	}
	return false
}

// interval is the tick: check_interval, also while slowed (see the file comment).
func (c *remoteChecker) interval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.check
}

// start runs the looks until stopAndWait.
func (c *remoteChecker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stop, c.done = cancel, make(chan struct{})
	go func() {
		defer close(c.done)
		c.run(ctx)
	}()
}

func (c *remoteChecker) stopAndWait() {
	if c != nil && c.stop != nil {
		c.stop()
		<-c.done
	}
}

func (c *remoteChecker) run(ctx context.Context) {
	for {
		tick, stop := c.clock.after(c.interval())
		poked := false
		select {
		case <-ctx.Done():
			stop()
			return
		case <-tick:
		case <-c.poked:
			stop()
			poked = true
		}
		look, ro := c.due()
		if !look && !poked {
			continue
		}
		if c.noteLook(c.look(ctx, ro)) && ctx.Err() == nil {
			c.moved()
		}
	}
}

// lookAtRemote is the agent's look: the remote's branch against the tracking ref. A repo
// with no such remote is lookSame at no branch: nothing to fetch, nothing vouched for.
func (a *Agent) lookAtRemote(ctx context.Context, ro gitrepo.RemoteOptions) (lookResult, plumbing.Hash) {
	if ok, err := a.repo.HasRemote(ro.Remote); err != nil || !ok {
		return lookSame, plumbing.ZeroHash
	}
	h, err := a.repo.RemoteHead(ctx, ro)
	switch {
	case errors.Is(err, gitrepo.ErrCheckUnsupported):
		return lookCannot, plumbing.ZeroHash
	case err != nil:
		if !errors.Is(err, gitremote.ErrOffline) && ctx.Err() == nil {
			a.log.Debug("look at the remote failed", "err", err)
		}
		return lookFailed, plumbing.ZeroHash
	}
	t, err := a.repo.TrackingHead(ro)
	if err != nil || h != t {
		return lookMoved, h
	}
	return lookSame, h
}

// pullVouched is the pull_interval timer's question (owner only): do the looks answer for a
// full fetch now? Only when nothing waits to be committed, the last sync ended well, the
// branch is where the tracking ref is (nothing to push; a person's own `git fetch` that
// moved the tracking ref past HEAD is merged by the full sync), and the last fresh look
// found the remote there too. Then the fetch would bring nothing.
func (a *Agent) pullVouched() bool {
	if a.check == nil || a.pending.len() > 0 || a.st.syncState != statusline.StateOK {
		return false
	}
	t, err := a.repo.TrackingHead(gitrepo.RemoteOptionsFromConfig(a.cfg))
	if err != nil {
		return false
	}
	head, err := a.repo.Head()
	return err == nil && head == t.String() && a.check.vouches(t)
}

// startRemoteCheck starts the looks with the running config.
func (a *Agent) startRemoteCheck() {
	a.check = newRemoteChecker(realCheckClock(), a.lookAtRemote, func() { kick(a.k.sync) })
	a.configRemoteCheck()
	a.check.start()
	a.watchFileRemote()
}

// configRemoteCheck hands the checker the config's remote and intervals (owner only).
func (a *Agent) configRemoteCheck() {
	if a.check != nil {
		a.check.setConfig(gitrepo.RemoteOptionsFromConfig(a.cfg), a.cfg.Sync.CheckInterval.D(), a.cfg.Sync.PullInterval.D())
	}
}

// remoteChanged tells the checker of a local or remote change.
func (a *Agent) remoteChanged() {
	if a.check != nil {
		a.check.changed()
	}
}
