package sync

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// Git's own lock protocol. We do not use go-git's CheckAndSetReference: it
// serialises with flock(2), which git does not honour, and rewrites the ref
// file in place (truncate + write), so a crash can leave an empty ref. Git
// takes "<file>.lock" with O_CREAT|O_EXCL, writes the new content there and
// renames it over the file; doing the same interlocks with a git commit
// running beside us and makes the ref update atomic.
//
// These files (refs, packed-refs, the index, loose objects and their locks)
// live inside .git and are written with plain os calls, not internal/safefs:
// no fetched tree can name a path in .git (treecheck.go refuses `.git` in any
// spelling), O_EXCL lock files never follow a link, and git itself writes them
// the same way.

// ErrLocked is returned when a git lock file (ref or index) is held by
// someone else for longer than we are willing to wait.
var ErrLocked = errors.New("git lock held")

const (
	// refLockWait bounds how long a ref update waits for another
	// process's "<ref>.lock" (git holds it for milliseconds).
	refLockWait = 2 * time.Second
	// refLockStaleAge: a ref lock this old with no git process in the repo
	// was left by a killed process.
	refLockStaleAge = 2 * time.Second
	// lockPoll is how often a held lock is re-checked.
	lockPoll = 20 * time.Millisecond
)

// createLock creates path+".lock" exclusively, waiting up to wait for a
// holder to let go. The caller writes, then commitLock or rollbackLock.
func createLock(path string, wait time.Duration) (*os.File, error) {
	lock := path + ".lock"
	deadline := time.Now().Add(wait)
	for {
		f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock %s: %w", lock, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lock %s: %w", lock, ErrLocked)
		}
		time.Sleep(lockPoll)
	}
}

// commitLock fsyncs and closes the lock file and renames it over path.
func commitLock(f *os.File, path string) error {
	if err := f.Sync(); err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return fmt.Errorf("sync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("rename %s: %w", f.Name(), err)
	}
	return nil
}

func rollbackLock(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// readRef resolves a ref name (e.g. refs/heads/main) to a hash the way git
// does: the loose file first, else packed-refs. Missing = zero hash, nil.
// Symbolic refs are followed a few levels.
func readRef(gitDir, name string) (plumbing.Hash, error) {
	for depth := 0; depth < 5; depth++ {
		b, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(name)))
		if err == nil {
			s := strings.TrimSpace(string(b))
			if target, ok := strings.CutPrefix(s, "ref:"); ok {
				name = strings.TrimSpace(target)
				continue
			}
			if !plumbing.IsHash(s) {
				return plumbing.ZeroHash, fmt.Errorf("ref %s: bad content %q", name, s)
			}
			return plumbing.NewHash(s), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return plumbing.ZeroHash, fmt.Errorf("ref %s: %w", name, err)
		}
		return readPackedRef(gitDir, name)
	}
	return plumbing.ZeroHash, fmt.Errorf("ref %s: symbolic ref loop", name)
}

func readPackedRef(gitDir, name string) (plumbing.Hash, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("packed-refs: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' || line[0] == '^' {
			continue
		}
		hash, ref, ok := strings.Cut(line, " ")
		if ok && ref == name && plumbing.IsHash(hash) {
			return plumbing.NewHash(hash), nil
		}
	}
	return plumbing.ZeroHash, nil
}

