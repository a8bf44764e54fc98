package gitrepo

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd"
)

// The mass deletion brake (DESIGN §9): a commit of writers' changes, or a fetched commit,
// that would delete more than Options.MaxDeletes memory files and more than
// memd.MaxDeletesShare of them is not made, or not merged. Nothing is lost either way:
// the files a writer deleted stay deleted on disk and uncommitted; the remote's commit
// stays on the remote-tracking ref, unmerged (and local commits unpushed, since they
// cannot go out without it). A path whose blob the same change adds elsewhere is a
// rename (an archive move is one), not a deletion. Options.Deletions lets one such change
// through (memd resume --allow-deletes) and is taken once it is in.

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
	Deleted int    // memory files it would delete (renames not counted)
	Total   int    // memory files before it
	Max     int    // sync.max_deletes in force
}

func (e *MassDeletionError) Error() string {
	where := "locally"
	if e.Side == SideRemote {
		where = "by the remote"
	}
	return fmt.Sprintf("mass deletion: %d memory files deleted %s (of %d); memd resume --allow-deletes lets it through",
		e.Deleted, where, e.Total)
}

func (e *MassDeletionError) Unwrap() error { return ErrMassDeletion }

// DeletionAllowance lets one held mass deletion through: *statedir.Dir, where `memd resume
// --allow-deletes` leaves its allow-deletes file.
type DeletionAllowance interface {
	DeletesAllowed() bool
	TakeAllowDeletes() error
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

// brake decides a change set on side: nil (and take false) when under the bar; nil with
// take true when over it but allowed (the caller takes the allowance once the change is
// in); a *MassDeletionError otherwise. total counts the memory files before the change
// and is called only when the cheap count is over the bar.
func (r *Repo) brake(side string, d deletionSet, total func() (int, error)) (take bool, err error) {
	max := r.maxDeletes()
	if len(d.deleted) <= max {
		return false, nil
	}
	n := d.count()
	if n <= max {
		return false, nil
	}
	all, err := total()
	if err != nil {
		return false, fmt.Errorf("mass deletion check: %w", err)
	}
	if !memd.MassDeletion(n, all, max) {
		return false, nil
	}
	if a := r.opts.Deletions; a != nil && a.DeletesAllowed() {
		r.log.Warn("mass deletion let through (memd resume --allow-deletes)", "side", side, "deleted", n, "of", all)
		return true, nil
	}
	return false, &MassDeletionError{Side: side, Deleted: n, Total: all, Max: max}
}

// takeAllowance uses up the permission once the deletion it let through is in.
func (r *Repo) takeAllowance() {
	if a := r.opts.Deletions; a != nil {
		if err := a.TakeAllowDeletes(); err != nil {
			r.log.Warn("allow-deletes not removed", "err", err)
		}
	}
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
func (s *stager) brakeLocal() (take bool, err error) {
	d := deletionSet{deleted: map[string]plumbing.Hash{}, added: map[plumbing.Hash]int{}}
	for p, e := range s.edits {
		switch {
		case e.del && memd.IsMemoryFile(p):
			d.deleted[p] = plumbing.ZeroHash // filled below, only when over the bar
		case e.op == 'A':
			d.added[e.hash]++
		}
	}
	if len(d.deleted) > s.r.maxDeletes() {
		for p := range d.deleted {
			he, ok, err := s.headEntry(p)
			if err != nil {
				return false, err
			}
			if ok {
				d.deleted[p] = he.Hash
			}
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
	take, err := r.brake(SideRemote, d, func() (int, error) {
		return r.memoryFilesIn(newTreeCache(r.repo.Storer), localTree)
	})
	pl.takeAllowance = take
	return err
}
