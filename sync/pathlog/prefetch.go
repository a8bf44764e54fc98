package pathlog

import (
	"github.com/go-git/go-git/v5/plumbing"
)

// A walk without the commit-graph spends about half its time reading commits (find the
// object, inflate it, parse the header) and half reading the path's trees, and the next
// commit's id is known as soon as the one before is read. So a long walk reads the
// first-parent chain ahead on a second core, through a store of its own (a RawReader is
// one goroutine's), while the walk compares trees: `memd log` of a path through 1,000,000
// commits without a graph went from 1.17x `git log --follow` to well under it (issue 48;
// bench/RESULTS.md). The walk still checks every commit it takes is the parent it asked
// for, so the read-ahead can only be wasted, never wrong.

// prefetchAfter is how many commits a walk reads itself before it starts reading ahead:
// a restore of a recent deletion or a page of 20 never pays for the second store.
const prefetchAfter = 256

// prefetchDepth is how far ahead the reader may get (commits of a few hundred bytes each).
// A variable for tests: a small one keeps a reader that was not stopped blocked, seen.
var prefetchDepth = 4096

// prefetcher reads the first-parent chain from one commit on, until it meets a commit the
// graph holds (the walk reads those from the graph), a root, an error, or stop.
type prefetcher struct {
	ch   chan prefetched
	stop chan struct{}
	done chan struct{}
}

type prefetched struct {
	c   *commit
	err error
}

// startPrefetch reads ahead from id (the parent the walk will ask for next), or is nil
// when the Source cannot open a second store.
func (s *Source) startPrefetch(id plumbing.Hash) *prefetcher {
	if s.newStore == nil {
		return nil
	}
	st, release := s.newStore()
	pf := &prefetcher{ch: make(chan prefetched, prefetchDepth), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pf.done)
		defer release()
		defer close(pf.ch)
		for h := id; !h.IsZero(); {
			if _, ok := s.graph.find(h); ok {
				return
			}
			c, err := readCommit(st, h)
			select {
			case pf.ch <- prefetched{c, err}:
			case <-pf.stop:
				return
			}
			if err != nil || len(c.parents) == 0 {
				return
			}
			h = c.parents[0]
		}
	}()
	return pf
}

// next is the commit read ahead if it is want; ok false when the reader has ended, failed
// (a pack repacked away under it: the walk's own store knows to look again) or read
// another: then the walk reads want itself, and the reader is stopped.
func (pf *prefetcher) next(want plumbing.Hash) (*commit, bool) {
	got, open := <-pf.ch
	if !open || got.err != nil || got.c.id != want {
		return nil, false
	}
	return got.c, true
}

// close stops the reader and waits for it to release its store.
func (pf *prefetcher) close() {
	if pf == nil {
		return
	}
	close(pf.stop)
	<-pf.done
}
