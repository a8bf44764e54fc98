package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// pageJob is an action the page asked for, run by the owner goroutine (the one that owns the
// repo, §2) between its other jobs; done gets its error after the publish that follows it,
// so the page's answer is the new document.
type pageJob struct {
	name string
	fn   func(ctx context.Context) error
	done chan error
}

// pageActions is the agent's metrics.Actions.
type pageActions struct{ a *Agent }

// run hands fn to the owner and waits for it (or for ctx: the page gave up, or the owner is
// busy past the action's timeout; the job still runs when its turn comes).
func (p pageActions) run(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	j := pageJob{name: name, fn: fn, done: make(chan error, 1)}
	select {
	case p.a.page <- j:
	case <-ctx.Done():
		return fmt.Errorf("%s: memd is busy: %w", name, ctx.Err())
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s: still running: %w", name, ctx.Err())
	}
}

// badRequest marks the errors that are the request's own (what the page should say as is).
func badRequest(err error) error {
	for _, e := range []error{gitrepo.ErrNoConflict, gitrepo.ErrAmbiguousConflict, gitrepo.ErrBadKeep,
		gitrepo.ErrNoHistory, gitrepo.ErrNothingToRestore, gitrepo.ErrBadAt, safefs.ErrSymlink} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", metrics.ErrBadRequest, err)
		}
	}
	return err
}

// checkRel refuses a path the page sent that names nothing in the repo.
func checkRel(p string) error {
	if p == "" || safefs.CheckRel(p) != nil || p == ".git" || len(p) > 4096 {
		return fmt.Errorf("%w: %q names no memory in the repo", metrics.ErrBadRequest, p)
	}
	return nil
}

func (p pageActions) Resolve(ctx context.Context, path, keep string) error {
	if err := checkRel(path); err != nil {
		return err
	}
	return p.run(ctx, "resolve", func(ctx context.Context) error {
		out, err := p.a.sess.Resolve(ctx, path, keep)
		if err != nil {
			return badRequest(err)
		}
		p.a.noteActionCommit(out.Commit)
		return nil
	})
}

func (p pageActions) Restore(ctx context.Context, path, at string) error {
	if err := checkRel(path); err != nil {
		return err
	}
	return p.run(ctx, "restore", func(ctx context.Context) error {
		_, res, err := p.a.sess.Restore(ctx, path, at)
		if err != nil {
			return badRequest(err)
		}
		p.a.noteActionCommit(res)
		return nil
	})
}

// History and HistoryPage walk on a read-only view of the object store (sync/pathlog), off
// the owner goroutine: the daemon keeps committing while a long walk runs.
func (p pageActions) History(ctx context.Context, path string) (json.RawMessage, error) {
	if err := checkRel(path); err != nil {
		return nil, err
	}
	var log []gitrepo.LogEntry
	err := p.a.repo.History().LogEach(memd.NormalizePath(path), func(e gitrepo.LogEntry) bool {
		log = append(log, e)
		return ctx.Err() == nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, badRequest(err)
	}
	return json.Marshal(log)
}

// historyPageBudget bounds the time one page request walks, so a memory whose entries are
// far apart still answers soon, with how far the walk got; the page asks on.
const historyPageBudget = 250 * time.Millisecond

func (p pageActions) HistoryPage(ctx context.Context, path, from string, limit int) (json.RawMessage, error) {
	if err := checkRel(path); err != nil {
		return nil, err
	}
	pg, err := p.a.repo.History().LogPage(memd.NormalizePath(path), from, limit, 0, historyPageBudget)
	if errors.Is(err, gitrepo.ErrBadCursor) {
		return nil, fmt.Errorf("%w: %w", metrics.ErrBadRequest, err)
	}
	if err != nil {
		return nil, badRequest(err)
	}
	if pg.Entries == nil {
		pg.Entries = []gitrepo.LogEntry{}
	}
	return json.Marshal(pg)
}

// Versions reads both texts from the work tree (never through a symlink); no repo work, so
// not the owner's.
func (p pageActions) Versions(_ context.Context, copyPath string) (ours, theirs []byte, err error) {
	orig, ok := memd.ConflictCopyOriginal(copyPath)
	if !ok || checkRel(copyPath) != nil {
		return nil, nil, fmt.Errorf("%w: %q is not a conflict copy", metrics.ErrBadRequest, copyPath)
	}
	t, err := safefs.Open(p.a.cfg.Repo)
	if err != nil {
		return nil, nil, err
	}
	defer t.Close()
	if ours, err = t.ReadFile(copyPath); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", copyPath, err)
	}
	theirs, _ = t.ReadFile(orig) // gone on this side: an empty original
	return ours, theirs, nil
}

// Pause, Resume and AllowDeletes write what `memd pause` / `memd resume` write (the state
// directory's pause.json and allow-deletes) and kick the daemon; then the owner publishes.
func (p pageActions) Pause(ctx context.Context, reason string, d time.Duration, commitOnly bool) error {
	now := p.a.now()
	pz := statedir.Pause{Reason: reason, CommitOnly: commitOnly, At: now.UTC()}
	if d > 0 {
		pz.Until = now.Add(d).UTC()
	}
	return p.stateWrite(ctx, "pause", func(sd *statedir.Dir) error { return sd.WritePause(pz) })
}

func (p pageActions) Resume(ctx context.Context) error {
	return p.stateWrite(ctx, "resume", func(sd *statedir.Dir) error { return sd.ClearPause() })
}

func (p pageActions) AllowDeletes(ctx context.Context) error {
	return p.stateWrite(ctx, "allow-deletes", func(sd *statedir.Dir) error { return sd.AllowDeletes(p.a.now()) })
}

func (p pageActions) stateWrite(ctx context.Context, name string, write func(*statedir.Dir) error) error {
	sd, err := statedir.Create(p.a.cfg.StateDir())
	if err != nil {
		return err
	}
	defer sd.Close()
	if err := write(sd); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := sd.Kick(p.a.now()); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return p.run(ctx, name, func(context.Context) error { return nil })
}

// noteActionCommit is what commitPaths notes for a commit the owner made for the page: the
// inventory, the hour's count, the last commit, the index, and a push.
func (a *Agent) noteActionCommit(res memd.CommitResult) {
	if res.Hash == "" {
		return
	}
	a.filesChanged(changedFiles(res.Changes))
	a.metrics.CommitDone(memd.CommitChange, res.Duration, a.now())
	a.st.hours.add(a.now(), 1)
	a.st.lastCommit = &commitInfo{at: a.now(), added: res.Added, modified: res.Modified, deleted: res.Deleted}
	a.repo.ScheduleIndexRefresh()
	a.log.Info("committed", "hash", short(res.Hash), "added", res.Added, "modified", res.Modified, "deleted", res.Deleted)
	a.kickSyncIfRemote()
}
