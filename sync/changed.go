package sync

import (
	"fmt"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
)

// ChangedPaths lists, sorted, the file paths whose content or mode differs between the trees
// of commits oldHash and newHash ("" = the empty tree, so an unborn branch lists every file).
// It takes the repo's mutex, so a goroutine other than the owner may call it (the hooks do,
// off the owner's path); equal subtrees are skipped, so the cost follows the change.
func (r *Repo) ChangedPaths(oldHash, newHash string) ([]string, error) {
	parse := func(s string) (plumbing.Hash, error) {
		if s == "" {
			return plumbing.ZeroHash, nil
		}
		h := plumbing.NewHash(s)
		if h.String() != s {
			return h, fmt.Errorf("changed paths: %q is not a commit hash", s)
		}
		return h, nil
	}
	a, err := parse(oldHash)
	if err != nil {
		return nil, err
	}
	b, err := parse(newHash)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	changes, err := r.commitDiffLocked(a, b)
	if err != nil {
		return nil, fmt.Errorf("changed paths %.10s..%.10s: %w", oldHash, newHash, err)
	}
	out := make([]string, 0, len(changes))
	for p := range changes {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}
