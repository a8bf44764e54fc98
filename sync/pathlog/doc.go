// Package pathlog is the history of one path in a git repo, read as cheaply as git reads
// it: the first-parent chain from a commit, newest first, each commit's header parsed here
// (tree, parents, committer time; the message only for a commit that made an entry), and
// only the trees on the path's way down compared, level by level, a subtree whose id
// equals the parent's skipped whole. It follows an exact rename (a deleted path with the
// same blob) and memd's archive moves (archive/<YYYY>/p ↔ p), and streams its entries to
// a callback that may stop the walk: `memd restore` stops at the deleting commit, `memd log
// --limit` after N entries. It reads through its own read-only object store, never through
// the owner's go-git handle, so a long walk does not hold Repo.mu.
package pathlog
