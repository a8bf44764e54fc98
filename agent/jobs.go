package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sleep"
	"github.com/memd-dev/memd/sync/githooks"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepo"

	"github.com/memd-dev/memd/internal/gitpath"
)

// doCommit commits the pending paths, then kicks a sync. The paths are taken before the
// lock so that changes arriving meanwhile form the next batch; on failure they go back
// into the set.
func (a *Agent) doCommit(ctx context.Context) error {
	if took, err := a.commitPending(ctx); !took || err != nil {
		return err
	}
	a.kickSyncIfRemote()
	return nil
}

// commitPending is doCommit without the kick: a sync commits through it between push
// rounds (RemoteOptions.BeforeRetry), and its next round pushes the commit. took says
// whether there were paths to commit.
func (a *Agent) commitPending(ctx context.Context) (took bool, err error) {
	// Paused (`memd pause`, or the repo in another writer's hands): the paths stay pending
	// and a reconcile after the pause commits what changed meanwhile.
	if a.commitsPaused() || !a.gateOpen() {
		a.st.pending = a.pending.len()
		return false, nil
	}
	paths := a.pending.take()
	if len(paths) == 0 {
		return false, nil
	}
	a.st.pending = len(paths)
	a.files() // a .gitignore edit the watcher saw applies to this commit
	err = a.commitPaths(ctx, paths, memd.CommitChange)
	if err != nil && a.stoodAside(err) {
		a.pending.add(paths) // the gate closed under the commit: kept for after
		return false, nil
	}
	if err != nil {
		a.pending.add(paths)
		a.retryLater(a.k.commit, 5*time.Second)
		if a.holdDeletion(err) {
			return false, nil // paused, not an error; no sync kick per retry
		}
		if err.Error() != a.st.lastErr { // one event per new failure, not per retry
			a.event(statusline.KindError, statusline.Part{Text: "error:", Kind: statusline.KindError}, statusline.Part{Text: " " + err.Error()})
		}
		a.st.lastErr = err.Error()
		return true, err
	}
	a.st.pending = a.pending.len()
	a.st.deletions.local = ""
	return true, nil
}

// commitPaths commits through the session (the writer lock while reading, HEAD
// compare-and-set retries) and notes the commit in the inventory, metrics and status.
func (a *Agent) commitPaths(ctx context.Context, paths []string, kind memd.CommitKind) error {
	start := time.Now()
	hook := a.hookStart(memd.HookAfterCommit)
	res, err := a.sess.CommitPending(ctx, paths)
	if err != nil {
		return err
	}
	a.filesChanged(paths)
	if res.Hash == "" {
		return nil
	}
	a.filesChanged(changedFiles(res.Changes)) // the files in new directories too
	a.metrics.CommitDone(kind, time.Since(start), a.now())
	a.st.hours.add(a.now(), 1)
	a.st.lastCommit = &commitInfo{at: a.now(), added: res.Added, modified: res.Modified, deleted: res.Deleted}
	a.st.lastErr = ""
	a.st.detail = "committed " + plural(res.Added+res.Modified+res.Deleted, "file")
	a.repo.ScheduleIndexRefresh()
	a.remoteChanged()
	a.log.Info("committed", "hash", short(res.Hash), "added", res.Added, "modified", res.Modified, "deleted", res.Deleted)
	a.hookEnd(hook)
	return nil
}

