package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	stdsync "sync"
	"sync/atomic"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/hooks"
	"github.com/memd-dev/memd/internal/procgroup"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sleep"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepair"
	"github.com/memd-dev/memd/sync/gitrepo"
	"github.com/memd-dev/memd/watcher"
)

// Agent is `memd run`.
type Agent struct {
	opts Options
	cfg  memd.Config // owned by the owner goroutine (reload replaces it there)
	log  *slog.Logger
	now  func() time.Time

	sess *Session
	repo *gitrepo.Repo // sess.Repo()
	// filterSeen: files held for their git filter that had their event (heldfilter.go).
	filterSeen map[string]bool
	watch      *watcher.Watcher
	ignorer    *repofiles.Ignorer // the rules in force: files() keeps them current
	metrics    *metrics.Metrics
	hub        *metrics.Hub
	server     *metrics.Server
	sched      *sleep.Scheduler

	k       kicks
	pending pendingSet
	page    chan pageJob // the page's actions, for the owner (pageactions.go)

	loopRunning atomic.Bool
	current     atomic.Pointer[jobState]

	st      state // owner-only
	backoff *gitremote.Backoff
	// syncWaiting is set while a failed sync waits out its backoff; the backoff timer
	// clears it and kicks the next attempt.
	syncWaiting atomic.Bool
	contention  int // syncs in a row that lost the race to other writers (owner-only)
	inv         *inventory
	check       *remoteChecker  // the looks at the remote branch (remotecheck.go)
	refWatch    *remoteRefWatch // a file remote's branch, watched (remotewatch.go; owner-only)
	procsLow    bool            // idle: not counted busy in idleProcs (owner-only)

	hooks     *hooks.Runner
	hookFails hookFailures // written by the hooks' goroutines, read by publish
	// startPending: the start-up reconcile has not run yet (owner-only).
	startPending bool
	// rescanWanted: the queued reconcile also walks the inventory (kickRescan).
	rescanWanted atomic.Bool
	// reconciles and inventoryScans count reconciles run and their inventory walks (tests).
	reconciles, inventoryScans atomic.Int64

	conflicts    conflictCache  // the published conflict list between publishes (conflictcache.go)
	outside      *watcher.Names // .git's top entries and the state dir (aside.go)
	asidePolling atomic.Bool    // a poll of the gate is armed (aside.go)
	sleepWaiting time.Time      // a sleep slot skipped while the gate was shut, run when it opens (owner only)
	written      writtenDoc     // the status files as last written (state.go; owner only)
	heal         gitHeal        // the git directory's repairs (githeal.go; owner only)
}

// startReconciled follows the start-up reconcile: the first sync, and the sleep schedule.
func (a *Agent) startReconciled() {
	a.startPending = false
	a.log.Info("start-up reconcile done") // tests wait for it (testutil.WaitRunning)
	a.kickSyncIfRemote()
	a.sched.Start()
}

// New opens the repo and builds the parts; nothing runs until Run.
func New(opts Options) (*Agent, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	a := &Agent{opts: opts, cfg: opts.Config, log: opts.Logger, now: opts.Now, k: newKicks(), page: make(chan pageJob)}
	a.current.Store(&jobState{})
	a.metrics = metrics.New(opts.Version)
	a.hub = metrics.NewHub()
	// Opening applies the start-up invariants (a crash's merge finished, its half sleep
	// undone) before anything reads the tree: the inventory, the watcher, the reconcile.
	sess, err := Open(context.Background(), a.cfg, OpenOptions{Logger: a.log, Now: a.now, Who: "memd", LockHeld: a.metrics.LockHeld,
		DeferIndexUpkeep: true}) // started at READY (Run)
	if err != nil {
		if errors.Is(err, gitrepair.ErrLost) { // state error, the one line (githeal.go)
			if werr := WriteLostStatus(a.cfg, a.now(), err); werr != nil {
				a.log.Warn("write status", "err", werr)
			}
		}
		return nil, err
	}
	a.sess, a.repo, a.ignorer = sess, sess.Repo(), sess.Ignorer()
	a.backoff = gitremote.NewBackoff(time.Second, 10*time.Minute, nil)
	a.inv = newInventory(a.cfg)
	// The last document carries the events, commit hours and last sleep of the previous run:
	// ids go on from there (a reader shows each event once across restarts), and the page
	// still shows last night's sleep after a restart.
	if prev, err := statusline.Read(a.cfg.StateDir()); err == nil {
		a.st.events.restore(prev)
		a.st.hours.restore(prev)
		if s := prev.LastSleep; s != nil {
			a.st.lastSleep = &sleepInfo{at: s.At, counts: s.Counts}
		}
	}
	a.noteRepairs(sess.GitRepairs()) // after the restore: the events go on from its ids
	// Where hooks' descendants are ended (a cgroup, else a subreaper); a killed memd's
	// leftover runs are ended now.
	a.log.Debug("hooks and the summarizer end every descendant", "mode", procgroup.Prepare())
	a.hooks = hooks.NewRunner(hooks.Options{Dir: a.cfg.Repo, TempDir: a.cfg.StateDir(), Config: a.cfg.Hooks, Changed: a.repo.ChangedPaths,
		TokenEnv: a.cfg.Sync.TokenEnv, Logger: a.log, Done: a.hookDone})
	return a, nil
}

