package gitremote

import (
	"container/heap"
	"errors"
	"fmt"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Divergence is ahead/behind and the merge base of local and remote in one walk:
// git's paint_down_to_common on the one commit heap (commitheap.go). Every commit is
// painted with the sides it is reachable from; a commit reachable from both that no
// common ancestor already reached (not stale) is a merge-base candidate, and paints its
// ancestors stale. The walk ends once every queued commit is stale, so its cost follows the
// divergence; go-git's Commit.MergeBase first indexes every ancestor of the newer side,
// which at a few thousand commits cost the swarm's sync rounds hundreds of ms each.
//
// bases are the best common ancestors, newest first (as Commit.MergeBase returns them);
// none when the histories are unrelated or when one side contains the other (ahead or
// behind is 0: nothing to merge). The candidates always include every best common
// ancestor (a best one is never painted stale: nothing common descends from it); clock
// skew can add a redundant one, so two or more go through object.Independents.
//
// In a shallow clone (s a storer.ShallowStorer with graft points) the walk stops at the
// graft points as git's does: their parents are not there. When it ends without a base
// because of that (the base is below the cut, or a parent the remote sent stops at a commit
// the clone never had), the error is ErrShallow: the caller deepens the clone and asks again.
func Divergence(s storer.EncodedObjectStorer, local, remote plumbing.Hash) (ahead, behind int, bases []*object.Commit, err error) {
	if local == remote {
		return 0, 0, nil, nil
	}
	const fromLocal, fromRemote, stale = 1, 2, 4
	shallow := shallowSet(s)
	cut := false // the walk stopped at a graft point
	flags := map[plumbing.Hash]uint8{}
	// expanded: commits whose parents were pushed. Commit times are not a topological order
	// (equal within a second, or skewed), so a commit may be expanded before a child reaches
	// it from the other side; it is then queued again as open, so the walk cannot stop
	// before its new flags reach the ancestors it already painted.
	expanded := map[plumbing.Hash]bool{}
	q := &commitHeap{}
	push := func(h plumbing.Hash, f uint8) error {
		if h.IsZero() {
			return nil
		}
		old := flags[h]
		if old|f == old {
			return nil
		}
		flags[h] = old | f
		c, err := object.GetCommit(s, h)
		if err != nil {
			if len(shallow) > 0 && errors.Is(err, plumbing.ErrObjectNotFound) {
				return fmt.Errorf("merge base: read commit %s: %w", h, ErrShallow)
			}
			return fmt.Errorf("merge base: read commit %s: %w", h, err)
		}
		heap.Push(q, paintedCommit{c: c, f: old | f, open: (old|f)&stale == 0 || expanded[h]})
		return nil
	}
	if err := push(local, fromLocal); err != nil {
		return 0, 0, nil, err
	}
	if err := push(remote, fromRemote); err != nil {
		return 0, 0, nil, err
	}
	var cands []*object.Commit
	for q.Len() > 0 && q.open > 0 {
		it := heap.Pop(q).(paintedCommit)
		h := it.c.Hash
		f := flags[h]
		if f&(fromLocal|fromRemote) == fromLocal|fromRemote && f&stale == 0 {
			cands = append(cands, it.c)
			f |= stale
			flags[h] = f
		}
		expanded[h] = true
		if shallow[h] {
			cut = cut || len(it.c.ParentHashes) > 0
			continue // a graft point: its parents are not in this clone
		}
		for _, p := range it.c.ParentHashes {
			if err := push(p, f); err != nil {
				return 0, 0, nil, err
			}
		}
	}
	ahead, behind = countSides(flags, fromLocal, fromRemote, stale)
	if ahead == 0 || behind == 0 {
		return ahead, behind, nil, nil
	}
	if len(cands) == 0 && cut {
		return ahead, behind, nil, fmt.Errorf("merge base of %s and %s: %w", local.String()[:12], remote.String()[:12], ErrShallow)
	}
	if len(cands) > 1 {
		if cands, err = object.Independents(cands); err != nil {
			return 0, 0, nil, fmt.Errorf("merge base of %s and %s: %w", local.String()[:12], remote.String()[:12], err)
		}
	}
	newestFirst(cands)
	return ahead, behind, cands, nil
}

// countSides counts the commits painted from one side only: ahead (local's), behind
// (remote's).
func countSides(flags map[plumbing.Hash]uint8, fromLocal, fromRemote, stale uint8) (ahead, behind int) {
	for _, f := range flags {
		switch f &^ stale {
		case fromLocal:
			ahead++
		case fromRemote:
			behind++
		}
	}
	return ahead, behind
}

// newestFirst orders merge bases as go-git's MergeBase does; equal times by hash, so the
// choice is stable.
func newestFirst(cands []*object.Commit) {
	sort.SliceStable(cands, func(i, j int) bool {
		ti, tj := cands[i].Committer.When, cands[j].Committer.When
		if !ti.Equal(tj) {
			return ti.After(tj)
		}
		return cands[i].Hash.String() < cands[j].Hash.String()
	})
}

// ErrShallow: the merge base is below a shallow clone's graft points (.git/shallow); the
// clone must be deepened (`git fetch --deepen`) before the histories can be merged.
var ErrShallow = errors.New("the merge base is below the shallow clone's history")

// shallowSet is the graft points of a shallow clone, none for a full one (or a storer that
// does not say).
func shallowSet(s storer.EncodedObjectStorer) map[plumbing.Hash]bool {
	ss, ok := s.(storer.ShallowStorer)
	if !ok {
		return nil
	}
	hs, err := ss.Shallow()
	if err != nil || len(hs) == 0 {
		return nil
	}
	m := make(map[plumbing.Hash]bool, len(hs))
	for _, h := range hs {
		m[h] = true
	}
	return m
}
