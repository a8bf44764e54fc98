package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepo"

	"github.com/memd-dev/memd/internal/gitpath"
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
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	// Opened the way `memd run` opens it: a merge or a sleep a crash left half done is
	// finished or undone before anything here reads the tree (docs/ARCHITECTURE.md §10).
	sess, err := agent.Open(ctx, a.cfg, agent.OpenOptions{Logger: a.log, Now: a.now, Who: "memd sync"})
	if err != nil {
		return a.fail("sync: %v", err)
	}
	defer sess.Close()
	repo := sess.Repo()
	// The writer lock is held for local work only (docs/ARCHITECTURE.md §4): while this
	// commit reads its paths, and around each round's merge and checkout, never a fetch or
	// a push.
	beforeCommit, okCommit := head(repo)
	res, err := sess.CommitChanges(ctx)
	if err != nil {
		return a.fail("sync: %v", err)
	}
	report := statedir.Report{Command: "sync"}
	if res.Hash != "" {
		fmt.Fprintf(a.stdout, "committed +%d ~%d -%d\n", res.Added, res.Modified, res.Deleted)
		report.Commits++
		report.Commit = &statedir.CommitDone{Added: res.Added, Modified: res.Modified, Deleted: res.Deleted}
	}
	// Whatever became of the sync, a running daemon shows what this command did.
	defer func() { a.reportToDaemon(report) }()
	var steps []oneShotHook
	if okCommit && res.Hash != "" {
		steps = append(steps, oneShotHook{memd.HookAfterCommit, beforeCommit, res.Hash})
	}
	// Hooks run outside the lock, whatever became of the sync: a commit made before a
	// failing fetch still moved HEAD.
	defer func() { a.runHooks(repo, steps...) }()
	return syncWithRemote(ctx, a, sess, &report, &steps)
}

// syncWithRemote is cmdSync's fetch, merge and push, after its commit: it adds what the
// sync did to report and its after_sync hook to steps, which cmdSync's deferred calls
// hand on once this returns, whatever became of the sync.
func syncWithRemote(ctx context.Context, a *app, sess *agent.Session, report *statedir.Report, steps *[]oneShotHook) int {
	repo := sess.Repo()
	beforeSync, okSync := head(repo)
	ok, err := repo.HasRemote(a.cfg.Sync.Remote)
	if err != nil || !ok {
		return a.fail("sync: no remote %q in %s (set one with `git remote add` or `memd init --remote URL`)", a.cfg.Sync.Remote, a.cfg.Repo)
	}
	sr, err := sess.SyncOnce(ctx, nil, nil)
	report.Pushed, report.Merged, report.Conflicts = sr.Pushed, sr.Merged || sr.FastForward, sr.Conflicts
	if sr.Merged {
		report.Commits++
	}
	if after, ok := head(repo); ok && okSync {
		*steps = append(*steps, oneShotHook{memd.HookAfterSync, beforeSync, after})
	}
	if err != nil {
		return syncFailure(a, err)
	}
	if err := sess.RefreshIndex(); err != nil {
		a.log.Warn("index refresh", "err", err)
	}
	printSynced(a, sr)
	return exitOK
}

// syncFailure reports a failed sync, with what became of the local commits where the
// error tells, and returns the exit code.
func syncFailure(a *app, err error) int {
	switch {
	case errors.Is(err, gitremote.ErrAuth):
		return a.fail("sync: authentication failed: %v", err)
	case errors.Is(err, gitrepo.ErrUnrelatedHistory):
		return a.fail("sync: %v; local history kept, nothing merged", err)
	case errors.Is(err, gitpath.ErrUnsafeTree):
		return a.fail("sync: %v; the remote's commit was not checked out, local commits are kept", err)
	}
	return a.fail("sync: %v (local commits are kept; memd run retries)", err)
}

// printSynced tells what a successful sync did: the merge or fast-forward, the push, and
// where the branch stands against the remote's.
func printSynced(a *app, sr gitrepo.SyncResult) {
	switch {
	case sr.Merged:
		fmt.Fprintf(a.stdout, "merged %s/%s", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
		if len(sr.Conflicts) > 0 {
			say(a.stdout, " (%d conflict copies kept: %v)", len(sr.Conflicts), sr.Conflicts)
		}
		fmt.Fprintln(a.stdout)
	case sr.FastForward:
		fmt.Fprintf(a.stdout, "fast-forwarded to %s/%s\n", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
	if sr.Pushed {
		fmt.Fprintf(a.stdout, "pushed to %s/%s\n", a.cfg.Sync.Remote, a.cfg.Sync.Branch)
	}
	fmt.Fprintf(a.stdout, "in sync (ahead %d, behind %d)\n", sr.Ahead, sr.Behind)
}