// Kick* let signal handlers and tests ask for a job; they never block.
func (a *Agent) KickSync()      { kick(a.k.sync) }
func (a *Agent) KickReconcile() { a.kickRescan() }

// kickRescan queues a reconcile that also rescans the inventory (every reconcile but the
// watch.reconcile timer's: see doReconcile).
func (a *Agent) kickRescan() { a.rescanWanted.Store(true); kick(a.k.reconcile) }

func (a *Agent) Reload() { kick(a.k.reload) }

// Run runs the agent until ctx is done; the running job gets ctx, so its waits end with it
// (docs/ARCHITECTURE.md §2). Then it commits what is pending and returns nil (SIGTERM is a
// clean stop, exit 0).
func (a *Agent) Run(ctx context.Context) error {
	// New's Open finished what a crash left (a merge, a half sleep) and clears a stale
	// index lock in the background.
	if err := a.startParts(); err != nil {
		return err
	}
	r := a.startGoroutines()

	a.loopRunning.Store(true)
	defer a.loopRunning.Store(false)

	a.startUp(r)
	defer r.stopTimers()
	a.startRemoteCheck()
	a.startClaudeCode(ctx)
	a.announceReady(ctx)
	a.procsStart()
	return a.loop(ctx, r)
}

// startParts makes the watcher and the sleep scheduler, and starts the HTTP server.
func (a *Agent) startParts() error {
	w, err := watcher.New(a.cfg.Repo, watcher.Options{
		Quiet: a.cfg.Watch.Quiet.D(), MaxDelay: a.cfg.Watch.MaxDelay.D(), Ignorer: a.ignorer, Logger: a.log,
	})
	if err != nil {
		return fmt.Errorf("watch %s: %w", a.cfg.Repo, err)
	}
	a.watch = w
	sched, err := sleep.NewScheduler(a.cfg.Sleep.Schedule, a.cfg.StateDir(), a.now, a.sleepTrigger)
	if err != nil {
		return &memd.ConfigError{Key: "sleep.schedule", Value: a.cfg.Sleep.Schedule, Problem: err.Error()}
	}
	sched.SetCatchUp(a.cfg.Sleep.CatchUp)
	a.sched = sched
	a.startOutside()

	if err := a.startHTTP(); err != nil {
		return err
	}
	a.register()
	return nil
}

// running is what Run started beside the owner loop: the goroutines shutdown waits for and
// the loop's timers.
type running struct {
	stopWatch              context.CancelFunc
	watchDone, batchesDone chan struct{}
	invReady               chan *inventory // the inventory built off the owner, once

	trim            *time.Timer
	pull, reconcile *time.Ticker
}

func (r *running) stopTimers() { r.trim.Stop(); r.pull.Stop(); r.reconcile.Stop() }

// startGoroutines starts the watcher, the batch reader and the inventory build.
func (a *Agent) startGoroutines() *running {
	w := a.watch
	wctx, stopWatch := context.WithCancel(context.Background())
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); _ = w.Run(wctx) }()
	batchesDone := make(chan struct{})
	go func() { defer close(batchesDone); a.readBatches() }()

	invReady := make(chan *inventory, 1)
	go func(cfg memd.Config, ign *repofiles.Ignorer) { invReady <- buildInventory(cfg, ign) }(a.cfg, a.ignorer)
	return &running{stopWatch: stopWatch, watchDone: watchDone, batchesDone: batchesDone, invReady: invReady}
}

