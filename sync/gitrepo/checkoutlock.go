package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/memd-dev/memd/sync/gitstore"
)

// A checkout holds .git/index.lock (issue 25, the stash race). git's own checkout, reset,
// merge and stash write the work tree's tracked files under index.lock and drop it once
// the index says what they wrote; a second git that wants the index meanwhile fails with
// "Unable to create '.git/index.lock': File exists". memd's checkout (merge.go
// moveHeadFromLocked, and the finish of an interrupted one) does the same, from the
// verify of step 2 to the last rename of step 4: a `git stash` that saved the work tree
// and then resets it, or a `git stash pop` that checks the index and then merges, never
// finds a tracked file memd rewrote between its steps; it finds the lock (and fails as it
// would beside another git, before it changed anything), or memd finds git's lock and
// stands aside (Aside.Passing) to try again once git is done. And as git's checkout ends,
// memd's ends: the new HEAD's index, with the stat data of the files just written, goes into
// index.lock and is renamed over .git/index as the last step (writeCheckoutIndexLocked), so
// no git ever finds HEAD moved and the index still the old head's (a `git commit` made from
// it dropped or reverted what memd checked out). A kill before the rename leaves the old
// index and a stale lock, cleared at the next start as any killed checkout's.

const (
	// checkoutLockWait bounds how long a sync's checkout waits for a git holding
	// index.lock (git holds it for milliseconds) before it stands aside.
	checkoutLockWait = 500 * time.Millisecond
)

// indexLockedAside is the stand-aside a checkout returns when git holds index.lock.
var indexLockedAside = Aside{Reason: "git is writing the index (.git/index.lock)", Brief: "index locked", Passing: true}

// indexHold is a checkout's hold of .git/index.lock (lockIndexForCheckout). The checkout
// ends as git's does: the new index written into the lock and renamed over .git/index
// (commit, from writeCheckoutIndexLocked), or, if it wrote none, the lock dropped (release).
type indexHold struct {
	r    *Repo
	f    *os.File // nil: an outer step holds the lock
	done bool
}

// release drops the lock unless commit already renamed it into place (then the name may
// be another git's lock by now).
func (h *indexHold) release() {
	if h.f == nil || h.done {
		return
	}
	h.done = true
	h.r.idx.checkoutLock.Store(false)
	gitstore.RollbackLock(h.f)
}

// handOff moves the hold to the returned one, which the caller ends later (durable.go:
// a sync's checkout writes its index after the writer lock); h's release is then a no-op.
func (h *indexHold) handOff() *indexHold {
	k := *h
	h.done = true
	return &k
}

// commit fsyncs the new index the checkout wrote into the lock and renames it over
// indexPath, which releases the lock. A failure removes the lock, the old index stays.
func (h *indexHold) commit(indexPath string) error {
	h.done = true
	err := gitstore.CommitLock(h.f, indexPath)
	h.r.idx.checkoutLock.Store(false)
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// lockIndexForCheckout takes .git/index.lock for a checkout's writes, waiting up to wait
// while a live git holds it; a lock no live process holds (gitstore.ClearStaleLock: older
// than indexLockMinAge, no git in the work tree) is a killed process's, memd's own
// included, and is cleared. A lock still held returns a *StandAsideError (Passing).
// The hold's release drops it; the gate (gitops.go foreignIndexLock) and the refresher's
// stale-lock clearing leave it alone while held.
func (r *Repo) lockIndexForCheckout(what string, wait time.Duration) (*indexHold, error) {
	if r.idx.checkoutLock.Load() {
		// Already ours (the repo has one owner, r.mu): a nested step keeps the outer hold.
		return &indexHold{r: r}, nil
	}
	indexPath := filepath.Join(r.gitDir, "index")
	f, err := gitstore.CreateLock(indexPath, 0)
	if errors.Is(err, gitstore.ErrLocked) && r.clearStaleLock(indexPath+".lock", wait, indexLockMinAge) == nil {
		// Dropped by the git that held it, or a killed process's and cleared: take it.
		f, err = gitstore.CreateLock(indexPath, 0)
	}
	if errors.Is(err, gitstore.ErrLocked) {
		return nil, fmt.Errorf("%s in %s: %w", what, r.dir, &StandAsideError{Aside: indexLockedAside})
	}
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", what, r.dir, err)
	}
	r.idx.checkoutLock.Store(true)
	if r.hooks != nil && r.hooks.checkoutLockHeld != nil {
		r.hooks.checkoutLockHeld()
	}
	return &indexHold{r: r, f: f}, nil
}
