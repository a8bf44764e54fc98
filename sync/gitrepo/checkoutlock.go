package gitrepo

import (
	"errors"
	"fmt"
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
// stands aside (Aside.Passing) to try again once git is done. The index itself is brought
// up to the new HEAD by the refresher right after (index.go), under its own short hold.

const (
	// checkoutLockWait bounds how long a sync's checkout waits for a git holding
	// index.lock (git holds it for milliseconds) before it stands aside.
	checkoutLockWait = 500 * time.Millisecond
)

// indexLockedAside is the stand-aside a checkout returns when git holds index.lock.
var indexLockedAside = Aside{Reason: "git is writing the index (.git/index.lock)", Brief: "index locked", Passing: true}

// lockIndexForCheckout takes .git/index.lock for a checkout's writes, waiting up to wait
// while a live git holds it; a lock no live process holds (gitstore.ClearStaleLock: older
// than indexLockMinAge, no git in the work tree) is a killed process's, memd's own
// included, and is cleared. A lock still held returns a *StandAsideError (Passing).
// release drops it; the gate (gitops.go foreignIndexLock) and the refresher's stale-lock
// clearing leave it alone while held.
func (r *Repo) lockIndexForCheckout(what string, wait time.Duration) (release func(), err error) {
	if r.idx.checkoutLock.Load() {
		// Already ours (the repo has one owner, r.mu): a nested step keeps the outer hold.
		return func() {}, nil
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
	return func() {
		r.idx.checkoutLock.Store(false)
		gitstore.RollbackLock(f)
	}, nil
}