// startUp queues the start-up reconcile and arms the loop's timers.
func (a *Agent) startUp(r *running) {
	// Start-up: publish, READY, then reconcile (catches what changed while memd was down),
	// then sync and the sleep schedule.
	a.readPause() // a pause survives restarts: before the start-up reconcile commits
	a.setBusy("starting")
	// The start-up reconcile is the loop's first job, after READY: at 100k files it is a
	// `git status` of hundreds of ms, and READY should not wait for it. The first sync
	// and the sleep schedule start after it (startReconciled), so neither runs on a tree
	// with offline changes not yet committed.
	a.startPending = true
	kick(a.k.reconcile)
	// trim returns memory to the OS once memd has been idle a while: a commit or sync at
	// 100k files leaves tens of MB of garbage that GC would otherwise keep until the next
	// burst of work. One-shot, re-armed by each job: no timer runs while memd stays idle.
	r.trim = time.NewTimer(idleTrimAfter)
	r.pull = time.NewTicker(a.cfg.Sync.PullInterval.D())
	r.reconcile = time.NewTicker(a.cfg.Watch.Reconcile.D())
}

// announceReady tells the service manager memd is ready and starts its watchdog.
func (a *Agent) announceReady(ctx context.Context) {
	if n := a.opts.Notifier; n != nil {
		n.Ready()
		go n.RunWatchdog(ctx, func() bool { return a.alive() == nil })
	}
	a.log.Info("memd running", "repo", a.cfg.Repo, "version", a.opts.Version)
	// The stale index.lock check and the start-up index refresh (with the big trees' warming)
	// run from READY on: they are seconds of CPU at 100k files (OpenOptions.DeferIndexUpkeep).
	a.sess.StartIndexUpkeep()
	a.preloadSecrets() // held.go: the rules compile off the owner's path
}

// loop is the owner goroutine: one job at a time, until ctx is cancelled.
func (a *Agent) loop(ctx context.Context, r *running) error {
	stopWatch, watchDone, batchesDone, invReady := r.stopWatch, r.watchDone, r.batchesDone, r.invReady
	trim, pull, reconcile := r.trim, r.pull, r.reconcile
	for {
		// A stop is seen before any other ready kick: select picks among ready cases at
		// random, and each job after the cancel would only fail on its cancelled ctx.
		if ctx.Err() != nil {
			return a.shutdown(ctx, stopWatch, watchDone, batchesDone)
		}
		select {
		case <-ctx.Done():
			return a.shutdown(ctx, stopWatch, watchDone, batchesDone)
		case inv := <-invReady:
			a.runJob(ctx, "inventory", func(context.Context) error { a.adoptInventory(inv); return nil })
		case <-a.k.commit:
			a.runJob(ctx, "commit", a.doCommit)
		case <-a.k.reconcile:
			a.runJob(ctx, "reconcile", a.doReconcile)
		case <-a.k.sync:
			a.runJob(ctx, "sync", a.doSync)
		case slot := <-a.k.sleep:
			a.runJob(ctx, "sleep", func(ctx context.Context) error { return a.doSleep(ctx, slot) })
		case j := <-a.page:
			var err error
			a.runJob(ctx, j.name, func(ctx context.Context) error { err = j.fn(ctx); return err })
			j.done <- err
		case <-a.k.outside:
			// Not a runJob: memd's own index refresh wakes the watch of .git too, and a
			// look that changed nothing publishes nothing.
			if a.doOutside() {
				a.publish()
			}
			continue
		case <-a.k.claude:
			// Not a runJob: a pass that copied nothing publishes nothing; one that copied
			// files is followed by the watcher's batch and its commit.
			if a.doClaudeCode() {
				a.publish()
			}
			continue
		case <-a.k.reload:
			a.runJob(ctx, "reload", func(context.Context) error { a.doReload(pull, reconcile); return nil })
		case <-a.k.hooks:
			for _, msg := range a.hookFails.takeFresh() {
				a.event(statusline.KindWarn, statusline.Part{Text: msg, Kind: statusline.KindWarn})
			}
			a.publish() // a hook finished: its warning appears or clears
			continue
		case <-pull.C:
			// No job runs for a vouched pull: nothing to publish, no memory to trim after.
			if a.pullVouched() {
				// A sync found in step: memd_last_successful_sync_timestamp_seconds stays
				// true to "in step with the remote".
				a.metrics.SyncDone(nil, a.now())
				a.reconcileIfMovedByOthers() // the outside watch's fallback, as doSync's
				a.log.Debug("pull: the looks found the branch in step; no fetch")
				continue
			}
			a.kickSyncIfRemote()
		case <-trim.C:
			debug.FreeOSMemory()
			a.procsIdle(true)
			continue
		case <-reconcile.C:
			kick(a.k.reconcile)
		}
		if !trim.Stop() {
			select {
			case <-trim.C:
			default:
			}
		}
		trim.Reset(idleTrimAfter)
	}
}

