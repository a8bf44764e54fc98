package gitremote

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// FetchObjects returns the objects of src that a repository lacks for head, when have says
// which commits it holds (each with everything below it, as git's haves do): the commits
// reachable from head down to the first held ones, and the entries of their trees that
// differ from those at the same path in the held parents' trees. Unlike PushObjects it
// never walks the held side: a history where a machine's commits are dated well back
// (it lost push races for a while) made PushObjects' paint walk thousands of commits for
// a fetch of ten. A history with no held commit under head (nothing in common) is an
// error, as is a walk past limit commits (ErrPushWalkTooLong).
func FetchObjects(src storer.EncodedObjectStorer, have func(plumbing.Hash) bool, head plumbing.Hash, limit int) ([]plumbing.Hash, error) {
	if have(head) {
		return nil, nil
	}
	var newCommits []*object.Commit
	baseSet := map[plumbing.Hash]bool{}
	seen := map[plumbing.Hash]bool{head: true}
	queue := []plumbing.Hash{head}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if len(newCommits) >= limit {
			return nil, ErrPushWalkTooLong
		}
		c, err := object.GetCommit(src, h)
		if err != nil {
			return nil, fmt.Errorf("fetch: read commit %s: %w", h, err)
		}
		newCommits = append(newCommits, c)
		for _, p := range c.ParentHashes {
			if seen[p] {
				continue
			}
			seen[p] = true
			if have(p) {
				baseSet[p] = true
			} else {
				queue = append(queue, p)
			}
		}
	}
	if len(baseSet) == 0 {
		return nil, errors.New("fetch: no commit in common with the remote's branch")
	}
	var bases []plumbing.Hash
	for h := range baseSet {
		c, err := object.GetCommit(src, h)
		if err != nil {
			return nil, fmt.Errorf("fetch: read boundary commit %s: %w", h, err)
		}
		bases = append(bases, c.TreeHash)
	}
	var st PushStats
	return newObjects(src, newCommits, bases, &st)
}
