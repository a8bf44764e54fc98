package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/sync/gitstore"

	"github.com/memd-dev/memd"
)

// Refs move with git's lock protocol (gitstore.CreateLock: why not
// go-git's CheckAndSetReference).

const (
	// refLockWait bounds how long a ref update waits for another
	// process's "<ref>.lock" (git holds it for milliseconds).
	refLockWait = 2 * time.Second
	// refLockStaleAge: a ref lock this old with no git process in the repo
	// was left by a killed process.
	refLockStaleAge = 2 * time.Second
)

// updateRef moves ref name from old to new with git's lock protocol:
// compare-and-set, atomic rename, fsynced. old zero = the ref must not
// exist yet (unborn branch). A mismatch returns memd.ErrHeadMoved.
func (r *Repo) updateRef(name string, newH, old plumbing.Hash, logMsg string) error {
	path, f, err := r.lockRef(name)
	if err != nil {
		if errors.Is(err, gitstore.ErrLocked) {
			// Someone (git) is moving the ref right now: it will not be
			// where we read it.
			return fmt.Errorf("update %s: %w (%v)", name, memd.ErrHeadMoved, err)
		}
		return fmt.Errorf("update %s: %w", name, err)
	}
	cur, err := gitstore.ReadRef(r.commonDir, name)
	if err != nil {
		gitstore.RollbackLock(f)
		return fmt.Errorf("update %s: %w", name, err)
	}
	if cur != old {
		gitstore.RollbackLock(f)
		return fmt.Errorf("update %s: expected %s, found %s: %w", name, short(old), short(cur), memd.ErrHeadMoved)
	}
	// The gate again, holding the ref's lock (gitops.go): a branch switch or a git operation
	// that began since the job looked must not have memd's branch moved under it.
	if name == r.BranchRef().String() {
		if err := r.standAsideErr("update " + name); err != nil {
			gitstore.RollbackLock(f)
			return err
		}
	}
	if _, err := f.WriteString(newH.String() + "\n"); err != nil {
		gitstore.RollbackLock(f)
		return fmt.Errorf("update %s: %w", name, err)
	}
	if err := gitstore.CommitLock(f, path); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	// The ref's directory is not fsynced: a crash may at worst undo this
	// rename (the ref keeps its old, valid value; the files are still in
	// the work tree and the start-up reconcile commits them again). The
	// ref's content is fsynced, so it is never empty or torn, and the
	// objects it names were made durable before (gitstore.ObjectBatch.Flush).
	r.appendReflog(name, old, newH, logMsg)
	return nil
}

// lockRef takes ref name's "<ref>.lock" (its directory made first), clearing one a killed
// process left (git holds ref locks for milliseconds), and returns the ref's path.
func (r *Repo) lockRef(name string) (string, *os.File, error) {
	path := r.layout.Path(name) // refs/heads, refs/remotes: shared by all worktrees
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", nil, err
	}
	f, err := gitstore.CreateLock(path, refLockWait)
	if errors.Is(err, gitstore.ErrLocked) && r.clearStaleLock(path+".lock", 0, refLockStaleAge) == nil {
		f, err = gitstore.CreateLock(path, refLockWait) // gone now: take it
	}
	return path, f, err
}

// setTrackingRef points the remote-tracking ref name at h as git fetch does: nothing when it
// already does (a pull that found the remote unmoved writes nothing), else with the lock
// protocol, so a person's git reading it beside memd never finds it empty. No compare: the
// remote's word is the value (go-git's SetReference truncated the file and wrote it in
// place, and `git fsck` run during a pull read an empty ref).
func (r *Repo) setTrackingRef(name plumbing.ReferenceName, h plumbing.Hash) error {
	if cur, err := gitstore.ReadRef(r.commonDir, name.String()); err == nil && cur == h {
		return nil
	}
	path, f, err := r.lockRef(name.String())
	if err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	if _, err := f.WriteString(h.String() + "\n"); err != nil {
		gitstore.RollbackLock(f)
		return fmt.Errorf("update %s: %w", name, err)
	}
	if err := gitstore.CommitLock(f, path); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	return nil
}

// appendReflog adds a reflog line for the ref (and HEAD when it points at
// it), like git does, so `git reflog` can show and recover memd's commits.
// Best effort: a failure is logged, never fatal.
func (r *Repo) appendReflog(name string, old, newH plumbing.Hash, msg string) {
	now := r.opts.Now()
	_, off := now.Zone()
	sign := '+'
	if off < 0 {
		sign, off = '-', -off
	}
	msg = strings.ReplaceAll(strings.SplitN(msg, "\n", 2)[0], "\t", " ")
	line := fmt.Sprintf("%s %s %s <%s> %d %c%02d%02d\t%s\n", old, newH,
		r.author.Name, r.author.Email, now.Unix(), sign, off/3600, (off%3600)/60, msg)
	targets := []string{name}
	if b, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD")); err == nil &&
		strings.TrimSpace(string(b)) == "ref: "+name {
		targets = append(targets, "HEAD")
	}
	for _, t := range targets {
		p := r.layout.Path("logs/" + t) // logs/HEAD is the worktree's, a branch's log shared
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.log.Debug("reflog", "ref", t, "err", err)
			continue
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			r.log.Debug("reflog", "ref", t, "err", err)
			continue
		}
		_, _ = f.WriteString(line)
		_ = f.Close()
	}
}

func short(h plumbing.Hash) string {
	if h.IsZero() {
		return "(none)"
	}
	return h.String()[:12]
}

// Stale index.lock handling (gitstore.ClearStaleLock says how "live" is
// decided): a lock with no live git is removed once it is indexLockMinAge
// old, which covers a non-git writer (a libgit2/go-git tool) that holds it
// briefly.
const (
	indexLockMinAge = 2 * time.Second
	indexLockWait   = 5 * time.Second
)

// ClearStaleIndexLock removes .git/index.lock when no live process owns it
// (see above), waits (bounded) while a live git holds it, and returns nil
// once no lock is left. A lock still held after the wait returns gitstore.ErrLocked.
// Call it at start (a previous memd or git may have been killed holding
// it); the background index refresher also uses it when it keeps finding
// the lock held.
func (r *Repo) ClearStaleIndexLock() error {
	// Our own refresher holds index.lock only inside idx.run.
	r.idx.run.Lock()
	defer r.idx.run.Unlock()
	if r.idx.checkoutLock.Load() {
		return nil // memd's own checkout holds it (checkoutlock.go), live
	}
	return r.clearStaleLock(filepath.Join(r.gitDir, "index.lock"), indexLockWait, indexLockMinAge)
}

// clearStaleLock is gitstore.ClearStaleLock for this repo's work tree.
func (r *Repo) clearStaleLock(lock string, wait, minAge time.Duration) error {
	return gitstore.ClearStaleLock(lock, r.dir, wait, minAge, r.log)
}

// liveGitProcess: does a git process run in this repo's work tree?
func (r *Repo) liveGitProcess() (live, canSee bool) { return gitstore.LiveGitProcess(r.dir) }