// updateRef moves ref name from old to new with git's lock protocol:
// compare-and-set, atomic rename, fsynced. old zero = the ref must not
// exist yet (unborn branch). A mismatch returns ErrHeadMoved.
func (r *Repo) updateRef(name string, newH, old plumbing.Hash, logMsg string) error {
	path := filepath.Join(r.gitDir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	f, err := createLock(path, refLockWait)
	if errors.Is(err, ErrLocked) && r.clearStaleLock(path+".lock", 0, refLockStaleAge) == nil {
		// Left by a killed process (git holds ref locks for
		// milliseconds): gone now, take it.
		f, err = createLock(path, refLockWait)
	}
	if err != nil {
		if errors.Is(err, ErrLocked) {
			// Someone (git) is moving the ref right now: it will not be
			// where we read it.
			return fmt.Errorf("update %s: %w (%v)", name, ErrHeadMoved, err)
		}
		return fmt.Errorf("update %s: %w", name, err)
	}
	cur, err := readRef(r.gitDir, name)
	if err != nil {
		rollbackLock(f)
		return fmt.Errorf("update %s: %w", name, err)
	}
	if cur != old {
		rollbackLock(f)
		return fmt.Errorf("update %s: expected %s, found %s: %w", name, short(old), short(cur), ErrHeadMoved)
	}
	if _, err := f.WriteString(newH.String() + "\n"); err != nil {
		rollbackLock(f)
		return fmt.Errorf("update %s: %w", name, err)
	}
	if err := commitLock(f, path); err != nil {
		return fmt.Errorf("update %s: %w", name, err)
	}
	// The ref's directory is not fsynced: a crash may at worst undo this
	// rename (the ref keeps its old, valid value; the files are still in
	// the work tree and the start-up reconcile commits them again). The
	// ref's content is fsynced, so it is never empty or torn, and the
	// objects it names were made durable before (objectBatch.flush).
	r.appendReflog(name, old, newH, logMsg)
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
		p := filepath.Join(r.gitDir, "logs", filepath.FromSlash(t))
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

// Stale index.lock handling.
//
// How "live" is decided: on Linux we scan /proc for processes whose command
// name starts with "git" and whose current directory is inside this repo
// (git chdirs to the work tree top; `git -C` too). If one exists the lock is
// live and we wait for it (bounded). If none exists the lock is only removed
// once its mtime is at least indexLockMinAge old, which covers a non-git
// writer (a libgit2/go-git tool) that holds it briefly. Without /proc
// (macOS, BSD) we cannot see other processes' cwd, so only age decides:
// older than indexLockStaleAge is stale.
const (
	indexLockMinAge   = 2 * time.Second
	indexLockStaleAge = 10 * time.Minute
	indexLockWait     = 5 * time.Second
)

// ClearStaleIndexLock removes .git/index.lock when no live process owns it
// (see above), waits (bounded) while a live git holds it, and returns nil
// once no lock is left. A lock still held after the wait returns ErrLocked.
// Call it at start (a previous memd or git may have been killed holding
// it); the background index refresher also uses it when it keeps finding
// the lock held.
func (r *Repo) ClearStaleIndexLock() error {
	// Our own refresher holds index.lock only inside idx.run.
	r.idx.run.Lock()
	defer r.idx.run.Unlock()
	return r.clearStaleLock(filepath.Join(r.gitDir, "index.lock"), indexLockWait, indexLockMinAge)
}

// clearStaleLock removes the git lock file lock once it is stale: no live
// git in the repo and at least minAge old (or, without /proc, older than
// indexLockStaleAge). It waits up to wait for a live one to go away.
func (r *Repo) clearStaleLock(lock string, wait, minAge time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		fi, err := os.Lstat(lock)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("lock %s: %w", lock, err)
		}
		age := time.Since(fi.ModTime())
		live, canSee := r.liveGitProcess()
		stale := false
		switch {
		case canSee && !live && age >= minAge:
			stale = true
		case !canSee && age >= max(minAge, indexLockStaleAge):
			stale = true
		}
		if stale {
			if err := os.Remove(lock); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale lock %s: %w", lock, err)
			}
			r.log.Warn("removed stale git lock", "lock", lock, "age", age.Round(time.Second).String())
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("lock %s (age %s, live git: %v): %w", lock, age.Round(time.Millisecond), live, ErrLocked)
		}
		time.Sleep(lockPoll)
	}
}

// liveGitProcess reports whether a git process runs with its cwd inside the
// repo. canSee is false when /proc is not available.
func (r *Repo) liveGitProcess() (live, canSee bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false, false
	}
	if _, err := os.Stat("/proc/self/cwd"); err != nil {
		return false, false
	}
	self := os.Getpid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil || !bytes.HasPrefix(comm, []byte("git")) {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		if err != nil {
			// Another user's process: we cannot see its cwd; be
			// conservative only if it could be ours — it cannot write
			// our repo without access, so ignore it.
			continue
		}
		if cwd == r.dir || strings.HasPrefix(cwd, r.dir+"/") {
			return true, true
		}
	}
	return false, true
}
