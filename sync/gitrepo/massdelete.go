package gitrepo

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/statedir"
)

// The mass deletion brake (docs/ARCHITECTURE.md §11): a commit of writers' changes, or a fetched commit,
// that would delete more than Options.MaxDeletes memory files and more than
// memd.MaxDeletesShare of them is not made, or not merged. Nothing is lost either way:
// the files a writer deleted stay deleted on disk and uncommitted; the remote's commit
// stays on the remote-tracking ref, unmerged (and local commits unpushed, since they
// cannot go out without it). A path whose blob the same change adds elsewhere is a
// rename (an archive move is one), not a deletion. Options.Deletions lets one such change
// through (memd resume --allow-deletes) and is taken once it is in.
//
// Locally the brake judges a window, not one commit: an `rm -r` that lands in several quiet
// periods, or that the start-up reconcile splits, is one deletion. The local side counts the
// memory files its commits deleted in the last DeletionWindow; a change is held when its own
// deletions and the window's together trip the bar (the share taken of the files there were
// before the window's deletions). A fetched change is judged on its own: the machine where an
// rm ran holds its parts there, and summing what every other machine fetched in ten minutes
// would add up the ordinary deletions of a busy team (ten machines writing at once tripped
// it) into a mass deletion no one made. While a side is held its window
// stops sliding (DeleteSide.HeldAt), so a held batch is not let through by waiting; the
// first change of that side that passes ends the hold, and a release (allow-deletes)
// empties the window. The window is kept in the state directory (statedir.DeletesFile),
// so a restart in the middle of an rm does not start the count over.

// DeletionWindow is how far back the brake counts a side's committed deletions.
const DeletionWindow = 10 * time.Minute

// ErrMassDeletion is what a held mass deletion's error wraps (*MassDeletionError says
// how many and on which side).
var ErrMassDeletion = errors.New("mass deletion")

// DefaultMaxDeletes is sync.max_deletes' default, used when Options.MaxDeletes is 0.
const DefaultMaxDeletes = 50

// Sides of a mass deletion.
const (
	SideLocal  = "local"  // a commit of writers' changes
	SideRemote = "remote" // a fetched commit
)

// MassDeletionError is a commit or merge the brake held.
type MassDeletionError struct {
	Side    string // SideLocal or SideRemote
	Deleted int    // memory files it would delete (renames not counted), Earlier included
	Total   int    // memory files before it (before the window's deletions)
	Earlier int    // of Deleted, those already committed (or merged) in the window
	Max     int    // sync.max_deletes in force
}

func (e *MassDeletionError) Error() string {
	where := "locally"
	if e.Side == SideRemote {
		where = "by the remote"
	}
	if e.Earlier > 0 {
		return fmt.Sprintf("mass deletion: %d memory files deleted %s in the last %d minutes (of %d; %d already in); memd resume --allow-deletes lets the rest through",
			e.Deleted, where, int(DeletionWindow.Minutes()), e.Total, e.Earlier)
	}
	return fmt.Sprintf("mass deletion: %d memory files deleted %s (of %d); memd resume --allow-deletes lets it through",
		e.Deleted, where, e.Total)
}

func (e *MassDeletionError) Unwrap() error { return ErrMassDeletion }

// DeletionAllowance lets one held mass deletion through and keeps the brake's window:
// *statedir.Dir, where `memd resume --allow-deletes` leaves its allow-deletes file.
type DeletionAllowance interface {
	DeletesAllowed() bool
	TakeAllowDeletes() error
	// UpdateDeletes reads the window, lets update change it and writes it back when update
	// says so, with no other process's read-modify-write in between (statedir's flock).
	UpdateDeletes(update func(w *statedir.DeleteWindow, readErr error) (write bool)) error
}

func (r *Repo) maxDeletes() int {
	if r.opts.MaxDeletes > 0 {
		return r.opts.MaxDeletes
	}
	return DefaultMaxDeletes
}

// deletionSet is a change set's memory deletions (path → the blob it deletes) and the
// blobs it adds (id → how many paths), so renames can be told apart.
type deletionSet struct {
	deleted map[string]plumbing.Hash
	added   map[plumbing.Hash]int
}

// count is the deletions that are not renames: each added blob pairs with one deletion.
func (d deletionSet) count() int {
	n := 0
	used := make(map[plumbing.Hash]int, len(d.added))
	for _, h := range d.deleted {
		if used[h] < d.added[h] {
			used[h]++
			continue
		}
		n++
	}
	return n
}

