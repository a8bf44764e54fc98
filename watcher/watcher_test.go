package watcher_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/watcher"
)

func fast() watcher.Options {
	return watcher.Options{Quiet: 30 * time.Millisecond, MaxDelay: 300 * time.Millisecond}
}

func TestMkdirPWithFileIsSeen(t *testing.T) {
	root := newRepo(t)
	r := start(t, root, fast())
	before := r.w.Stats().WatchedDirs

	// mkdir -p a/b/c && echo x > a/b/c/m.html: the file can land before any watch on c.
	if err := os.MkdirAll(filepath.Join(root, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, root, "a/b/c/m.html", "x")
	r.expectExactly(t, root, "a/b/c/m.html")
	if got := r.w.Stats().WatchedDirs; got != before+3 {
		t.Fatalf("WatchedDirs = %d, want %d", got, before+3)
	}
	// The new leaf directory is watched: a later file there is seen too.
	testutil.WriteFile(t, root, "a/b/c/n.html", "y")
	r.expectExactly(t, root, "a/b/c/n.html")
}

func TestTreeMovedInIsSeen(t *testing.T) {
	root := newRepo(t)
	outside := t.TempDir()
	files := []string{"t/x.html", "t/one/y.html", "t/one/two/z.html", "t/one/two/three/w.html"}
	for _, f := range files {
		testutil.WriteFile(t, outside, f, f)
	}
	r := start(t, root, fast())
	if err := os.Rename(filepath.Join(outside, "t"), filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range files {
		want = append(want, "moved/"+strings.TrimPrefix(f, "t/"))
	}
	r.expectExactly(t, root, want...)
	testutil.WriteFile(t, root, "moved/one/two/three/new.html", "n")
	r.expectExactly(t, root, "moved/one/two/three/new.html")
}

func TestDirectoryRename(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, "projects/old/sub/f.html", "f")
	testutil.WriteFile(t, root, "projects/old/g.html", "g")
	r := start(t, root, fast())
	dirs := r.w.Stats().WatchedDirs

	if err := os.Rename(filepath.Join(root, "projects/old"), filepath.Join(root, "projects/new")); err != nil {
		t.Fatal(err)
	}
	// Old path (the committer deletes what was under it) and every file at the new one.
	r.expectExactly(t, root, "projects/old", "projects/new/g.html", "projects/new/sub/f.html")
	if got := r.w.Stats().WatchedDirs; got != dirs {
		t.Fatalf("WatchedDirs = %d after rename, want %d (old watches dropped)", got, dirs)
	}
	// A write below the renamed directory is reported under its new name only.
	testutil.WriteFile(t, root, "projects/new/sub/h.html", "h")
	r.expectExactly(t, root, "projects/new/sub/h.html")
	testutil.WriteFile(t, root, "projects/new/sub/f.html", "f2")
	r.expectExactly(t, root, "projects/new/sub/f.html")
}

func TestDirectoryMovedOutAndDeleted(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, "areas/a/x.html", "x")
	testutil.WriteFile(t, root, "areas/a/deep/y.html", "y")
	testutil.WriteFile(t, root, "areas/b/z.html", "z")
	testutil.WriteFile(t, root, "areas/c.html", "c")
	r := start(t, root, fast())
	dirs := r.w.Stats().WatchedDirs

	if err := os.Remove(filepath.Join(root, "areas/c.html")); err != nil {
		t.Fatal(err)
	}
	r.expectExactly(t, root, "areas/c.html")

	if err := os.RemoveAll(filepath.Join(root, "areas/a")); err != nil {
		t.Fatal(err)
	}
	r.c.waitPaths(t, "areas/a")
	testutil.WaitFor(t, "watches of areas/a dropped", deadline, func() bool { return r.w.Stats().WatchedDirs == dirs-2 }, nil)

	if err := os.Rename(filepath.Join(root, "areas/b"), filepath.Join(t.TempDir(), "b")); err != nil {
		t.Fatal(err)
	}
	r.c.waitPaths(t, "areas/b")
	testutil.WaitFor(t, "watch of areas/b dropped", deadline, func() bool { return r.w.Stats().WatchedDirs == dirs-3 }, nil)
}