// doReconcile is the full scan: at start, after a watcher overflow and every
// watch.reconcile; it catches anything the watcher missed.
func (a *Agent) doReconcile(ctx context.Context) error {
	if a.startPending {
		defer a.startReconciled()
	}
	defer a.reconciles.Add(1)
	a.rereadGlobalExcludes() // and a.files(): the rules this reconcile holds paths to
	dirty, err := a.repo.Reconcile()
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	// The start-up one needs no scan: the first inventory is built by a walk that began
	// after the watcher, and the paths this reconcile commits are noted. Nor does the
	// watch.reconcile timer's (rescanWanted false): the inventory follows every path the
	// watcher reported (commitPaths) and every HEAD move (inventoryAfterMove), and what the
	// watcher missed differs from HEAD, so git status just named it and its commit notes it.
	// At 100k files the walk was most of an idle daemon's CPU (~1 s every 10 minutes). A
	// rescan the watcher asked for (overflow), a stand-aside's end and KickReconcile walk.
	if !a.startPending && a.rescanWanted.Swap(false) {
		a.inv.scan(a.cfg.Repo, a.files())
		a.inventoryScans.Add(1)
	}
	a.conflicts.touchAll() // a reconcile looks at everything: so does the next conflict list
	if len(dirty) == 0 {
		return nil
	}
	a.log.Info("reconcile found changes", "paths", len(dirty))
	a.pending.add(dirty)
	return a.doCommit(ctx)
}

func (a *Agent) hasRemote() bool {
	ok, err := a.repo.HasRemote(a.cfg.Sync.Remote)
	return err == nil && ok
}

func (a *Agent) kickSyncIfRemote() {
	if a.syncWaiting.Load() || !a.hasRemote() {
		return // waiting out a backoff: the timer kicks when it ends
	}
	kick(a.k.sync)
}

// Contention retry: a sync that lost every push race (or whose checkout writers kept
// racing) is tried again after a short random pause, not after the offline backoff.
const (
	contentionRetryMin    = 200 * time.Millisecond
	contentionRetrySpread = 800 * time.Millisecond
	// maxContention bounds syncs in a row that end in contention (each already ran
	// MaxSyncAttempts rounds): past it the failure is handled as an error with the
	// backoff, so a refusal mistaken for a lost race never becomes a hot loop.
	maxContention = 5
)

// doSync commits what is pending, then fetches, merges and pushes. The writer lock is held
// for the local part only (Sync's LocalWork), never across a fetch or a push. A remote that
// does not answer puts memd offline with an exponential backoff; a push that kept losing
// the race to other machines is contention, retried soon, and changes no state. One log
// line per state change, not per retry.
func (a *Agent) doSync(ctx context.Context) error {
	a.reconcileIfMovedByOthers() // the outside watch's fallback, at every pull_interval
	if !a.hasRemote() || a.syncPaused() || !a.gateOpen() {
		return nil // a pause's end, or the repo's return, kicks the sync that waited
	}
	if err := a.doCommit(ctx); err != nil {
		return err
	}
	a.setBusy("syncing")
	before, _ := a.repo.Head()
	res, err := a.syncRounds(ctx)
	a.st.ahead, a.st.behind = res.Ahead, res.Behind
	if err != nil && a.stoodAside(err) {
		a.noteMerge(res, before) // a round may have merged before the repo changed hands
		return nil
	}
	contention := a.countContention(err)
	if contention && a.contention <= maxContention {
		a.retryContended(err, res, before)
		return nil
	}
	if a.holdDeletion(err) {
		a.retryLater(a.k.sync, a.cfg.Sync.CheckInterval.D())
		return nil
	}
	if err != nil {
		a.syncFailed(err, contention, res, before)
		return nil
	}
	a.syncSucceeded(res, before)
	return nil
}

// syncRounds runs the session's fetch, merge and push rounds between the after_sync
// hook's start and end, so the hook sees the HEAD the sync left, pushed or not.
func (a *Agent) syncRounds(ctx context.Context) (gitrepo.SyncResult, error) {
	hook := a.hookStart(memd.HookAfterSync)
	// Edits in a merge's way are committed like any batch: the lock only while reading.
	res, err := a.sess.SyncOnce(ctx, func(paths []string) error { return a.commitPaths(ctx, paths, memd.CommitChange) },
		// Edits that arrived while a push lost its race go into the next round's push.
		func() { _, _ = a.commitPending(ctx) }) // a failure is doCommit's: retried, reported
	a.metrics.PushAttempts(res.PushAttempts)
	// Even a sync that failed to push may have merged: the hook follows HEAD, not the push.
	a.hookEnd(hook)
	return res, err
}

