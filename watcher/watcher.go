// Package watcher watches a memory repo recursively with fsnotify and turns the events
// into debounced batches of dirty repo-relative paths.
//
// One reader goroutine owns the watch state: it adds a watch for every new directory and
// then walks it (so a tree created or moved in with files already in it is fully seen),
// drops the watches of a directory that is removed or renamed, skips .git, ignored paths
// and CHMOD-only events, and fills the dirty set. Run's goroutine turns the dirty set into
// batches: after Quiet without a change, at the latest MaxDelay after the first one. Timers
// only run while something is pending, so an idle watcher costs nothing.
//
// When events are lost (queue overflow) or a directory cannot be watched (inotify watch
// limit, kqueue out of file descriptors) the next batch has Rescan set: the caller does a
// full reconcile. Directories that cannot be watched are scanned periodically instead and
// Stats().Degraded says so.
package watcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/memd-dev/memd/internal/repofiles"
)

// Defaults for the zero Options fields.
const (
	DefaultQuiet        = 2 * time.Second
	DefaultMaxDelay     = 30 * time.Second
	DefaultScanInterval = 15 * time.Second
	// shutdownGrace bounds how long Run waits, after ctx is done, for the consumer to take
	// the last batch.
	shutdownGrace = 5 * time.Second
)

// ErrRunning is returned by a second Run call.
var ErrRunning = errors.New("watcher: Run already called")

// Options configure a Watcher. The zero value is usable.
type Options struct {
	Quiet, MaxDelay time.Duration // defaults 2s, 30s when zero
	Ignore          []string      // extra gitignore-style patterns (config watch.ignore)
	Buffer          int           // fsnotify Events channel buffer; 0 = unbuffered (fsnotify's default)
	Logger          *slog.Logger  // nil = discard
	Clock           Clock         // nil = real time
	// Ignorer, when set, is the rules to start with (the agent's, built once per config
	// load and shared with the committer); Ignore is then not read. nil: New builds them.
	Ignorer *repofiles.Ignorer
	// ScanInterval is how often directories that could not be watched are scanned
	// (default 15s). The scan timer only runs while such directories exist.
	ScanInterval time.Duration

	addWatch func(path string, add func(string) error) error // test hook around fsnotify Add
}

// Batch is a set of paths that changed and settled.
type Batch struct {
	// Paths are repo-relative, '/'-separated, sorted and deduplicated. A removed or
	// renamed-away directory is reported as its own path, so the committer deletes
	// everything under it.
	Paths []string
	// Rescan: events were lost or a directory is not watched; do a full reconcile.
	Rescan bool
	// Reason says why a rescan was asked, for the status.
	Reason string
}

// Stats are counters and gauges for metrics and the status.
type Stats struct {
	WatchedDirs     int
	Events, Rescans uint64
	Pending         int
	Degraded        string // non-empty while the watcher cannot see everything
}

// dirState is one directory the watcher knows (watched, or scanned as a fallback).
type dirState struct {
	watched  bool
	children map[string]struct{} // rel of known child directories
	snap     map[string]stamp    // files, for fallback scanning of an unwatched dir
}

type stamp struct {
	size    int64
	modNano int64
	mode    os.FileMode
}

// Watcher watches one repo. Create it with New, then call Run once.
type Watcher struct {
	root     string // absolute, clean
	quiet    time.Duration
	maxDelay time.Duration
	scanIvl  time.Duration
	log      *slog.Logger
	clock    Clock
	fw       *fsnotify.Watcher
	hook     func(string, func(string) error) error

	ign atomic.Pointer[repofiles.Ignorer]

	// Reader-owned: touched only by New (before Run) and the reader goroutine.
	dirs      map[string]*dirState
	unwatched int
	watchErr  string // first error that left a directory unwatched
	scanTimer Timer

	nWatched  atomic.Int64
	events    atomic.Uint64
	rescans   atomic.Uint64
	alive     atomic.Bool
	started   atomic.Bool
	readyN    atomic.Int64
	tickCount atomic.Uint64 // debounce ticks handled (tests wait on it)

	mu         sync.Mutex // guards the dirty set and the debounce state below
	pending    map[string]struct{}
	rescan     bool
	reason     string
	firstAt    time.Time
	lastAt     time.Time
	timer      Timer
	timerArmed bool
	degraded   string // watch-limit fallback in force
	overflow   string // lost events not yet handed out as a rescan batch

	tick     chan struct{} // debounce timer → Run
	flushReq chan struct{}
	scanTick chan struct{} // fallback scan timer → reader
	ctl      chan func()   // work for the reader goroutine (SetIgnore, test hooks)
	done     chan struct{} // closed when Run returns
	out      chan Batch
}