func TestAtomicSave(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, "f.html", "v1")
	r := start(t, root, fast())
	testutil.WriteFile(t, root, "f.html.tmp", "v2")
	if err := os.Rename(filepath.Join(root, "f.html.tmp"), filepath.Join(root, "f.html")); err != nil {
		t.Fatal(err)
	}
	r.expectExactly(t, root, "f.html")

	// A temp name nobody ignores is reported too (the committer finds it gone).
	testutil.WriteFile(t, root, ".f.html.x8Kq", "v3")
	if err := os.Rename(filepath.Join(root, ".f.html.x8Kq"), filepath.Join(root, "f.html")); err != nil {
		t.Fatal(err)
	}
	r.expectExactly(t, root, ".f.html.x8Kq", "f.html")
}

func TestVimStyleSave(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, "notes.html", "v1")
	r := start(t, root, fast())
	// vim with backupcopy=no: probe file 4913, rename the original to the backup, write a
	// new file, delete the backup. Swap file .notes.html.swp all along.
	testutil.WriteFile(t, root, ".notes.html.swp", "swap")
	testutil.WriteFile(t, root, "4913", "")
	os.Remove(filepath.Join(root, "4913"))
	if err := os.Rename(filepath.Join(root, "notes.html"), filepath.Join(root, "notes.html~")); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, root, "notes.html", "v2")
	os.Remove(filepath.Join(root, "notes.html~"))
	os.Remove(filepath.Join(root, ".notes.html.swp"))
	r.expectExactly(t, root, "notes.html")
}

func TestChmodOnlyIgnored(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, "f.html", "v1")
	r := start(t, root, fast())
	if err := os.Chmod(filepath.Join(root, "f.html"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, "f.html"), now, now); err != nil {
		t.Fatal(err)
	}
	r.expectExactly(t, root)
}

func TestGitDirAndLockNeverReported(t *testing.T) {
	root := newRepo(t)
	r := start(t, root, fast())
	testutil.WriteFile(t, root, ".git/memd/status.json", "{}")
	testutil.WriteFile(t, root, ".git/objects/ab/cdef", "blob")
	testutil.WriteFile(t, root, ".git/index.lock", "")
	os.Remove(filepath.Join(root, ".git/index.lock"))
	testutil.WriteFile(t, root, ".memory.lock", "pid: 1\n")
	os.Remove(filepath.Join(root, ".memory.lock"))
	// A nested repo's .git is not ours either.
	testutil.WriteFile(t, root, "resources/vendored/.git/HEAD", "ref: refs/heads/main\n")
	r.expectExactly(t, root)
	if n := r.w.Stats().Events; n == 0 {
		t.Fatal("no events counted")
	}
}

func TestIgnoredPatterns(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, ".gitignore", "*.log\nbuild/\n/top-only.html\n")
	testutil.WriteFile(t, root, "projects/p/.gitignore", "secret.html\n!keep.log\n")
	testutil.WriteFile(t, root, ".git/info/exclude", "local-*\n")
	opts := fast()
	opts.Ignore = []string{"*.bak"}
	r := start(t, root, opts)
	dirs := r.w.Stats().WatchedDirs

	for _, f := range []string{
		"a.log", "build/out.html", "build/deep/x.html", "top-only.html", "x.html.bak",
		"projects/p/secret.html", "projects/p/q/secret.html", "local-notes.html",
		"x.swp", "x.tmp", "x~", ".#x.html", "4913",
	} {
		testutil.WriteFile(t, root, f, "ignored")
	}
	for _, f := range []string{"projects/p/keep.log", "sub/top-only.html", "projects/p/public.html"} {
		testutil.WriteFile(t, root, f, "kept")
	}
	r.expectExactly(t, root, "projects/p/keep.log", "sub/top-only.html", "projects/p/public.html")
	// build/ is ignored, so it was not watched; projects/p/q and sub were.
	if got := r.w.Stats().WatchedDirs; got != dirs+2 {
		t.Fatalf("WatchedDirs = %d, want %d", got, dirs+2)
	}
}

