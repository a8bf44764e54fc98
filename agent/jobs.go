package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/sleep"
	memsync "github.com/memd-dev/memd/sync"
	"github.com/memd-dev/memd/watcher"
)

// maxCASRetries bounds how often a commit is retried when HEAD moved under it (a user's own
// `git commit` in the repo); each retry re-reads HEAD.
const maxCASRetries = 5

// doCommit commits the pending paths. The paths are taken before the lock so that changes
// arriving meanwhile form the next batch; on failure they go back into the set.
func (a *Agent) doCommit(ctx context.Context) error {
	paths := a.pending.take()
	if len(paths) == 0 {
		return nil
	}
	a.st.pending = len(paths)
	err := a.commitPaths(ctx, paths, "change")
	if err != nil {
		a.pending.add(paths)
		a.retryLater(a.k.commit, 5*time.Second)
		a.st.lastErr = err.Error()
		return err
	}
	a.st.pending = a.pending.len()
	a.kickSyncIfRemote()
	return nil
}

// commitPaths commits under the writer lock with HEAD compare-and-set retries.
func (a *Agent) commitPaths(ctx context.Context, paths []string, kind string) error {
	start := time.Now()
	var res memsync.CommitResult
	err := a.withLock(ctx, func() error {
		var err error
		for i := 0; i < maxCASRetries; i++ {
			res, err = a.repo.CommitPaths(paths)
			if !errors.Is(err, memsync.ErrHeadMoved) {
				break
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("commit %d paths: %w", len(paths), err)
	}
	a.inv.update(a.cfg.Repo, paths)
	if res.Hash == "" {
		return nil
	}
	a.inv.update(a.cfg.Repo, changedFiles(res.Changes)) // the files in new directories too
	a.metrics.CommitDone(kind, time.Since(start), a.now())
	a.st.lastCommit = &commitInfo{at: a.now(), added: res.Added, modified: res.Modified, deleted: res.Deleted}
	a.st.lastErr = ""
	a.st.detail = "committed " + plural(res.Added+res.Modified+res.Deleted, "file")
	a.repo.ScheduleIndexRefresh()
	a.log.Info("committed", "hash", short(res.Hash), "added", res.Added, "modified", res.Modified, "deleted", res.Deleted)
	return nil
}

// doReconcile is the full scan: at start, after a watcher overflow and every
// watch.reconcile; it catches anything the watcher missed.
func (a *Agent) doReconcile(ctx context.Context) error {
	if a.startPending {
		defer a.startReconciled()
	}
	dirty, err := a.repo.Reconcile()
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	if !a.startPending {
		// The start-up one needs no scan: the first inventory is built by a walk that
		// began after the watcher, and the paths this reconcile commits are noted.
		a.inv.scan(a.cfg.Repo, a.ignorer)
	}
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

// doSync commits what is pending, then fetches, merges and pushes. Failures put memd
// offline with an exponential backoff; one log line per state change, not per retry.
func (a *Agent) doSync(ctx context.Context) error {
	if !a.hasRemote() {
		return nil
	}
	if err := a.doCommit(ctx); err != nil {
		return err
	}
	a.setBusy("syncing")
	before, _ := a.repo.Head()
	var res memsync.SyncResult
	err := a.withLock(ctx, func() error {
		var err error
		res, err = a.repo.Sync(ctx, memsync.RemoteOptionsFromConfig(a.cfg))
		return err
	})
	a.st.ahead, a.st.behind = res.Ahead, res.Behind
	if err != nil {
		a.metrics.SyncDone(err, a.now())
		prev := a.st.syncState
		switch {
		case errors.Is(err, memsync.ErrUnrelatedHistory):
			a.st.syncState = metrics.StateError
		case errors.Is(err, memsync.ErrAuth):
			a.st.syncState = metrics.StateError
		default:
			a.st.syncState = metrics.StateOffline
		}
		a.st.syncErr = err.Error()
		wait := a.backoff.Next()
		if prev != a.st.syncState {
			a.log.Warn("sync failed; retrying with backoff", "state", a.st.syncState, "err", err, "next", wait.Round(time.Second))
		}
		a.syncWaiting.Store(true)
		time.AfterFunc(wait, func() { a.syncWaiting.Store(false); kick(a.k.sync) })
		return nil
	}
	a.backoff.Reset()
	if a.st.syncState != metrics.StateOK && a.st.syncState != "" {
		a.log.Info("sync recovered", "remote", a.cfg.Sync.Remote)
	}
	a.st.syncState = metrics.StateOK
	a.st.syncErr = ""
	a.metrics.SyncDone(nil, a.now())
	if len(res.Conflicts) > 0 {
		a.metrics.Conflicts(len(res.Conflicts))
		a.st.conflicts += len(res.Conflicts)
		a.log.Warn("merge kept both versions", "conflict_copies", res.Conflicts)
	}
	if res.Merged || res.FastForward {
		a.metrics.CommitDone("merge", 0, a.now())
		a.inventoryAfterMove(before)
	}
	if res.Pushed {
		t := a.now()
		a.st.lastPush = &t
		a.st.detail = fmt.Sprintf("pushed to %s/%s", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
	return nil
}

// doSleep runs the nightly phases for one schedule slot.
func (a *Agent) doSleep(ctx context.Context, slot time.Time) error {
	if err := a.doCommit(ctx); err != nil {
		return err
	}
	a.setBusy("sleeping")
	before, _ := a.repo.Head()
	rep, err := a.sleepRunner().Run(ctx, sleep.RunID(slot))
	for _, ph := range rep.Phases {
		a.metrics.SleepPhase(ph.Name, ph.Duration, ph.Err, a.now())
		if ph.Err == nil {
			_ = a.sched.MarkDone(ph.Name, a.now())
		}
	}
	a.metrics.Archived(rep.Counts["archived"])
	a.metrics.ArcsWritten(rep.Counts["arcs"])
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
	if ign, err := watcher.NewIgnorer(cfg.Repo, cfg.Watch.Ignore); err == nil {
		a.ignorer = ign
		a.repo.SetIgnore(ign.Ignored)
	}
	a.watch.SetIgnore(cfg.Watch.Ignore)
	pull.Reset(cfg.Sync.PullInterval.D())
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
	if a.cfg.HTTP.Listen == "" {
		return
	}
	srv := newServer(a)
	if err := srv.Start(); err != nil {
		a.log.Error("reload: http", "addr", a.cfg.HTTP.Listen, "err", err)
		return
	}
	a.server = srv
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

var _ = memd.ErrLockTimeout

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func (a *Agent) sleepRunner() *sleep.Runner {
	return sleep.NewRunner(a.cfg.Repo, a.repo, sleep.Options{
		Config: a.cfg, Now: a.now, Logger: a.log, Phases: a.cfg.Sleep.Phases,
	})
}