// New watches root recursively, skipping .git and ignored directories. Directories that
// cannot be watched are scanned periodically instead, and the first batch asks for a
// rescan. Events are queued from here on; Run delivers them.
func New(root string, opts Options) (*Watcher, error) {
	abs, err := repofiles.AbsRoot(root)
	if err != nil {
		return nil, err
	}
	w := &Watcher{
		root:     abs,
		quiet:    opts.Quiet,
		maxDelay: opts.MaxDelay,
		scanIvl:  opts.ScanInterval,
		log:      opts.Logger,
		clock:    opts.Clock,
		hook:     opts.addWatch,
		dirs:     map[string]*dirState{},
		pending:  map[string]struct{}{},
		tick:     make(chan struct{}, 1),
		flushReq: make(chan struct{}, 1),
		scanTick: make(chan struct{}, 1),
		ctl:      make(chan func(), 8),
		done:     make(chan struct{}),
		out:      make(chan Batch, 1),
	}
	if w.quiet <= 0 {
		w.quiet = DefaultQuiet
	}
	if w.maxDelay <= 0 {
		w.maxDelay = DefaultMaxDelay
	}
	if w.maxDelay < w.quiet {
		w.maxDelay = w.quiet
	}
	if w.scanIvl <= 0 {
		w.scanIvl = DefaultScanInterval
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.clock == nil {
		w.clock = realClock{}
	}
	raiseOpenFileLimit(w.log)

	if opts.Buffer > 0 {
		w.fw, err = fsnotify.NewBufferedWatcher(uint(opts.Buffer))
	} else {
		w.fw, err = fsnotify.NewWatcher()
	}
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", abs, err)
	}

	// One walk adds the watches (and, without prebuilt rules, reads the .gitignore files).
	funcs := repofiles.Funcs{Dir: w.watchDir, File: w.snapFile, Fail: w.listFailed}
	ig := opts.Ignorer
	if ig != nil {
		err = repofiles.Walk(abs, "", ig.Skip, funcs)
	} else {
		ig, err = repofiles.Build(abs, opts.Ignore, funcs)
	}
	if err == nil {
		if st := w.dirs[""]; st == nil || !st.watched {
			err = fmt.Errorf("cannot watch the repo root: %s", w.watchErr)
		}
	}
	if err != nil {
		w.fw.Close()
		return nil, fmt.Errorf("watch %s: %w", abs, err)
	}
	w.ign.Store(ig)
	w.log.Debug("watching", "root", abs, "dirs", w.nWatched.Load(), "gitignores", ig.Gitignores())
	return w, nil
}

// Batches delivers the batches; it is closed when Run returns.
func (w *Watcher) Batches() <-chan Batch { return w.out }

// Alive reports whether the reader goroutine is running (for /healthz).
func (w *Watcher) Alive() bool { return w.alive.Load() }

// Close releases the watches of a Watcher whose Run was never called. Run closes them
// itself on return.
func (w *Watcher) Close() error { return w.fw.Close() }

// Flush asks Run to emit what is pending now, without waiting for the quiet period. It
// never blocks. At shutdown Run also hands out what is pending before closing Batches.
func (w *Watcher) Flush() {
	select {
	case w.flushReq <- struct{}{}:
	default:
	}
}

// SetIgnore replaces the ignore rules (a config reload: the agent builds them once and
// hands the same rules to the committer). Ignorer returns them from here on; the reader
// goroutine then brings the watches in line (it may block briefly if called many times
// before Run starts): files the old rules hid and the new ones do not are reported.
func (w *Watcher) SetIgnore(ig *repofiles.Ignorer) {
	old := w.ign.Swap(ig)
	w.onReader(func() {
		w.log.Info("ignore rules replaced", "gitignores", ig.Gitignores())
		w.resync(old)
	})
}

// Ignorer returns the ignore rules the watcher currently applies.
// A .gitignore change replaces them; the agent adopts the new ones for its committer.
func (w *Watcher) Ignorer() *repofiles.Ignorer { return w.ign.Load() }

// Stats returns a snapshot of the counters.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	pending := len(w.pending)
	deg := w.degraded
	if deg == "" {
		deg = w.overflow
	}
	w.mu.Unlock()
	return Stats{
		WatchedDirs: int(w.nWatched.Load()),
		Events:      w.events.Load(),
		Rescans:     w.rescans.Load(),
		Pending:     pending + int(w.readyN.Load()),
		Degraded:    deg,
	}
}

// onReader runs f on the reader goroutine (before Run starts it is queued).
func (w *Watcher) onReader(f func()) {
	select {
	case w.ctl <- f:
	case <-w.done:
	}
}