// brakeVerdict is a change the brake let pass: n memory files it deletes (renames not
// counted), take when it went through on the allowance.
type brakeVerdict struct {
	side string
	n    int
	take bool
}

// brake decides a change set on side: a verdict when it may go in (take: over the bar but
// allowed; the caller notes the verdict once the change is in), a *MassDeletionError
// otherwise. total counts the memory files before the change and is called only when the
// cheap count is over the bar.
func (r *Repo) brake(side string, d deletionSet, total func() (int, error)) (brakeVerdict, error) {
	v := brakeVerdict{side: side}
	if len(d.deleted) == 0 {
		return v, nil
	}
	if v.n = d.count(); v.n == 0 {
		return v, nil
	}
	max := r.maxDeletes()
	now := r.opts.Now()
	var held error
	err := r.updateWindow(func(win *statedir.DeleteWindow) bool {
		s := windowSide(win, side)
		earlier := 0
		if side == SideLocal {
			earlier = recentDeletes(*s, now)
		}
		if v.n+earlier <= max {
			return false
		}
		all, err := total()
		if err != nil {
			held = fmt.Errorf("mass deletion check: %w", err)
			return false
		}
		if !memd.MassDeletion(v.n+earlier, all+earlier, max) {
			return false
		}
		if a := r.opts.Deletions; a != nil && a.DeletesAllowed() {
			r.log.Warn("mass deletion let through (memd resume --allow-deletes)", "side", side, "deleted", v.n+earlier, "of", all+earlier)
			v.take = true
			return false
		}
		held = &MassDeletionError{Side: side, Deleted: v.n + earlier, Total: all + earlier, Earlier: earlier, Max: max}
		if s.HeldAt.IsZero() {
			s.HeldAt = now
			return true
		}
		return false
	})
	if err != nil {
		r.log.Warn("mass deletion window not written", "err", err)
	}
	return v, held
}

// noteDeletes records a change the brake let pass, once it is in: its deletions join the
// window, a hold of its side ends, and a release (take) empties the window and uses up
// the permission. Nothing is read or written for a change without deletions on a side
// with no hold.
func (r *Repo) noteDeletes(v brakeVerdict) {
	if v.side == "" || v.n == 0 && !v.take && r.deletesRead && windowSide(&r.deletes, v.side).HeldAt.IsZero() {
		return
	}
	now := r.opts.Now()
	if err := r.updateWindow(func(win *statedir.DeleteWindow) bool {
		s := windowSide(win, v.side)
		was := len(s.Marks)
		held := !s.HeldAt.IsZero()
		if v.take {
			*s = statedir.DeleteSide{}
		} else {
			s.HeldAt = time.Time{}
			s.Marks = liveMarks(s.Marks, now)
			if v.n > 0 && v.side == SideLocal {
				s.Marks = append(s.Marks, statedir.DeleteMark{At: now, N: v.n})
			}
		}
		return v.take || held || len(s.Marks) != was
	}); err != nil {
		r.log.Warn("mass deletion window not written", "err", err)
	}
	if v.take {
		r.takeAllowance()
	}
}

// takeAllowance uses up the permission once the deletion it let through is in.
func (r *Repo) takeAllowance() {
	if a := r.opts.Deletions; a != nil {
		if err := a.TakeAllowDeletes(); err != nil {
			r.log.Warn("allow-deletes not removed", "err", err)
		}
	}
}

// recentDeletes sums s's deletions in the window that ends now, or when s's hold began.
func recentDeletes(s statedir.DeleteSide, now time.Time) int {
	end := now
	if !s.HeldAt.IsZero() {
		end = s.HeldAt
	}
	n := 0
	for _, m := range s.Marks {
		if m.At.After(end.Add(-DeletionWindow)) {
			n += m.N
		}
	}
	return n
}

// liveMarks drops the marks the window at now no longer holds.
func liveMarks(ms []statedir.DeleteMark, now time.Time) []statedir.DeleteMark {
	var keep []statedir.DeleteMark
	for _, m := range ms {
		if m.At.After(now.Add(-DeletionWindow)) {
			keep = append(keep, m)
		}
	}
	return keep
}

