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
type durableState struct {
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
