package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
	memsync "github.com/memd-dev/memd/sync"
)

func init() {
	register("sync", "once: commit pending changes, fetch, merge, push (exit 1 on failure)", cmdSync)
}

func cmdSync(a *app, args []string) int {
	fs := a.flags("sync", "")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up after this long")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	ign, err := repofiles.New(a.cfg.Repo, a.cfg.Watch.Ignore)
	if err != nil {
		return a.fail("sync: ignore rules: %v", err)
	}
	opts := memsync.OptionsFromConfig(a.cfg)
	opts.Now, opts.Logger, opts.Ignore = a.now, a.log, ign.Ignored
	repo, err := memsync.Open(a.cfg.Repo, opts)
	if err != nil {
		return a.fail("sync: %v", err)
	}
	defer repo.Close()
	// A git or memd killed while holding .git/index.lock leaves it behind (see memd run).
	if err := repo.ClearStaleIndexLock(); err != nil {
		a.log.Warn("index lock", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// The writer lock is held for local work only (DESIGN §4): this commit, and each
	// round's merge and checkout inside Sync, never a fetch or a push.
	locked := func(fn func() error) error {
		lk, err := memd.AcquireLock(ctx, a.cfg.LockPath(), memd.LockOptions{Timeout: a.cfg.Lock.Timeout.D(), Context: "memd sync", Logger: a.log})
		if err != nil {
			return err
		}
		defer lk.Release()
		return fn()
	}
	var res memsync.CommitResult
	beforeCommit, okCommit := head(repo)
	err = locked(func() error {
		if _, err := repo.FinishInterruptedMerge(); err != nil {
			return fmt.Errorf("finish interrupted merge: %w", err)
		}
		dirty, err := repo.Reconcile()
		if err != nil {
			return err
		}
		if res, err = repo.CommitPaths(dirty); err != nil {
			return fmt.Errorf("commit: %w", err)
		}
		return nil
	})
	if err != nil {
		return a.fail("sync: %v", err)
	}
	if res.Hash != "" {
		fmt.Fprintf(a.stdout, "committed +%d ~%d -%d\n", res.Added, res.Modified, res.Deleted)
	}
	var steps []oneShotHook
	if okCommit && res.Hash != "" {
		steps = append(steps, oneShotHook{memd.HookAfterCommit, beforeCommit, res.Hash})
	}
	// Hooks run outside the lock, whatever became of the sync: a commit made before a
	// failing fetch still moved HEAD.
	defer func() { a.runHooks(repo, steps...) }()
	beforeSync, okSync := head(repo)
	ok, err := repo.HasRemote(a.cfg.Sync.Remote)
	if err != nil || !ok {
		return a.fail("sync: no remote %q in %s (set one with `git remote add` or `memd init --remote URL`)", a.cfg.Sync.Remote, a.cfg.Repo)
	}
	ro := memsync.RemoteOptionsFromConfig(a.cfg)
	ro.LocalWork = locked
	sr, err := repo.Sync(ctx, ro)
	if after, ok := head(repo); ok && okSync {
		steps = append(steps, oneShotHook{memd.HookAfterSync, beforeSync, after})
	}
	if err != nil {
		switch {
		case errors.Is(err, memsync.ErrAuth):
			return a.fail("sync: authentication failed: %v", err)
		case errors.Is(err, memsync.ErrUnrelatedHistory):
			return a.fail("sync: %v; local history kept, nothing merged", err)
		case errors.Is(err, memsync.ErrUnsafeTree):
			return a.fail("sync: %v; the remote's commit was not checked out, local commits are kept", err)
		}
		return a.fail("sync: %v (local commits are kept; memd run retries)", err)
	}
	if err := repo.RefreshIndex(); err != nil {
		a.log.Warn("index refresh", "err", err)
	}
	switch {
	case sr.Merged:
		fmt.Fprintf(a.stdout, "merged %s/%s", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
		if len(sr.Conflicts) > 0 {
			fmt.Fprintf(a.stdout, " (%d conflict copies kept: %v)", len(sr.Conflicts), sr.Conflicts)
		}
		fmt.Fprintln(a.stdout)
	case sr.FastForward:
		fmt.Fprintf(a.stdout, "fast-forwarded to %s/%s\n", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
	if sr.Pushed {
		fmt.Fprintf(a.stdout, "pushed to %s/%s\n", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
	fmt.Fprintf(a.stdout, "in sync (ahead %d, behind %d)\n", sr.Ahead, sr.Behind)
	return exitOK
}