func windowSide(w *statedir.DeleteWindow, side string) *statedir.DeleteSide {
	if side == SideRemote {
		return &w.Remote
	}
	return &w.Local
}

// updateWindow runs fn on the brake's window as the state directory has it (another memd
// process, or this one before a restart, may have written it), else on the one kept in
// memory, and keeps what fn leaves, writing it back when fn says so. With a state
// directory the read, fn and the write are one step no other process's update comes
// between (DeletionAllowance.UpdateDeletes): `memd run` and a one-shot `memd sync` both
// count into the window, and neither drops the other's marks. A window that cannot be
// written is still kept in memory (the error says so). Caller holds r.mu.
func (r *Repo) updateWindow(fn func(w *statedir.DeleteWindow) (write bool)) error {
	ran := false
	apply := func(w *statedir.DeleteWindow) bool {
		ran = true
		r.deletesRead = true
		write := fn(w)
		r.deletes = cloneWindow(*w)
		return write
	}
	if a := r.opts.Deletions; a != nil {
		err := a.UpdateDeletes(func(w *statedir.DeleteWindow, readErr error) bool {
			if readErr != nil {
				r.log.Warn("mass deletion window not read; the one in memory is used", "err", readErr)
				*w = cloneWindow(r.deletes)
			}
			return apply(w)
		})
		if ran || err == nil {
			return err
		}
		r.log.Warn("mass deletion window not locked; the one in memory is used", "err", err)
	}
	w := cloneWindow(r.deletes)
	apply(&w)
	return nil
}

func cloneWindow(w statedir.DeleteWindow) statedir.DeleteWindow {
	w.Local.Marks = append([]statedir.DeleteMark(nil), w.Local.Marks...)
	w.Remote.Marks = append([]statedir.DeleteMark(nil), w.Remote.Marks...)
	return w
}

// memoryFilesIn counts the memory files of tree (zero: none). The last answer is kept
// (r.brakeTotal, under r.mu): a held deletion is retried every few seconds against the
// same HEAD, and the count walks the whole tree.
func (r *Repo) memoryFilesIn(tc *treeCache, tree plumbing.Hash) (int, error) {
	if tree.IsZero() {
		return 0, nil
	}
	if r.brakeTotal.tree == tree {
		return r.brakeTotal.n, nil
	}
	n, err := countMemoryFiles(tc, tree)
	if err == nil {
		r.brakeTotal.tree, r.brakeTotal.n = tree, n
	}
	return n, err
}

func countMemoryFiles(tc *treeCache, tree plumbing.Hash) (int, error) {
	n := 0
	err := tc.walkTree(tree, "", func(p string, _ object.TreeEntry) error {
		if memd.IsMemoryFile(p) {
			n++
		}
		return nil
	})
	return n, err
}

// brakeLocal is the brake for a commit's edits against base.
func (s *stager) brakeLocal() (brakeVerdict, error) {
	d := deletionSet{deleted: map[string]plumbing.Hash{}, added: map[plumbing.Hash]int{}}
	for p, e := range s.edits {
		switch {
		case e.del && memd.IsMemoryFile(p):
			d.deleted[p] = plumbing.ZeroHash // filled below: renames are told apart by blob
		case e.op == 'A':
			d.added[e.hash]++
		}
	}
	for p := range d.deleted {
		he, ok, err := s.headEntry(p)
		if err != nil {
			return brakeVerdict{}, err
		}
		if ok {
			d.deleted[p] = he.Hash
		}
	}
	return s.r.brake(SideLocal, d, func() (int, error) { return s.r.memoryFilesIn(s.treeCache, s.base) })
}

// brakeRemote is the brake for bringing pl's target in over localTree.
func (r *Repo) brakeRemote(pl *integratePlan, localTree plumbing.Hash) error {
	d := deletionSet{deleted: map[string]plumbing.Hash{}, added: map[plumbing.Hash]int{}}
	for p, c := range pl.changes {
		switch {
		case c.From != nil && c.To == nil && memd.IsMemoryFile(p):
			d.deleted[p] = c.From.Hash
		case c.From == nil && c.To != nil:
			d.added[c.To.Hash]++
		}
	}
	v, err := r.brake(SideRemote, d, func() (int, error) {
		return r.memoryFilesIn(newTreeCache(r.repo.Storer), localTree)
	})
	pl.brake = v
	return err
}
