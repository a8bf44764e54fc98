package gitrepo

import (
	"fmt"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/sync/treemerge"
)

// ChangedPaths lists the file paths whose content or mode differs between the trees of
// commits from and to ("" = the empty tree, so an unborn branch lists every file), sorted.
// Equal subtrees are skipped, so the cost grows with what changed, not with the repo: the
// agent refreshes its inventory with it after a merge or fast-forward instead of walking the
// tree, and the hooks list a step's changes with it. It takes the repo's mutex, so a
// goroutine other than the owner may call it (the hooks do, off the owner's path).
func (r *Repo) ChangedPaths(from, to string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncPacksLocked()
	tree := func(c string) (plumbing.Hash, error) {
		if c == "" {
			return plumbing.ZeroHash, nil
		}
		h := plumbing.NewHash(c)
		if h.String() != c {
			return h, fmt.Errorf("changed paths in %s: %q is not a commit hash", r.dir, c)
		}
		cm, err := getCommit(r.repo.Storer, h)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("changed paths in %s: read %s: %w", r.dir, c, err)
		}
		return cm.TreeHash, nil
	}
	a, err := tree(from)
	if err != nil {
		return nil, err
	}
	b, err := tree(to)
	if err != nil {
		return nil, err
	}
	out := map[string]treemerge.Change{}
	if err := treemerge.DiffTrees(r.repo.Storer, a, b, "", out); err != nil {
		return nil, fmt.Errorf("changed paths in %s between %s and %s: %w", r.dir, from, to, err)
	}
	paths := make([]string, 0, len(out))
	for p := range out {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths, nil
}