// Run delivers batches until ctx is done, then stops watching, hands out what is still
// pending (waiting a few seconds for the consumer) and closes Batches.
func (w *Watcher) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer close(w.out)
	defer close(w.done)

	readerDone := make(chan struct{})
	w.alive.Store(true)
	go func() {
		defer close(readerDone)
		defer w.alive.Store(false)
		w.read()
	}()

	w.mu.Lock()
	if !w.emptyLocked() {
		w.armLocked(w.quiet)
	}
	w.mu.Unlock()

	var ready *Batch
	var runErr error
loop:
	for {
		var out chan<- Batch
		var b Batch
		if ready != nil {
			out, b = w.out, *ready
		}
		select {
		case <-ctx.Done():
			break loop
		case <-readerDone:
			runErr = errors.New("watcher: event stream closed unexpectedly")
			w.log.Error("watcher stopped", "err", runErr)
			break loop
		case out <- b:
			ready = nil
			w.readyN.Store(0)
		case <-w.tick:
			if nb, ok := w.due(); ok {
				ready = w.offer(merge(ready, nb))
			}
			w.tickCount.Add(1)
		case <-w.flushReq:
			if nb, ok := w.take(); ok {
				ready = w.offer(merge(ready, nb))
			}
		}
	}

	// Stop the reader first so nothing is added after the last take.
	_ = w.fw.Close()
	<-readerDone
	w.mu.Lock()
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.scanTimer != nil {
		w.scanTimer.Stop()
	}
	w.mu.Unlock()
	if nb, ok := w.take(); ok {
		ready = merge(ready, nb)
	}
	if ready != nil {
		t := time.NewTimer(shutdownGrace)
		select {
		case w.out <- *ready:
			w.readyN.Store(0)
		case <-t.C:
			w.log.Warn("batch not taken at shutdown; the next reconcile picks it up",
				"paths", len(ready.Paths))
		}
		t.Stop()
	}
	return runErr
}

// offer hands b to the consumer if it has room and returns what is still undelivered.
func (w *Watcher) offer(b *Batch) *Batch {
	select {
	case w.out <- *b:
		w.readyN.Store(0)
		return nil
	default:
		w.readyN.Store(int64(len(b.Paths)))
		return b
	}
}

// due takes the pending batch if its time has come, else re-arms the timer for when it
// will. Quiet counts from the last change, MaxDelay from the first.
func (w *Watcher) due() (Batch, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timerArmed = false
	if w.emptyLocked() {
		return Batch{}, false
	}
	now := w.clock.Now()
	at := w.lastAt.Add(w.quiet)
	if limit := w.firstAt.Add(w.maxDelay); limit.Before(at) {
		at = limit
	}
	if now.Before(at) {
		w.armLocked(at.Sub(now))
		return Batch{}, false
	}
	return w.takeLocked(), true
}

func (w *Watcher) take() (Batch, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.emptyLocked() {
		return Batch{}, false
	}
	return w.takeLocked(), true
}

func (w *Watcher) takeLocked() Batch {
	b := Batch{Paths: make([]string, 0, len(w.pending)), Rescan: w.rescan, Reason: w.reason}
	for p := range w.pending {
		b.Paths = append(b.Paths, p)
	}
	sort.Strings(b.Paths)
	if b.Rescan {
		w.rescans.Add(1)
	}
	w.pending = map[string]struct{}{}
	w.rescan, w.reason, w.overflow = false, "", ""
	return b
}

func (w *Watcher) emptyLocked() bool { return len(w.pending) == 0 && !w.rescan }

// armLocked starts the debounce timer unless one is outstanding; a tick that comes
// early just re-arms for the remaining time, so events never reset timers.
func (w *Watcher) armLocked(d time.Duration) {
	if w.timerArmed {
		return
	}
	w.timerArmed = true
	w.timer = w.clock.AfterFunc(d, func() {
		select {
		case w.tick <- struct{}{}:
		default:
		}
	})
}

// noteLocked records a change at now for the debounce.
func (w *Watcher) noteLocked() {
	now := w.clock.Now()
	if w.emptyLocked() {
		w.firstAt = now
	}
	w.lastAt = now
	w.armLocked(w.quiet)
}

func (w *Watcher) markDirty(rel string) {
	w.mu.Lock()
	w.noteLocked()
	w.pending[rel] = struct{}{}
	w.mu.Unlock()
}

func (w *Watcher) markRescan(reason string) {
	w.mu.Lock()
	w.noteLocked()
	w.rescan = true
	switch {
	case w.reason == "":
		w.reason = reason
	case !strings.Contains(w.reason, reason):
		w.reason += "; " + reason
	}
	w.mu.Unlock()
}

