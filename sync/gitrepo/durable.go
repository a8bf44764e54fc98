package gitrepo

import (
	"fmt"
	"maps"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
)

// The tail of a sync's checkout that needs no writer lock. The renames of a checkout must
// be durable (their directories fsynced) before the merge marker goes: until then a crash
// is finished from the marker. None of that touches a file a writer writes, so a sync's
// checkout (Sync prepares it before the lock, deferSync) leaves it here, and Sync runs it
// after the writer lock is released. A crash in between leaves the marker, and the next
// start, sync or commit finishes the checkout from it (every path already holds the new
// content); a checkout that does not defer flushes what is pending before it drops the
// marker, so the marker never goes while a rename it guards is not durable.
//
// The new index is written here too, still under the index.lock the checkout took (so no
// git sees HEAD moved with the index behind it, as before), but after the writer lock: it
// is a third of a fast-forward's hold (build, write, fsync; ~3 ms of ~10 in the swarm
// bench), and the index is no file a writer writes. Its stat data is taken from the files
// as they are then, each hashed against HEAD's blob (indexEntry), as git's checkout does
// beside writers that take no lock: one edited meanwhile is entered without stat data, so
// git looks at it again.
type durableState struct {
	index      *indexHold      // the checkout's index.lock, its index not written yet
	dirs       map[string]bool // work tree directories whose renames are not fsynced yet
	dropMarker bool            // the marker (base → nw) can go once dirs are synced
	base, nw   plumbing.Hash
}

// syncDurableDirsLocked fsyncs the pending directories.
func (r *Repo) syncDurableDirsLocked() error {
	if len(r.durable.dirs) == 0 {
		return nil
	}
	t, err := r.openWorkTree()
	if err != nil {
		return err
	}
	defer t.Close()
	if err := syncWorkDirs(t, slices.Sorted(maps.Keys(r.durable.dirs))); err != nil {
		return fmt.Errorf("update work tree in %s: %w", r.dir, err)
	}
	clear(r.durable.dirs)
	return nil
}

// flushDurable makes a sync's checkout durable and drops its marker (when it still names
// the same move). Outside the writer lock; under r.mu.
func (r *Repo) flushDurable() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h := r.durable.index; h != nil {
		// The branch may have moved past the checkout's commit (edits merged after it):
		// the index is the branch's, with every path noteMoved recorded.
		r.durable.index = nil
		if head, err := r.readBranch(); err == nil {
			r.writeCheckoutIndexLocked(h, head)
		} else {
			r.ScheduleIndexRefresh()
		}
		h.release()
	}
	if err := r.syncDurableDirsLocked(); err != nil {
		return err
	}
	if !r.durable.dropMarker {
		return nil
	}
	r.durable.dropMarker = false
	old, nw, ok, err := r.readMergeMarker()
	if err != nil || !ok || old != r.durable.base || nw != r.durable.nw {
		return err
	}
	return r.removeMergeMarker()
}