// countContention says whether err is contention (a lost push race or a raced checkout)
// and counts syncs in a row that ended in it, so that doSync can stop treating a run past
// maxContention as a race.
func (a *Agent) countContention(err error) bool {
	contention := err != nil && (errors.Is(err, gitremote.ErrPushRejected) || errors.Is(err, gitrepo.ErrCheckoutRaced))
	if contention {
		a.contention++
	} else {
		a.contention = 0
	}
	return contention
}

// retryContended ends a sync that lost the race to other writers: its merge is noted and
// it is tried again after a short random pause, with no change of sync state.
func (a *Agent) retryContended(err error, res gitrepo.SyncResult, before string) {
	a.metrics.SyncDone(err, a.now())
	a.noteMerge(res, before)
	wait := contentionRetryMin + time.Duration(rand.Float64()*float64(contentionRetrySpread))
	a.log.Info("sync lost the race to other writers; trying again soon", "err", err, "next", wait.Round(time.Millisecond))
	a.retryLater(a.k.sync, wait)
}

// syncFailed ends a sync that failed: its merge is noted, the status goes offline or to
// error (an event per change), and the next try waits for the backoff.
func (a *Agent) syncFailed(err error, contention bool, res gitrepo.SyncResult, before string) {
	a.metrics.SyncDone(err, a.now())
	a.noteMerge(res, before) // a merge may have happened before the push failed
	prev := a.st.syncState
	switch {
	case errors.Is(err, gitremote.ErrOffline):
		a.st.syncState = statusline.StateOffline
	default:
		// The remote answered (auth, unrelated history, a refused push, a
		// commit naming a path memd will not write (ErrUnsafeTree), a
		// checkout that failed): not offline, an error until it clears.
		a.st.syncState = statusline.StateError
	}
	if prev != a.st.syncState || (a.st.syncState == statusline.StateError && a.st.syncErr != err.Error()) {
		a.syncEvent(err)
	}
	a.st.syncErr = err.Error()
	a.scheduleSyncRetry(err, contention, prev != a.st.syncState)
}

// scheduleSyncRetry arms the timer for the sync after a failed one (syncRetryWait's wait)
// and marks the agent as waiting it out (commits then kick no sync), unless the repo's
// pre-push hook refused; stateChanged says whether to log: once per state change.
func (a *Agent) scheduleSyncRetry(err error, contention, stateChanged bool) {
	wait := syncRetryWait(err, contention, a.backoff.Next(), a.cfg.Sync.PullInterval.D())
	hookRefused := errors.Is(err, githooks.ErrRefused) // the repo's pre-push hook said no
	if hookRefused {
		wait = a.cfg.Sync.PullInterval.D() // or sooner: the next change tries again (no backoff wait)
	}
	if stateChanged {
		a.log.Warn("sync failed; retrying with backoff", "state", a.st.syncState, "err", err, "next", wait.Round(time.Second))
	}
	a.syncWaiting.Store(!hookRefused)
	if errors.Is(err, gitremote.ErrPushRefused) {
		// A kick queued during this sync (its own commit's) must not ask the remote
		// again at once: the timer is the next try.
		select {
		case <-a.k.sync:
		default:
		}
	}
	time.AfterFunc(wait, func() { a.syncWaiting.Store(false); kick(a.k.sync) })
}

