package watcher_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/watcher"
)

// deadline for conditions that should hold within milliseconds; generous for -race on a
// loaded 2-core machine.
const deadline = 20 * time.Second

// newRepo makes a real git repo in a temp dir.
func newRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q")
	return dir
}

// put creates root/rel with one event (a rename from outside the repo), so a test can
// wait for exactly one pending path without a late Write event slipping in after.
func put(t testing.TB, root, rel, content string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "put")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(root, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

// collector reads every batch of a running watcher.
type collector struct {
	mu      sync.Mutex
	batches []watcher.Batch
	seen    map[string]int // path → number of batches it was in
	closed  bool
	changed chan struct{}
}

type running struct {
	w      *watcher.Watcher
	c      *collector
	cancel context.CancelFunc
	done   chan error
}

// start creates and runs a watcher on root; it stops at the end of the test.
func start(t *testing.T, root string, opts watcher.Options) *running {
	t.Helper()
	w, err := watcher.New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{w: w, cancel: cancel, done: make(chan error, 1),
		c: &collector{seen: map[string]int{}, changed: make(chan struct{}, 1)}}
	go func() { r.done <- w.Run(ctx) }()
	go r.c.read(w.Batches())
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(deadline):
			t.Error("Run did not return after cancel")
		}
	})
	return r
}

func (c *collector) read(ch <-chan watcher.Batch) {
	for b := range ch {
		c.mu.Lock()
		c.batches = append(c.batches, b)
		for _, p := range b.Paths {
			c.seen[p]++
		}
		c.mu.Unlock()
		c.poke()
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.poke()
}

func (c *collector) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond (called under the lock) holds.
func (c *collector) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-timeout:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("timed out waiting for %s; %s", what, summary(c.batches))
		}
	}
}

// waitPaths waits until every path in want was reported.
func (c *collector) waitPaths(t *testing.T, want ...string) {
	t.Helper()
	c.waitFor(t, strings.Join(want, ","), func() bool {
		for _, p := range want {
			if c.seen[p] == 0 {
				return false
			}
		}
		return true
	})
}

func (c *collector) paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.seen))
}

func (c *collector) reset() {
	c.mu.Lock()
	c.batches, c.seen = nil, map[string]int{}
	c.mu.Unlock()
}

func (c *collector) all() []watcher.Batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]watcher.Batch(nil), c.batches...)
}

// expectExactly writes a sentinel file after the action has happened and waits for it:
// events are processed in order, so every path the action produced is reported by then.
func (r *running) expectExactly(t *testing.T, root string, want ...string) {
	t.Helper()
	sentinel := "zz-sentinel-" + strings.ReplaceAll(t.Name(), "/", "-") + ".html"
	testutil.WriteFile(t, root, sentinel, "s")
	r.c.waitPaths(t, sentinel)
	want = append(want, sentinel)
	sort.Strings(want)
	if got := r.c.paths(); !slices.Equal(got, want) {
		t.Fatalf("reported %q, want %q", got, want)
	}
	if err := os.Remove(filepath.Join(root, sentinel)); err != nil {
		t.Fatal(err)
	}
	r.c.waitFor(t, "sentinel removal", func() bool { return r.c.seen[sentinel] >= 2 })
	r.c.reset()
}

// fakeClock is a manual Clock: timers fire only in Advance.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	fired  int
}

type fakeTimer struct {
	c  *fakeClock
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) watcher.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Advance moves time on and runs the timers that came due, in order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due, keep []*fakeTimer
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	c.timers = keep
	c.fired += len(due)
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, t := range due {
		t.f()
	}
}

func (c *fakeClock) pendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// summary describes batches briefly (a failure message must stay readable).
func summary(bs []watcher.Batch) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d batches:", len(bs))
	for i, b := range bs {
		if i == 10 {
			sb.WriteString(" ...")
			break
		}
		ps := b.Paths
		if len(ps) > 5 {
			ps = append(append([]string(nil), ps[:5]...), fmt.Sprintf("... (%d paths)", len(b.Paths)))
		}
		fmt.Fprintf(&sb, " {%q rescan=%v %q}", ps, b.Rescan, b.Reason)
	}
	return sb.String()
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
