package agent

import (
	"sort"
	"strings"
	stdsync "sync"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// conflictCache keeps the document's conflict list (the copies and their originals' blob
// ids) between publishes. publish runs after every job and at every busy change: hashing
// every copy and its original each time read and hashed the same files over and over, a
// third of a daemon's CPU in the ten-machine swarm (issue 29: its merges leave dozens of
// copies of the shared memories). A copy is described again only when it or its original
// may have changed since: a path the watcher reported (any write in the tree, memd's own
// checkouts included), a path a job changed, or everything after a scan.
//
// A stale entry can only be older content than the file's, and a resolve checks the copy
// it is given against the file (gitrepo.Resolve: "changed since it was listed"): it refuses,
// it never resolves the wrong version. The watcher's report of the write comes within its
// quiet time, and the next publish describes the copy again; a change the watcher did not
// report (an ignored path, a lost event) is caught by the next reconcile, which touches all.
type conflictCache struct {
	mu    stdsync.Mutex
	dirty []string // paths (or directories) changed since the last list
	all   bool     // everything may have changed
	known map[string]statusline.Conflict

	describe func(dir, cp string) (statusline.Conflict, error) // gitrepo.ConflictOf; tests count calls
}

// touch notes paths that may have changed (files or directories, repo-relative).
func (c *conflictCache) touch(paths []string) {
	if len(paths) == 0 {
		return
	}
	c.mu.Lock()
	if !c.all {
		c.dirty = append(c.dirty, paths...)
		if len(c.dirty) > 4096 { // a burst: describing everything again is cheaper than matching
			c.all, c.dirty = true, nil
		}
	}
	c.mu.Unlock()
}

// touchAll notes that anything may have changed (a scan, a rescan, HEAD moved by others).
func (c *conflictCache) touchAll() {
	c.mu.Lock()
	c.all, c.dirty = true, nil
	c.mu.Unlock()
}

// list describes copies (the inventory's, sorted or not), reusing what has not changed.
// Owner only (one list at a time); touch may run beside it.
func (c *conflictCache) list(dir string, copies []string) []statusline.Conflict {
	c.mu.Lock()
	dirty, all := c.dirty, c.all
	c.dirty, c.all = nil, false
	c.mu.Unlock()
	describe := c.describe
	if describe == nil {
		describe = gitrepo.ConflictOf
	}
	changed := func(p string) bool {
		for _, d := range dirty {
			if p == d || strings.HasPrefix(p, d+"/") || d == "" || d == "." {
				return true
			}
		}
		return false
	}
	known := make(map[string]statusline.Conflict, len(copies))
	out := []statusline.Conflict{}
	for _, cp := range copies {
		k, ok := c.known[cp]
		if !ok || all || changed(cp) || changed(k.Path) {
			d, err := describe(dir, cp)
			if err != nil {
				continue // vanished meanwhile (as gitrepo.ConflictsOf): the next change brings it back
			}
			k = d
		}
		known[cp] = k
		out = append(out, k)
	}
	c.known = known
	sort.Slice(out, func(i, j int) bool { return out[i].Copy < out[j].Copy })
	return out
}