func TestGitignoreChangeReloads(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, ".gitignore", "*.log\ndrafts/\n")
	testutil.WriteFile(t, root, "old.log", "was ignored")
	testutil.WriteFile(t, root, "drafts/d.html", "was ignored")
	r := start(t, root, fast())
	dirs := r.w.Stats().WatchedDirs

	// Un-ignore: the files the old rules hid are now dirty, and drafts/ is watched.
	testutil.WriteFile(t, root, ".gitignore", "")
	r.expectExactly(t, root, ".gitignore", "old.log", "drafts/d.html")
	if got := r.w.Stats().WatchedDirs; got != dirs+1 {
		t.Fatalf("WatchedDirs = %d, want %d", got, dirs+1)
	}
	testutil.WriteFile(t, root, "drafts/e.html", "e")
	r.expectExactly(t, root, "drafts/e.html")

	// Ignore again: drafts/ drops its watch; new drafts and logs are not reported.
	testutil.WriteFile(t, root, ".gitignore", "*.log\ndrafts/\n")
	r.expectExactly(t, root, ".gitignore")
	testutil.WriteFile(t, root, "drafts/f.html", "f")
	testutil.WriteFile(t, root, "new.log", "l")
	r.expectExactly(t, root)
	if got := r.w.Stats().WatchedDirs; got != dirs {
		t.Fatalf("WatchedDirs = %d, want %d", got, dirs)
	}
}

func TestNestedGitignoreMovedInWithTree(t *testing.T) {
	root := newRepo(t)
	outside := t.TempDir()
	testutil.WriteFile(t, outside, "t/.gitignore", "cache/\n")
	testutil.WriteFile(t, outside, "t/cache/c.html", "c")
	testutil.WriteFile(t, outside, "t/a.html", "a")
	r := start(t, root, fast())
	if err := os.Rename(filepath.Join(outside, "t"), filepath.Join(root, "t")); err != nil {
		t.Fatal(err)
	}
	r.expectExactly(t, root, "t/.gitignore", "t/a.html")
	testutil.WriteFile(t, root, "t/cache/d.html", "d")
	r.expectExactly(t, root)
}

func TestSetIgnore(t *testing.T) {
	root := newRepo(t)
	r := start(t, root, fast())
	ig, err := repofiles.New(root, []string{"*.draft"})
	if err != nil {
		t.Fatal(err)
	}
	r.w.SetIgnore(ig)
	testutil.WaitFor(t, "ignore reload", deadline, func() bool { return r.w.Ignorer() == ig }, nil)
	testutil.WriteFile(t, root, "x.draft", "d")
	r.expectExactly(t, root)
}

func TestBurstOf2000FilesNoneLost(t *testing.T) {
	root := newRepo(t)
	r := start(t, root, fast())
	var want []string
	for d := 0; d < 20; d++ {
		for f := 0; f < 100; f++ {
			rel := fmt.Sprintf("resources/d%02d/f%03d.html", d, f)
			want = append(want, rel)
			testutil.WriteFile(t, root, rel, rel)
		}
	}
	r.c.waitPaths(t, want...)
	if got := len(r.c.paths()); got != 2000 {
		t.Fatalf("reported %d paths, want 2000", got)
	}
	for _, b := range r.c.all() {
		if b.Rescan {
			t.Fatalf("unexpected rescan: %s", b.Reason)
		}
	}
	if n := len(r.c.all()); n > 200 {
		t.Fatalf("%d batches for one burst; debounce is not batching", n)
	}
}

