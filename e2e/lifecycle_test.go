package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// Changes made while memd is stopped (the watcher cannot see them: the same situation as
// lost events) are found by the reconcile at start.
func TestReconcileAtStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	w.write("areas/keep.html", "keep v1\n")
	w.write("areas/drop.html", "drop\n")
	w.write("areas/dir/a.html", "a\n")
	w.checkClean(d)
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}

	w.write("areas/keep.html", "keep v2\n")
	must(t, os.Remove(w.path("areas/drop.html")))
	must(t, os.Rename(w.path("areas/dir"), w.path("areas/dir2")))
	w.write("projects/offline/new.html", "written while memd was down\n")
	must(t, os.Symlink("../areas/keep.html", w.path("projects/offline/link.html")))
	if diff, err := w.treeDiff(); err != nil || diff == "" {
		t.Fatalf("the probe must see the offline changes: %q, %v", diff, err)
	}

	d = w.start()
	w.checkClean(d)
	if !strings.Contains(d.Logs(), "reconcile found changes") {
		t.Fatalf("no reconcile at start%s", d.Describe())
	}
	if got, _ := w.committed("areas/keep.html"); got != "keep v2\n" {
		t.Fatalf("HEAD:areas/keep.html = %q", got)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// A second `memd run` on the same repo refuses to start; the first one keeps working.
func TestSecondRunRefuses(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	second := w.spawn()
	code := second.WaitExit()
	if code != 1 {
		t.Fatalf("second memd run: exit %d, want 1%s", code, second.Describe())
	}
	if !strings.Contains(second.Logs(), "already running") {
		t.Fatalf("second memd run does not say it is already running:\n%s", second.Logs())
	}
	if !strings.Contains(second.Logs(), fmt.Sprint(d.PID())) {
		t.Fatalf("second memd run does not name the running pid %d:\n%s", d.PID(), second.Logs())
	}
	if d.HasExited() {
		t.Fatalf("the first memd stopped%s", d.Describe())
	}
	if code, body, err := d.Get("/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz of the first memd: %d %v %s%s", code, err, body, d.Describe())
	}
	w.write("areas/after.html", "still committing\n")
	w.checkClean(d)
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	// The claim dies with the process: a new run starts.
	d = w.start()
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// SIGTERM commits what is pending and exits 0. The quiet window is long, so the only way the
// change can reach HEAD is the shutdown commit.
func TestSIGTERMCommitsPending(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, `watch: {quiet: 1m, max_delay: 5m}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
`)
	d := w.start()
	before := w.head()
	watches := inotifyWatches(d.PID())
	if watches <= 0 {
		t.Skipf("cannot count inotify watches of pid %d", d.PID())
	}
	// A directory made elsewhere and moved in: one event, and the watcher's new watch on it
	// (visible in /proc) shows the reader has taken the event in, so SIGTERM cannot beat it.
	staging := filepath.Join(w.home, "staging")
	must(t, os.MkdirAll(filepath.Join(staging, "deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(staging, "deep", "pending.html"), []byte("pending\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(staging, "top.html"), []byte("top\n"), 0o644))
	must(t, os.Rename(staging, w.path("areas/moved-in")))
	testutil.WaitFor(t, "the watcher to watch the moved-in directory", commitTimeout, func() bool {
		return inotifyWatches(d.PID()) >= watches+2
	}, d.Describe)
	if h := w.head(); h != before {
		t.Fatalf("committed before SIGTERM with a 1m quiet window: %s", h)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d, want 0%s", code, d.Describe())
	}
	if got, ok := w.committed("areas/moved-in/deep/pending.html"); !ok || got != "pending\n" {
		t.Fatalf("pending change not committed at SIGTERM: %q, %v%s", got, ok, d.Describe())
	}
	w.checkClean(d)
	if _, err := os.Stat(filepath.Join(w.repo, ".git", "memd", "memd.pid")); !os.IsNotExist(err) {
		t.Fatalf("pid file left after a clean stop: %v", err)
	}
}

// SIGKILL in the middle of a burst, three times, with the writer going on while memd is
// down; after the last restart every file's final content is in HEAD.
func TestSIGKILLMidBurstThenRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()

	const files, rounds = 600, 4
	var written atomic.Int64 // writes done so far
	writerDone := make(chan error, 1)
	var finished atomic.Bool
	go func() {
		defer finished.Store(true)
		// Each round rewrites every file; a directory goes away mid-way so deletes are in
		// flight too. One write every 2 ms stretches the burst over ~5 s, so the quiet
		// window never closes and memd commits on max_delay and at each restart.
		for r := range rounds {
			for i := range files {
				if r >= 2 && i%30 == 7 {
					continue // d07 was removed after round 1 and stays gone
				}
				p := filepath.Join(w.repo, "areas", "kill", fmt.Sprintf("d%02d", i%30), fmt.Sprintf("f%03d.html", i))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					writerDone <- err
					return
				}
				if err := os.WriteFile(p, fmt.Appendf(nil, "round %d file %d\n", r, i), 0o644); err != nil {
					writerDone <- err
					return
				}
				written.Add(1)
				time.Sleep(2 * time.Millisecond) // the writer's pace
			}
			if r == 1 {
				if err := os.RemoveAll(filepath.Join(w.repo, "areas", "kill", "d07")); err != nil {
					writerDone <- err
					return
				}
			}
		}
		writerDone <- nil
	}()

	total := int64(files * rounds)
	midBurst := 0
	for k := 1; k <= 3; k++ {
		// Kill once memd has committed part of the burst since it started and the writer is
		// past k/4 of it (or, on a very slow machine, once the writer is done).
		from := w.head()
		mark := total * int64(k) / 4
		testutil.WaitFor(t, fmt.Sprintf("kill point %d", k), commitTimeout, func() bool {
			return finished.Load() || (written.Load() >= mark && w.head() != from)
		}, d.Describe)
		if !finished.Load() {
			midBurst++
		}
		if code := d.Kill(); code != 128+9 {
			t.Fatalf("kill %d: exit %d, want SIGKILL", k, code)
		}
		d = w.start()
	}
	t.Logf("%d of 3 kills landed mid-burst", midBurst)
	if midBurst == 0 {
		t.Errorf("no kill landed while the writer was writing: the test did not test a kill mid-burst")
	}
	if err := <-writerDone; err != nil {
		t.Fatal(err)
	}
	w.checkClean(d)
	// Spell the promise out file by file: what is on disk is what HEAD holds.
	disk := map[string]string{}
	err := filepath.WalkDir(filepath.Join(w.repo, "areas", "kill"), func(p string, de os.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(w.repo, p)
		b, err := os.ReadFile(p)
		disk[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != files-files/30 {
		t.Fatalf("%d files on disk, want %d", len(disk), files-files/30)
	}
	paths := make([]string, 0, len(disk))
	for p := range disk {
		paths = append(paths, p)
	}
	head := w.committedMany(paths)
	for p, want := range disk {
		if got, ok := head[p]; !ok || got != want {
			t.Fatalf("HEAD:%s = %q (%v), disk %q", p, got, ok, want)
		}
		if !strings.HasPrefix(want, fmt.Sprintf("round %d ", rounds-1)) {
			t.Fatalf("%s on disk is %q, not from the last round", p, want)
		}
	}
	if out := strings.TrimSpace(w.git("ls-tree", "-r", "--name-only", "HEAD", "--", "areas/kill/d07/")); out != "" {
		t.Fatalf("the removed directory is still in HEAD: %q", out)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// A writer holding .memory.lock delays the commit until it lets go, and the file it wrote
// under the lock is committed only in its final state.
func TestWriterLockDelaysCommit(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, baseConfig+"log: {level: debug}\n")
	d := w.start()
	w.write("areas/locked.html", "before the lock\n")
	w.checkClean(d)
	before := w.head()

	release := w.writerLock()
	w.write("areas/locked.html", "draft 1\n")
	// memd has tried to commit and is waiting for the writer.
	waitLog(t, d, "writer lock held, waiting")
	w.write("areas/locked.html", "draft 2\n")
	w.write("areas/other.html", "also under the lock\n")
	w.write("areas/locked.html", "final\n")
	if h := w.head(); h != before {
		t.Fatalf("committed while the writer held the lock: %s", h)
	}
	release()
	w.checkClean(d)
	if got, _ := w.committed("areas/locked.html"); got != "final\n" {
		t.Fatalf("HEAD:areas/locked.html = %q", got)
	}
	for _, h := range w.commitsTouching("areas/locked.html") {
		got, _ := w.gitRun(nil, "cat-file", "-p", h+":areas/locked.html")
		if got != "final\n" && got != "before the lock\n" {
			t.Fatalf("commit %s holds a state written under the lock: %q", h[:10], got)
		}
	}
	if _, err := os.Stat(w.path(".memory.lock")); !os.IsNotExist(err) {
		t.Fatalf("memd left the writer lock behind: %v", err)
	}
	w.neverCommitted(".memory.lock")
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// A writer that holds the lock past memd's lock.timeout: memd's commit gives up, nothing is
// lost, and the change is committed after the writer lets go.
func TestWriterLockOutlastsTimeout(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, baseConfig+"lock: {timeout: 300ms}\n")
	d := w.start()
	before := w.head()
	release := w.writerLock()
	w.write("areas/slow-writer.html", "under a long lock\n")
	waitLog(t, d, "commit failed")
	if h := w.head(); h != before {
		t.Fatalf("committed while the writer held the lock: %s", h)
	}
	release()
	w.checkClean(d)
	if got, _ := w.committed("areas/slow-writer.html"); got != "under a long lock\n" {
		t.Fatalf("HEAD:areas/slow-writer.html = %q", got)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// A .git/index.lock left by a dead process is cleared at start, and the index then follows
// HEAD again.
func TestStaleIndexLockClearedAtStart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	lock := filepath.Join(w.repo, ".git", "index.lock")
	must(t, os.WriteFile(lock, []byte("DIRC half-written by a killed git"), 0o644))
	old := time.Now().Add(-time.Minute)
	must(t, os.Chtimes(lock, old, old))

	d := w.start()
	testutil.WaitFor(t, ".git/index.lock to be removed", commitTimeout, func() bool {
		_, err := os.Stat(lock)
		return os.IsNotExist(err)
	}, d.Describe)
	w.write("areas/after-lock.html", "after\n")
	w.checkClean(d)
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// The HTTP endpoints of the running daemon report what it did.
func TestMetricsAfterCommits(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	if code, body, err := d.Get("/healthz"); err != nil || code != 200 {
		t.Fatalf("/healthz: %d %v %s%s", code, err, body, d.Describe())
	}
	for i := range 3 {
		from := w.head()
		w.write(fmt.Sprintf("areas/m%d.html", i), "m\n")
		w.waitHeadMoves(d, from)
	}
	w.checkClean(d)
	// The metrics snapshot is published after each job: wait for it to count all three.
	var n float64
	testutil.WaitFor(t, "memd_commits_total{kind=\"change\"} >= 3", commitTimeout, func() bool {
		n, _ = d.Metric(`memd_commits_total{kind="change"}`)
		return n >= 3
	}, func() string { return fmt.Sprintf("got %v", n) })
	if n != 3 {
		t.Fatalf("memd_commits_total{kind=\"change\"} = %v, want 3", n)
	}
	if c, ok := d.Metric("memd_commit_duration_seconds_count"); !ok || c != 3 {
		t.Fatalf("memd_commit_duration_seconds_count = %v, %v", c, ok)
	}
	if code, body, err := d.Get("/status.json"); err != nil || code != 200 || !strings.Contains(body, `"last_commit":{`) || !strings.Contains(body, `"pending":0`) {
		t.Fatalf("/status.json: %d %v %s%s", code, err, body, d.Describe())
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// A write made just before SIGTERM (no time for the watcher to read its event) is still
// committed: nothing written before the signal waits for the next start.
func TestSIGTERMRightAfterWrite(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, `watch: {quiet: 1m, max_delay: 5m}
http: {listen: ""}
sleep: {catch_up: false}
`)
	for i := range 12 {
		d := w.start()
		p := fmt.Sprintf("areas/last-words-%02d.html", i)
		w.write(p, fmt.Sprintf("written %d\n", i))
		if i%3 == 1 {
			must(t, os.Remove(w.path(fmt.Sprintf("areas/last-words-%02d.html", i-1))))
		}
		if code := d.Stop(); code != 0 {
			t.Fatalf("SIGTERM %d: exit %d%s", i, code, d.Describe())
		}
		if got, ok := w.committed(p); !ok || got != fmt.Sprintf("written %d\n", i) {
			t.Fatalf("round %d: write before SIGTERM not committed at stop: %q, %v%s", i, got, ok, d.Describe())
		}
		if diff, err := w.treeDiff(); err != nil || diff != "" {
			t.Fatalf("round %d: HEAD differs from disk after stop: %q %v%s", i, diff, err, d.Describe())
		}
	}
}

// A change the watcher cannot see — a write through a hard link outside the repo, which
// inotify reports to the other directory only — is committed by the periodic reconcile.
func TestPeriodicReconcileCatchesUnseenWrite(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, `watch: {quiet: 200ms, max_delay: 2s, reconcile: 1s}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
`)
	d := w.start()
	w.write("areas/linked.html", "v1\n")
	w.checkClean(d)
	outside := filepath.Join(w.home, "outside-link.html")
	if err := os.Link(w.path("areas/linked.html"), outside); err != nil {
		t.Skipf("hard links not supported here: %v", err)
	}
	logBefore := len(d.Logs())
	f, err := os.OpenFile(outside, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	_, err = f.WriteString("v2 through the outside link\n")
	must(t, err)
	must(t, f.Close())
	w.checkClean(d)
	if got, _ := w.committed("areas/linked.html"); got != "v2 through the outside link\n" {
		t.Fatalf("HEAD:areas/linked.html = %q", got)
	}
	if !strings.Contains(d.Logs()[logBefore:], "reconcile found changes") {
		t.Fatalf("committed without a reconcile: the watcher saw the write, so this test tests nothing%s", d.Describe())
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// A real inotify queue overflow: the daemon is stopped (SIGSTOP) so its reader cannot drain
// the kernel queue (max_queued_events, 16384 by default, per inotify instance) while a writer
// makes far more events than that; on SIGCONT the watcher learns events were lost and memd
// reconciles. Files whose events were dropped (a new one, a deleted one) are committed right.
func TestQueueOverflowRescan(t *testing.T) {
	t.Parallel()
	limit := 16384
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events"); err == nil {
		_, _ = fmt.Sscan(string(b), &limit)
	}
	if limit > 1<<20 {
		t.Skipf("max_queued_events is %d: too many events to overflow it here", limit)
	}
	w := newWorld(t)
	d := w.start()
	const nf = 4
	for i := range nf {
		w.write(fmt.Sprintf("resources/flood/f%d.html", i), "start\n")
	}
	w.write("resources/flood/doomed.html", "doomed\n")
	w.checkClean(d)

	must(t, d.Signal(syscall.SIGSTOP))
	stopped := true
	defer func() {
		if stopped {
			_ = d.Signal(syscall.SIGCONT)
		}
	}()
	// Round-robin over a few files: the kernel merges an event only with an identical one at
	// the tail of the queue, so every write queues at least one event; 2x the limit overflows.
	writes := 2 * limit
	for i := range writes {
		must(t, os.WriteFile(w.path(fmt.Sprintf("resources/flood/f%d.html", i%nf)), fmt.Appendf(nil, "write %d\n", i), 0o644))
	}
	// Their events fall off the full queue: only a reconcile can find these two.
	w.write("resources/flood/late.html", "late\n")
	must(t, os.Remove(w.path("resources/flood/doomed.html")))
	logBefore := len(d.Logs())
	must(t, d.Signal(syscall.SIGCONT))
	stopped = false

	waitLog(t, d, "watcher asked for a full rescan")
	w.checkClean(d)
	if !strings.Contains(d.Logs()[logBefore:], "inotify queue overflow") {
		t.Fatalf("the queue did not overflow: the test tested nothing%s", d.Describe())
	}
	if got, _ := w.committed("resources/flood/late.html"); got != "late\n" {
		t.Fatalf("HEAD:resources/flood/late.html = %q", got)
	}
	if _, ok := w.committed("resources/flood/doomed.html"); ok {
		t.Fatal("doomed.html deleted during the overflow is still in HEAD")
	}
	for i := range nf {
		last := writes - nf + i
		if got, _ := w.committed(fmt.Sprintf("resources/flood/f%d.html", i)); got != fmt.Sprintf("write %d\n", last) {
			t.Fatalf("HEAD:f%d.html = %q, want write %d", i, got, last)
		}
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}