// merge adds b to ready (the batch the consumer has not taken yet).
func merge(ready *Batch, b Batch) *Batch {
	if ready == nil {
		return &b
	}
	seen := make(map[string]struct{}, len(ready.Paths)+len(b.Paths))
	var paths []string
	for _, ps := range [][]string{ready.Paths, b.Paths} {
		for _, p := range ps {
			if _, ok := seen[p]; !ok {
				seen[p] = struct{}{}
				paths = append(paths, p)
			}
		}
	}
	sort.Strings(paths)
	m := Batch{Paths: paths, Rescan: ready.Rescan || b.Rescan, Reason: ready.Reason}
	if b.Reason != "" && b.Reason != m.Reason {
		if m.Reason != "" {
			m.Reason += "; "
		}
		m.Reason += b.Reason
	}
	return &m
}

// read is the reader goroutine: the only one that touches the watch state after New.
func (w *Watcher) read() {
	for {
		select {
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			w.handle(ev)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			w.handleErr(err)
		case <-w.scanTick:
			w.scanUnwatched()
		case f := <-w.ctl:
			f()
		}
	}
}

func (w *Watcher) rel(name string) (string, bool) {
	if name == w.root {
		return "", true
	}
	if r, ok := strings.CutPrefix(name, w.root+string(filepath.Separator)); ok {
		return filepath.ToSlash(r), true
	}
	r, err := filepath.Rel(w.root, name)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", false
	}
	return filepath.ToSlash(r), true
}

func (w *Watcher) abs(rel string) string {
	if rel == "" {
		return w.root
	}
	return filepath.Join(w.root, filepath.FromSlash(rel))
}

func (w *Watcher) handle(ev fsnotify.Event) {
	w.events.Add(1)
	rel, ok := w.rel(ev.Name)
	if !ok {
		return
	}
	if rel == "" {
		if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
			w.log.Error("repo root removed or moved", "root", w.root)
			w.markRescan("repo root removed or moved")
		}
		return
	}
	if ev.Op == fsnotify.Chmod { // permission or timestamp only: content is the same
		return
	}
	ig := w.ign.Load()
	if ig.Private(rel) {
		return
	}
	switch {
	case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		if _, known := w.dirs[rel]; known {
			// Drop the old watches before any Create for the new name arrives: inotify
			// hands the same watch back for the same inode, under the old name.
			w.dropTree(rel)
			w.markDirty(rel)
		} else if !ig.Skip(rel, false) {
			w.markDirty(rel)
		}
	case ev.Has(fsnotify.Create):
		fi, err := os.Lstat(ev.Name)
		if err == nil && fi.IsDir() {
			if !ig.Skip(rel, true) && !repofiles.NestedRepo(ev.Name) { // Walk's rule for a directory
				w.addTree(rel, true)
			}
		} else if !ig.Skip(rel, false) {
			w.markDirty(rel) // gone again already: the committer's lstat sorts it out
		}
	case ev.Has(fsnotify.Write):
		if _, isDir := w.dirs[rel]; isDir {
			break // kqueue reports a directory whose entries changed; they get their own events
		}
		if !ig.Skip(rel, false) {
			w.markDirty(rel)
		}
	}
	if baseOf(rel) == ".gitignore" {
		w.reloadIgnore(rel + " changed")
	}
}

func (w *Watcher) handleErr(err error) {
	if errors.Is(err, fsnotify.ErrEventOverflow) {
		reason := "inotify queue overflow"
		if !isLinux {
			reason = "event queue overflow"
		}
		w.log.Warn("events lost; asking for a full rescan", "reason", reason)
		w.mu.Lock()
		w.overflow = reason
		w.mu.Unlock()
		w.markRescan(reason)
		// Directory creations may be among the lost events: catch up the watches.
		w.resync(nil)
		return
	}
	w.log.Warn("watch error; asking for a full rescan", "err", err)
	w.markRescan("watch error: " + err.Error())
}

// reloadIgnore rebuilds the ignore rules, then brings the watches in line and reports the
// files that the new rules no longer ignore. A SetIgnore meanwhile wins the swap; the
// rebuild then starts over from its rules, so neither change is lost.
func (w *Watcher) reloadIgnore(why string) {
	for {
		old := w.ign.Load()
		ig, err := old.Reload()
		if err != nil {
			w.log.Error("ignore rules not reloaded", "why", why, "err", err)
			return
		}
		if w.ign.CompareAndSwap(old, ig) {
			w.log.Info("ignore rules reloaded", "why", why, "gitignores", ig.Gitignores())
			w.resync(old)
			return
		}
	}
}