func TestQuietAndMaxDelayWithFakeClock(t *testing.T) {
	root := newRepo(t)
	clock := newFakeClock()
	w, err := watcher.New(root, watcher.Options{Quiet: 2 * time.Second, MaxDelay: 30 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := runRaw(t, w)
	ticks := uint64(0)
	advance := func(d time.Duration) {
		t.Helper()
		before := clock.fired
		clock.Advance(d)
		ticks += uint64(clock.fired - before)
		testutil.WaitFor(t, "tick handled", deadline, func() bool { return w.TickCount() >= ticks }, nil)
	}
	noBatch := func(when string) {
		t.Helper()
		select {
		case b := <-r:
			t.Fatalf("%s: unexpected batch %+v", when, b)
		default:
		}
	}

	// Idle: no timer at all.
	if n := clock.pendingTimers(); n != 0 {
		t.Fatalf("%d timers armed while idle", n)
	}

	// Quiet: one change, batch exactly 2s later.
	put(t, root, "q.html", "q")
	testutil.WaitFor(t, "pending", deadline, func() bool { return w.Stats().Pending == 1 }, nil)
	advance(1900 * time.Millisecond)
	noBatch("1.9s after the change")
	advance(100 * time.Millisecond)
	b := <-r
	if !slices.Equal(b.Paths, []string{"q.html"}) || b.Rescan {
		t.Fatalf("batch %+v", b)
	}
	if n := clock.pendingTimers(); n != 0 {
		t.Fatalf("%d timers armed after the batch", n)
	}

	// Max delay: a change every second never goes quiet; the batch still comes at 30s.
	for i := 0; i < 30; i++ {
		put(t, root, fmt.Sprintf("e%02d.html", i), "e")
		testutil.WaitFor(t, "pending", deadline, func() bool { return w.Stats().Pending == i+1 }, nil)
		advance(time.Second)
		if i < 29 {
			noBatch(fmt.Sprintf("%ds into steady editing", i+1))
		}
	}
	b = <-r
	if len(b.Paths) != 30 {
		t.Fatalf("max-delay batch has %d paths, want 30: %v", len(b.Paths), b.Paths)
	}

	// Flush hands out what is pending at once.
	put(t, root, "flush.html", "f")
	testutil.WaitFor(t, "pending", deadline, func() bool { return w.Stats().Pending == 1 }, nil)
	w.Flush()
	b = <-r
	if !slices.Equal(b.Paths, []string{"flush.html"}) {
		t.Fatalf("flushed batch %+v", b)
	}
}

// runRaw runs w and returns its batch channel directly (no collector).
func runRaw(t *testing.T, w *watcher.Watcher) <-chan watcher.Batch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range w.Batches() {
		}
		<-done
	})
	return w.Batches()
}

func TestSteadyEditingEmitsWithinMaxDelay(t *testing.T) {
	// Real time: writes every 5ms (well under quiet) until a batch arrives. Only max_delay
	// can end the wait unless the machine stalls the writer for longer than quiet.
	root := newRepo(t)
	r := start(t, root, watcher.Options{Quiet: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond})
	stop := time.Now().Add(deadline)
	for i := 0; len(r.c.all()) == 0; i++ {
		if time.Now().After(stop) {
			t.Fatal("no batch during steady editing")
		}
		testutil.WriteFile(t, root, "steady.html", fmt.Sprint(i))
		time.Sleep(5 * time.Millisecond) // pacing the writer, not waiting for a result
	}
}