// syncSucceeded ends a sync that merged and pushed what there was: the backoff resets,
// a recovery from offline or error is announced once, and the status notes the push.
func (a *Agent) syncSucceeded(res gitrepo.SyncResult, before string) {
	a.backoff.Reset()
	if a.st.syncState != statusline.StateOK && a.st.syncState != "" {
		a.log.Info("sync recovered", "remote", a.cfg.Sync.Remote)
		a.event(statusline.KindOK, statusline.Part{Text: "back online", Kind: statusline.KindOK},
			statusline.Part{Text: fmt.Sprintf(": synced with %s/%s", a.cfg.Sync.Remote, a.cfg.Sync.Branch)})
	}
	a.st.syncState = statusline.StateOK
	a.st.syncErr = ""
	a.st.deletions.remote = ""
	a.metrics.SyncDone(nil, a.now())
	a.noteMerge(res, before)
	if res.Pushed {
		t := a.now()
		a.st.lastPush = &t
		a.st.detail = fmt.Sprintf("pushed to %s/%s", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
}

// syncRetryWait is the wait before the sync after one that failed with err: the backoff's
// delay, except where the remote answers and waiting longer cannot help (a commit naming a
// path memd will not write, or contention past maxContention): then at most pull_interval,
// the normal pace, not a backoff grown to ten minutes; a push the remote refused waits at
// least pull_interval.
func syncRetryWait(err error, contention bool, backoff, pullInterval time.Duration) time.Duration {
	if errors.Is(err, gitremote.ErrPushRefused) {
		// The remote refused for a reason of its own (a hook, push protection): asking
		// again sooner than the normal pace cannot help, and local commits go on.
		return max(backoff, pullInterval)
	}
	if contention || errors.Is(err, gitpath.ErrUnsafeTree) {
		return min(backoff, pullInterval)
	}
	return backoff
}

// noteMerge records what a sync brought in (also one that then lost its push race).
func (a *Agent) noteMerge(res gitrepo.SyncResult, before string) {
	if len(res.Conflicts) > 0 {
		a.metrics.Conflicts(len(res.Conflicts))
		a.log.Warn("merge kept both versions", "conflict_copies", res.Conflicts)
		a.conflictEvents(res.Conflicts)
	}
	if res.Merged {
		a.st.hours.add(a.now(), 1)
	}
	if res.Merged || res.FastForward {
		a.remoteChanged()
		a.metrics.CommitDone(memd.CommitMerge, 0, a.now())
		a.inventoryAfterMove(before)
	}
}

// doSleep runs the nightly phases for one schedule slot.
func (a *Agent) doSleep(ctx context.Context, slot time.Time) error {
	// A sleep moves and rewrites files: never in a tree that is not memd's branch's, nor
	// while commits are paused. The phases stay due: a slot the gate shut out runs as soon
	// as the gate opens (noteAside), one a user's pause held by the schedule's catch-up.
	if a.commitsPaused() {
		a.log.Info("sleep skipped while paused", "slot", slot)
		return nil
	}
	a.sleepWaiting = time.Time{} // this run is the waiting one's turn
	if !a.gateOpen() {
		a.log.Info("sleep waits for the repo", "slot", slot, "why", a.st.aside.Reason)
		a.sleepWaiting = slot
		return nil
	}
	if err := a.doCommit(ctx); err != nil {
		return err
	}
	a.setBusy("sleeping")
	hook := a.hookStart(memd.HookAfterSleep)
	before, _ := a.repo.Head()
	rep, err := a.sleepRunner().Run(ctx, sleep.RunID(slot))
	a.hookEnd(hook)
	var failed []string
	for _, ph := range rep.Phases {
		a.metrics.SleepPhase(ph.Name, ph.Duration, ph.Err, a.now())
		if ph.Err == nil {
			_ = a.sched.MarkDone(ph.Name, a.now())
		} else {
			failed = append(failed, string(ph.Name)+": "+ph.Err.Error())
		}
		if ph.Commit != "" && !ph.Skipped {
			a.st.hours.add(a.now(), 1)
		}
	}
	if err != nil && len(failed) == 0 {
		failed = append(failed, err.Error())
	}
	a.sleepEvent(rep.Counts, failed)
	a.metrics.Archived(rep.Counts[sleep.CountArchived])
	a.metrics.ArcsWritten(rep.Counts[sleep.CountArcs])
	for mode, n := range rep.Drained {
		a.metrics.NotesDrained(mode, n)
	}
	a.st.lastSleep = &sleepInfo{at: a.now(), counts: rep.Counts}
	a.inventoryAfterMove(before)
	a.kickSyncIfRemote()
	return err
}

// doReload re-reads the config (SIGHUP). A bad config is rejected with a log line and the
// old one kept. The repo path cannot change without a restart.
func (a *Agent) doReload(pull, reconcile *time.Ticker) {
	if n := a.opts.Notifier; n != nil {
		n.Reloading()
		defer n.Ready()
	}
	if a.opts.LoadConfig == nil {
		return
	}
	cfg, err := a.opts.LoadConfig()
	if err == nil {
		err = cfg.Validate(a.opts.ScheduleValidator)
	}
	var ign *repofiles.Ignorer // built once, for the committer, the watcher, the inventory and sleep
	if err == nil {
		ign, err = repofiles.New(a.cfg.Repo, cfg.Watch.Ignore)
	}
	if err == nil {
		ign = ign.WithLockFile(cfg.Lock.File)
	}
	if err != nil {
		a.log.Error("reload rejected; keeping the running config", "err", err)
		return
	}
	if cfg.Repo != a.cfg.Repo {
		a.log.Warn("reload: repo changed; restart memd to switch repos", "running", a.cfg.Repo, "config", cfg.Repo)
		cfg.Repo = a.cfg.Repo
	}
	old := a.cfg
	a.cfg = cfg
	a.sess.SetConfig(cfg) // the writer lock's settings, the remote's options
	a.inv.setConfig(cfg)  // the ledger path and the soft grace behind memd_ledger_notes
	a.setFiles(ign)
	a.hooks.SetConfig(cfg.Hooks)
	for _, h := range memd.HookNames {
		if len(cfg.Hooks.Argv(h)) == 0 {
			a.hookFails.set(h, "") // a hook taken out of the config no longer warns
		}
	}
	pull.Reset(cfg.Sync.PullInterval.D())
	a.configRemoteCheck()
	a.watchFileRemote() // the remote may be another one now
	a.repo.SetMaxFileSize(int64(cfg.Sync.MaxFileSize))
	reconcile.Reset(cfg.Watch.Reconcile.D())
	a.sched.SetCatchUp(cfg.Sleep.CatchUp)
	if cfg.Sleep.Schedule != old.Sleep.Schedule {
		if err := a.sched.SetSpec(cfg.Sleep.Schedule); err != nil {
			a.log.Error("reload: schedule", "err", err)
		}
	}
	if cfg.HTTP != old.HTTP && a.server != nil {
		a.restartHTTP()
	}
	if a.opts.OnReload != nil {
		a.opts.OnReload(cfg)
	}
	a.log.Info("config reloaded")
}

func (a *Agent) restartHTTP() {
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_ = a.server.Shutdown(sctx)
	cancel()
	a.server = nil
	// The same start as at launch: the repo's own port when the default is taken.
	if err := a.startHTTP(); err != nil {
		a.log.Error("reload: http", "addr", a.cfg.HTTP.Listen, "err", err)
	}
}

// retryLater kicks c after d (a lock held by a writer, a transient error).
func (a *Agent) retryLater(c chan struct{}, d time.Duration) {
	time.AfterFunc(d, func() { kick(c) })
}

func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (a *Agent) sleepRunner() *sleep.Runner {
	return a.sess.SleepRunner(sleep.Options{
		Phases: a.cfg.Sleep.Phases, Ignore: a.files().Ignored,
	})
}

// syncEvent says sync went offline (the remote cannot be reached) or failed for good (auth,
// unrelated history), once per change of state.
func (a *Agent) syncEvent(err error) {
	if a.st.syncState == statusline.StateOffline {
		a.event(statusline.KindWarn, statusline.Part{Text: "offline", Kind: statusline.KindWarn},
			statusline.Part{Text: ": " + a.cfg.Sync.Remote + " unreachable (" + reasonOf(err) + "); commits kept locally", Kind: statusline.KindDim})
		return
	}
	a.event(statusline.KindError, statusline.Part{Text: "sync error:", Kind: statusline.KindError}, statusline.Part{Text: " " + err.Error()})
}
