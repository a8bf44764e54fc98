package gitremote

import "github.com/go-git/go-git/v5/plumbing/object"

// The one commit queue of the history walks (push.go's objects to send,
// mergebase.go's ahead/behind and merge base): newest committer time first, as git's
// paint-down walks go, with each commit's paint flags.

// paintedCommit is a queued commit and the flags it carried when queued.
// open marks an entry the walk still has to finish: the heap counts them so
// a walk can stop in O(1) once none is left.
type paintedCommit struct {
	c    *object.Commit
	f    uint8
	open bool
}

// commitHeap is a max-heap by committer time (container/heap) that counts its
// open entries.
type commitHeap struct {
	items []paintedCommit
	open  int
}

func (q *commitHeap) Len() int { return len(q.items) }
func (q *commitHeap) Less(i, j int) bool {
	return q.items[i].c.Committer.When.After(q.items[j].c.Committer.When)
}
func (q *commitHeap) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *commitHeap) Push(x any) {
	it := x.(paintedCommit)
	if it.open {
		q.open++
	}
	q.items = append(q.items, it)
}
func (q *commitHeap) Pop() any {
	it := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	if it.open {
		q.open--
	}
	return it
}
