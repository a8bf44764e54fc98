package gitrepo

import (
	"cmp"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/memd-dev/memd/sync/gitstore"
)

// warmHot makes the biggest directories' trees of root hot, with their pieces (gitstore/treez.go),
// once a full index refresh has decoded every tree of HEAD (tc) anyway: the first commit
// in a big directory after a start then pays neither reading and decoding a 2 MB tree nor
// compressing all of it. Up to warmHotEntries entries, biggest first; the pieces are made
// here, in the refresher's goroutine, not in the commit's. A tree is content-addressed, so
// a view installed after a commit moved on is still right (just not the directory's newest);
// a directory a commit already made hot is left alone.
func (r *Repo) warmHot(tc *treeCache, root plumbing.Hash) {
	type big struct {
		dir  string
		h    plumbing.Hash
		tv   *treeView
		size int
	}
	var bigs []big
	var walk func(dir string, h plumbing.Hash)
	walk = func(dir string, h plumbing.Hash) {
		tv := tc.trees[h]
		if tv == nil {
			return
		}
		if size := treeSize(tv); size >= gitstore.PackMin && tv.byName == nil {
			bigs = append(bigs, big{dir, h, tv, size})
		}
		for _, e := range tv.entries {
			if e.Mode == filemode.Dir {
				p := e.Name
				if dir != "" {
					p = dir + "/" + e.Name
				}
				walk(p, e.Hash)
			}
		}
	}
	walk("", root)
	sort.Slice(bigs, func(i, j int) bool { return bigs[i].size > bigs[j].size })
	budget := warmHotEntries()
	var warm []big
	for _, b := range bigs {
		if len(b.tv.entries) > budget {
			continue
		}
		budget -= len(b.tv.entries)
		raw := gitstore.AppendTree(nil, b.tv.entries)
		b.tv = &treeView{entries: b.tv.entries, z: gitstore.PackTree(b.tv.entries, raw, nil, nil)}
		warm = append(warm, b)
	}
	if len(warm) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hot == nil {
		r.hot, r.hotDirs = map[plumbing.Hash]*treeView{}, map[string]plumbing.Hash{}
	}
	n := 0
	for _, tv := range r.hot {
		n += len(tv.entries)
	}
	// Smallest first, so the biggest trees carry the newest clock: past the budget a commit
	// evicts the trees written longest ago (evictHot), and a warmed 2 MB tree evicted by
	// the first commit in another directory was read and compressed cold again by the next
	// commit in its own. Reading the warm set in reverse keeps the same trees within budget.
	for i := len(warm) - 1; i >= 0; i-- {
		b := warm[i]
		if _, ok := r.hotDirs[b.dir]; ok || r.hot[b.h] != nil || n+len(b.tv.entries) > maxHotEntries {
			continue
		}
		b.tv.gen = hotClock.Add(1)
		r.hot[b.h], r.hotDirs[b.dir] = b.tv, b.h
		n += len(b.tv.entries)
	}
}

// primeObjects loads the owner's go-git pack indexes now, in the refresher's goroutine: go-git
// reads them all on the first lookup that misses the loose objects (a commit asking whether
// its new blob exists), which made the first commit after a start at 100k files 10-25 ms
// slower than the next (the bench's repo has ~5 MB of pack indexes). A commit holding r.mu
// loads them itself: then this does nothing rather than wait (a refresh that waited for a
// commit left .git/index behind HEAD for longer).
func (r *Repo) primeObjects() {
	if !r.mu.TryLock() {
		return
	}
	defer r.mu.Unlock()
	r.syncPacksLocked()
	_ = r.repo.Storer.HasEncodedObject(plumbing.ZeroHash) // loads the indexes; the answer is no
}

// warmHotEntries: the warm trees leave an eighth of the hot budget to the small
// directories a commit touches.
func warmHotEntries() int { return maxHotEntries - maxHotEntries/8 }

// treeSize is the length of tv's tree object content.
func treeSize(tv *treeView) int {
	n := 0
	for _, e := range tv.entries {
		n += gitstore.EntrySize(e)
	}
	return n
}

// hotClock orders the hot trees by when a commit wrote them.
var hotClock atomic.Uint64

// evictHot drops the hot trees of directories that this commit (written) did not write,
// least recently written first, until at most maxHotEntries entries are kept (n: the
// entries kept now), and returns how many are kept. An agent writes into a few directories
// again and again: those stay, with their pieces, while one it touched once goes.
func (r *Repo) evictHot(written map[string]hotTree, n int) int {
	type dirGen struct {
		dir string
		gen uint64
	}
	keep := make(map[plumbing.Hash]bool, len(written)) // a tree this commit wrote stays
	for _, w := range written {
		keep[w.h] = true
	}
	var old []dirGen
	for dir, h := range r.hotDirs {
		if _, now := written[dir]; !now {
			old = append(old, dirGen{dir, r.hot[h].gen})
		}
	}
	slices.SortFunc(old, func(a, b dirGen) int { return cmp.Compare(a.gen, b.gen) })
	for _, d := range old {
		if n <= maxHotEntries {
			break
		}
		h := r.hotDirs[d.dir]
		if tv := r.hot[h]; tv != nil && !keep[h] {
			n -= len(tv.entries)
			delete(r.hot, h)
		}
		delete(r.hotDirs, d.dir)
	}
	return n
}