func TestShutdownHandsOutPending(t *testing.T) {
	root := newRepo(t)
	clock := newFakeClock() // never advanced: only shutdown can emit
	w, err := watcher.New(root, watcher.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	testutil.WaitFor(t, "alive", deadline, w.Alive, nil)
	put(t, root, "last.html", "x")
	testutil.WaitFor(t, "pending", deadline, func() bool { return w.Stats().Pending == 1 }, nil)
	w.Flush()
	cancel()
	var got []string
	for b := range w.Batches() {
		got = append(got, b.Paths...)
	}
	if !slices.Equal(got, []string{"last.html"}) {
		t.Fatalf("batches at shutdown: %q", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if w.Alive() {
		t.Fatal("Alive after Run returned")
	}
	if err := w.Run(ctx); err != watcher.ErrRunning {
		t.Fatalf("second Run: %v", err)
	}
}

func TestOverflowInjectedAsksForRescan(t *testing.T) {
	root := newRepo(t)
	clock := newFakeClock()
	w, err := watcher.New(root, watcher.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	r := runRaw(t, w)
	w.InjectError(fsnotify.ErrEventOverflow)
	testutil.WaitFor(t, "degraded", deadline, func() bool { return strings.Contains(w.Stats().Degraded, "overflow") }, nil)
	clock.Advance(watcher.DefaultQuiet)
	b := <-r
	if !b.Rescan || b.Reason != "inotify queue overflow" {
		t.Fatalf("batch %+v, want a rescan for the overflow", b)
	}
	if s := w.Stats(); s.Rescans != 1 || s.Degraded != "" {
		t.Fatalf("stats after the rescan batch: %+v", s)
	}
	// Any other error from fsnotify also asks for a rescan, naming it.
	w.InjectError(errors.New("read failed"))
	testutil.WaitFor(t, "pending rescan", deadline, func() bool { return clock.pendingTimers() > 0 }, nil)
	clock.Advance(watcher.DefaultQuiet)
	if b := <-r; !b.Rescan || !strings.Contains(b.Reason, "read failed") {
		t.Fatalf("batch %+v", b)
	}
}

// TestRealQueueOverflow floods the kernel queue while the reader is paused: a real
// IN_Q_OVERFLOW, then a rescan batch, and the directory made after the flood (its Create
// was lost) is watched by the resync.
func TestRealQueueOverflow(t *testing.T) {
	data, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Skip("no inotify here")
	}
	var max int
	fmt.Sscan(strings.TrimSpace(string(data)), &max)
	if max <= 0 || max > 40000 {
		t.Skipf("max_queued_events = %d: too many files to overflow it in a unit test", max)
	}
	root := newRepo(t)
	r := start(t, root, fast())
	dirs := r.w.Stats().WatchedDirs
	if err := os.Mkdir(filepath.Join(root, "flood"), 0o755); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "flood/ watched", deadline, func() bool { return r.w.Stats().WatchedDirs == dirs+1 }, nil)
	resume := r.w.PauseReader()
	// Each new file is two events (create, write): flood the kernel queue past its limit.
	n := max/2 + 3000
	for i := 0; i < n; i++ {
		testutil.WriteFile(t, root, fmt.Sprintf("flood/f%05d.html", i), "x")
	}
	// Made after the flood: its Create is lost, only the post-overflow resync watches it.
	testutil.WriteFile(t, root, "late/first.html", "1")
	resume()
	r.c.waitFor(t, "rescan batch or every file", func() bool {
		for _, b := range r.c.batches {
			if b.Rescan {
				return true
			}
		}
		return len(r.c.seen) == n+1
	})
	overflowed := false
	for _, b := range r.c.all() {
		if b.Rescan {
			overflowed = true
			if !strings.Contains(b.Reason, "overflow") {
				t.Fatalf("rescan reason %q", b.Reason)
			}
		}
	}
	if !overflowed {
		t.Fatalf("no overflow after %d events with max_queued_events %d", 2*n, max)
	}
	r.c.waitPaths(t, "late/first.html") // reported by the resync walk
	testutil.WriteFile(t, root, "late/second.html", "2")
	r.c.waitPaths(t, "late/second.html")
}

func TestWatchLimitFallsBackToScanning(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, "areas/deep/x.html", "x")
	testutil.WriteFile(t, root, "areas/deep/sub/y.html", "y")
	testutil.WriteFile(t, root, "areas/ok.html", "ok")
	clock := newFakeClock()
	limited := make(chan bool, 1)
	limited <- true
	isLimited := func() bool { v := <-limited; limited <- v; return v }
	opts := watcher.WithAddWatchHook(watcher.Options{Quiet: time.Second, MaxDelay: 5 * time.Second,
		ScanInterval: 10 * time.Second, Clock: clock},
		func(path string, add func(string) error) error {
			if isLimited() && strings.Contains(filepath.ToSlash(path), "areas/deep") {
				return syscall.ENOSPC
			}
			return add(path)
		})
	w, err := watcher.New(root, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := w.Stats()
	if !strings.Contains(s.Degraded, "watch limit reached") || !strings.Contains(s.Degraded, "2 directories") {
		t.Fatalf("Degraded = %q", s.Degraded)
	}
	r := runRaw(t, w)
	clock.Advance(time.Second)
	b := <-r
	if !b.Rescan || !strings.Contains(b.Reason, "watch limit reached") {
		t.Fatalf("first batch %+v, want a rescan naming the watch limit", b)
	}

	// Changes in the unwatched directories are found by the scan.
	testutil.WriteFile(t, root, "areas/deep/x.html", "x changed size")
	testutil.WriteFile(t, root, "areas/deep/sub/new.html", "n")
	os.Remove(filepath.Join(root, "areas/deep/sub/y.html"))
	testutil.WriteFile(t, root, "areas/deep/newdir/z.html", "z")
	clock.Advance(10 * time.Second)
	testutil.WaitFor(t, "scan found the changes", deadline, func() bool { return w.Stats().Pending >= 4 }, nil)
	clock.Advance(time.Second)
	b = <-r
	want := []string{"areas/deep/newdir/z.html", "areas/deep/sub/new.html", "areas/deep/sub/y.html", "areas/deep/x.html"}
	if !slices.Equal(b.Paths, want) {
		t.Fatalf("scan batch %q, want %q", b.Paths, want)
	}

	// Watches free up: the next scan watches them again and the status clears.
	<-limited
	limited <- false
	dirs := w.Stats().WatchedDirs
	clock.Advance(10 * time.Second)
	testutil.WaitFor(t, "watched again", deadline, func() bool { return w.Stats().Degraded == "" }, nil)
	if got := w.Stats().WatchedDirs; got != dirs+3 {
		t.Fatalf("WatchedDirs = %d, want %d", got, dirs+3)
	}
	if n := clock.pendingTimers(); n != 0 {
		t.Fatalf("%d timers still armed after recovery", n)
	}
	testutil.WriteFile(t, root, "areas/deep/sub/evented.html", "e")
	testutil.WaitFor(t, "event seen", deadline, func() bool { return w.Stats().Pending == 1 }, nil)
}

func TestNewErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := watcher.New(missing, watcher.Options{}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("New(missing) = %v, want an error naming %s", err, missing)
	}
	file := filepath.Join(t.TempDir(), "file")
	testutil.WriteFile(t, filepath.Dir(file), "file", "x")
	if _, err := watcher.New(file, watcher.Options{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("New(file) = %v", err)
	}
	if _, err := watcher.New(t.TempDir(), watcher.Options{Ignore: []string{"a["}}); err == nil || !strings.Contains(err.Error(), `"a["`) {
		t.Fatalf("New(bad pattern) = %v", err)
	}
}

func TestBufferedAndCloseWithoutRun(t *testing.T) {
	root := newRepo(t)
	opts := fast()
	opts.Buffer = 4096
	r := start(t, root, opts)
	testutil.WriteFile(t, root, "projects/x/tasks/t.html", "t")
	r.expectExactly(t, root, "projects/x/tasks/t.html")

	w, err := watcher.New(root, watcher.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Alive() {
		t.Fatal("Alive before Run")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLargeRepo: 100,000 files in 2,000 directories are watched, a deep change and a
// directory rename are seen, nothing else is reported. MEMD_LONG=1 (writes 100k files).
func TestLargeRepo(t *testing.T) {
	if os.Getenv("MEMD_LONG") == "" {
		t.Skip("set MEMD_LONG=1")
	}
	root := newRepo(t)
	for d := 0; d < 2000; d++ {
		for f := 0; f < 50; f++ {
			testutil.WriteFile(t, root, fmt.Sprintf("archive/%d/m%02d/d%04d/%02d.html", 2000+d%20, d%12, d, f), "x")
		}
	}
	r := start(t, root, fast())
	if got := r.w.Stats().WatchedDirs; got < 2000 {
		t.Fatalf("WatchedDirs = %d", got)
	}
	testutil.WriteFile(t, root, "archive/2007/m07/d1987/49.html", "changed")
	r.expectExactly(t, root, "archive/2007/m07/d1987/49.html")
	if err := os.Rename(filepath.Join(root, "archive/2000/m00/d0000"), filepath.Join(root, "archive/2000/m00/moved")); err != nil {
		t.Fatal(err)
	}
	want := []string{"archive/2000/m00/d0000"}
	for f := 0; f < 50; f++ {
		want = append(want, fmt.Sprintf("archive/2000/m00/moved/%02d.html", f))
	}
	r.expectExactly(t, root, want...)
}