// adoptInventory makes the inventory built at start-up the agent's.
func (a *Agent) adoptInventory(inv *inventory) {
	inv.catchUp(a.cfg.Repo, a.ignorer, a.inv) // what jobs touched while it was built
	inv.setConfig(a.cfg)                      // it was built with the start-up one
	a.inv = inv
	a.conflicts.touchAll()
	// The build parsed every memory file: at 100k files that is tens of MB of
	// garbage the heap would keep as RSS. Give it back once, off the owner.
	go func() { debug.FreeOSMemory(); boundMemory() }()
}

// readBatches is the only consumer of the watcher: it fills the pending set and kicks.
func (a *Agent) readBatches() {
	for b := range a.watch.Batches() {
		if len(b.Paths) > 0 {
			a.pending.add(b.Paths)
			a.conflicts.touch(b.Paths)
			kick(a.k.commit)
		}
		if b.Rescan {
			a.conflicts.touchAll()
			a.log.Warn("watcher asked for a full rescan", "reason", b.Reason)
			a.kickRescan()
		}
	}
}

func (a *Agent) sleepTrigger(slot time.Time) {
	select {
	case a.k.sleep <- slot:
	default: // a run is already queued: SkipIfStillRunning semantics
	}
}

// runJob runs one job on the owner goroutine and publishes the state after it. ctx is Run's:
// a stop cancels what the job waits on (a fetch, a push, the writer lock, the next op of a
// sleep apply, which is then undone), so the job ends soon and the stop commits.
func (a *Agent) runJob(ctx context.Context, name string, fn func(ctx context.Context) error) {
	a.procsIdle(false)
	a.setJob(name)
	defer a.setJob("")
	if a.heal.lost != "" && name != "inventory" {
		a.st.lastErr = a.heal.lost // nothing works on a repo that lost a commit (githeal.go)
		a.publish()
		return
	}
	err := fn(ctx)
	if err != nil {
		a.log.Error(name+" failed", "err", err)
	}
	a.healIfDamaged(ctx, err)
	a.st.busy = ""
	a.publish()
}

func (a *Agent) shutdown(ctx context.Context, stopWatch context.CancelFunc, watchDone, batchesDone chan struct{}) error {
	if n := a.opts.Notifier; n != nil {
		n.Stopping()
	}
	a.log.Info("stopping: committing what is pending")
	a.sched.Stop()
	a.stopOutside()
	a.watch.Flush()
	stopWatch()
	<-watchDone
	<-batchesDone
	// Closing fsnotify drops events still in the kernel queue or in its channel: a write
	// made a few ms before the signal is lost to the watcher. A reconcile (git status: tens
	// of ms at 10k files) finds it on disk, so everything written before SIGTERM is committed.
	if dirty, err := a.repo.Reconcile(); err != nil {
		a.log.Warn("reconcile at stop", "err", err)
	} else {
		a.pending.add(dirty)
	}
	// The last commit is the stop's own work: not cancelled, bounded by lock.timeout.
	a.runJob(context.WithoutCancel(ctx), "commit", a.doCommit)
	// Hooks get a short grace (a memhtml index update takes a second), then are killed: a
	// stop must not wait out hooks.timeout. They run before the repo closes: they read it.
	a.hooks.Close(hookStopGrace)
	a.refWatch.close()
	a.check.stopAndWait() // its looks read the repo
	if a.server != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = a.server.Shutdown(sctx)
		cancel()
	}
	a.sess.Close()
	a.procsGone()
	// The last document says so: readers show `memd: stopped · HH:MM` at once, not a live
	// state that only turns "not running" two minutes later.
	a.st.stopped = true
	a.publish()
	a.log.Info("memd stopped")
	return nil
}

