package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"

	"github.com/memd-dev/memd"
)

// What a person asks for from `memd resolve` / `memd restore` or the page: done under the
// writer lock (so it never races `memd run`'s commits or a sleep), as a commit with the
// action's trailer (sync.ActionMessage), and told to the running daemon as an event.

// Resolve ends the conflict p names (a copy, or an original with one copy) keeping ours,
// theirs or both. Edits not yet committed are committed first, so the version dropped is in
// history.
func (s *Session) Resolve(ctx context.Context, p, keep string) (gitrepo.Resolved, error) {
	var out gitrepo.Resolved
	err := s.withCommitted(ctx, func() error {
		c, err := gitrepo.FindConflict(s.cfg.Repo, p, s.ignorer.Ignored)
		if err != nil {
			return err
		}
		out, err = s.repo.Resolve(c, keep)
		if err != nil {
			return err
		}
		what := "keep " + keep
		if out.Kept != "" {
			what = "kept both: the copy is now " + out.Kept
		}
		return s.QueueEvent(statusline.KindOK, statusline.Part{Text: "resolved", Kind: statusline.KindOK},
			statusline.Part{Text: " " + c.Path}, statusline.Part{Text: " (" + what + ")", Kind: statusline.KindDim})
	})
	return out, err
}

// Restore brings p back as a new commit: as it was at at (a commit or an RFC3339 time), or
// without at the archived or last deleted version (sync.PlanRestore).
func (s *Session) Restore(ctx context.Context, p, at string) (target string, res memd.CommitResult, err error) {
	err = s.withCommitted(ctx, func() error {
		var v gitrepo.Version
		if target, v, err = s.repo.History().PlanRestore(p, at); err != nil {
			return err
		}
		if res, err = s.repo.History().Restore(target, v); err != nil {
			return err
		}
		from := v.Commit
		if len(from) > 12 {
			from = from[:12]
		}
		return s.QueueEvent(statusline.KindOK, statusline.Part{Text: "restored", Kind: statusline.KindOK},
			statusline.Part{Text: " " + target}, statusline.Part{Text: " from " + from, Kind: statusline.KindDim})
	})
	return target, res, err
}

// withCommitted commits what differs from HEAD, then runs fn, all under the writer lock.
func (s *Session) withCommitted(ctx context.Context, fn func() error) error {
	return s.WithLock(ctx, func() error {
		dirty, err := s.repo.Reconcile()
		if err != nil {
			return fmt.Errorf("reconcile %s: %w", s.cfg.Repo, err)
		}
		if dirty = s.cutFilter(dirty); len(dirty) > 0 {
			if _, err := s.repo.CommitPaths(dirty); err != nil {
				return fmt.Errorf("commit pending edits first: %w", err)
			}
		}
		return fn()
	})
}

// queuedEvent is an event a one-shot command leaves for the daemon (statedir.EventsDir).
type queuedEvent struct {
	Kind  string            `json:"kind"`
	Parts []statusline.Part `json:"parts"`
}

// QueueEvent leaves an event for the running daemon's document and kicks it; with no daemon
// the next `memd run` shows it.
func (s *Session) QueueEvent(kind string, parts ...statusline.Part) error {
	d, err := statedir.Create(s.cfg.StateDir())
	if err != nil {
		return err
	}
	defer d.Close()
	now := s.now()
	if err := d.QueueEvent(now, queuedEvent{Kind: kind, Parts: parts}); err != nil {
		return err
	}
	return d.Kick(now)
}

// takeQueuedEvents moves what one-shot commands queued into the event log (owner only).
func (a *Agent) takeQueuedEvents() {
	if ents, err := os.ReadDir(filepath.Join(a.cfg.StateDir(), statedir.EventsDir)); err != nil || len(ents) == 0 {
		return // the common case, one syscall per publish
	}
	d, err := statedir.Open(a.cfg.StateDir())
	if err != nil {
		return
	}
	defer d.Close()
	raw, err := d.TakeEvents()
	if err != nil {
		a.log.Warn("queued events", "err", err)
	}
	for _, b := range raw {
		var e queuedEvent
		if json.Unmarshal(b, &e) == nil && len(e.Parts) > 0 {
			a.event(e.Kind, e.Parts...)
		}
	}
}