// alive is /healthz: the owner loop runs and is not stuck, and the watcher reads events.
func (a *Agent) alive() error {
	if err := a.ownerAlive(); err != nil {
		return err
	}
	if a.watch != nil && !a.watch.Alive() {
		return errors.New("watcher not running")
	}
	return nil
}

// memoryFloor is the least soft memory limit boundMemory sets.
const memoryFloor = 80 << 20

// boundMemory sets Go's soft memory limit to max(80 MiB, 2x the heap live now), unless the
// user set GOMEMLIMIT. At 100k files the live heap is ~35 MB, but a commit in a directory of
// 40k files leaves ~8 MB of garbage and the GC lets the heap reach twice the live size
// before collecting, which kept RSS near 100 MiB; near the limit it collects sooner and
// returns memory to the OS. Twice the live heap leaves GOGC's own headroom, so a repo
// whose live heap is larger than the floor never makes the GC run more than it would.
func boundMemory() {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	debug.SetMemoryLimit(int64(max(memoryFloor, 2*ms.HeapAlloc)))
}

// idleTrimAfter is how long memd must be idle before it hands freed memory back to the OS
// and runs on one P (procsIdle).
const idleTrimAfter = 15 * time.Second

// idleProcs holds the process to one P (GOMAXPROCS 1) while every agent in it is idle: a look
// at the remote every check_interval makes a few goroutines runnable at once, and with an idle
// P the scheduler wakes another thread to run them, ~12 context switches a look, most of an
// idle daemon's wakeups (issue 29: at most one a second; measured with bench/liveremote). The
// first job of any agent gives the runtime its Ps back before it runs, so commits, syncs and
// the nightly phases keep every core. The change stops the world once each way (µs).
var idleProcs idleProcsState

type idleProcsState struct {
	stdsync.Mutex
	busy int  // agents not idle
	low  bool // GOMAXPROCS is 1 by procsIdle
	was  int  // what it was before
}

// procsIdle notes the agent idle (true) or busy (false), and sets GOMAXPROCS to match.
// Owner only (a.procsLow is owner state).
func (a *Agent) procsIdle(idle bool) {
	p := &idleProcs
	p.Lock()
	defer p.Unlock()
	switch {
	case idle && !a.procsLow:
		a.procsLow = true
		p.busy--
		if p.busy == 0 && !p.low && runtime.GOMAXPROCS(0) > 1 {
			p.was, p.low = runtime.GOMAXPROCS(1), true
		}
	case !idle && a.procsLow:
		a.procsLow = false
		p.busy++
		p.restoreLocked()
	}
}

// restoreLocked gives the runtime its Ps back.
func (p *idleProcsState) restoreLocked() {
	if !p.low {
		return
	}
	p.low = false
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS() // from the CPU affinity and cgroup limit, as at start
	} else {
		runtime.GOMAXPROCS(p.was)
	}
}

// procsStart counts a starting agent busy.
func (a *Agent) procsStart() {
	idleProcs.Lock()
	idleProcs.busy++
	idleProcs.Unlock()
}

// procsGone is an agent's stop: it no longer counts, and the process keeps its Ps.
func (a *Agent) procsGone() {
	p := &idleProcs
	p.Lock()
	defer p.Unlock()
	if !a.procsLow {
		p.busy--
	}
	a.procsLow = true // counted out: a later procsIdle(true) is a no-op
	p.restoreLocked()
}

// newServerAt is the server on addr, with the page's actions.
func newServerAt(a *Agent, addr string) *metrics.Server {
	s := metrics.NewServer(addr, a.metrics, a.hub, a.alive, a.cfg.HTTP.PProf)
	s.AllowRemote = a.cfg.HTTP.AllowRemote
	s.Actions = pageActions{a}
	return s
}
