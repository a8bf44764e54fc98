package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
// no fetched tree can name a path in .git (internal/gitpath/tree.go refuses `.git` in any
// spelling), O_EXCL lock files never follow a link, and git itself writes them
// the same way.

// ErrLocked is returned when a git lock file (ref or index) is held by
// someone else for longer than we are willing to wait.
var ErrLocked = errors.New("git lock held")

// lockPoll is how often a held lock is re-checked.
const lockPoll = 20 * time.Millisecond

// CreateLock creates path+".lock" exclusively, waiting up to wait for a
// holder to let go. The caller writes, then CommitLock or RollbackLock.
func CreateLock(path string, wait time.Duration) (*os.File, error) {
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

// CommitLock fsyncs and closes the lock file and renames it over path.
func CommitLock(f *os.File, path string) error {
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

// CreateFullLock creates path+".lock" holding content, durable, in one step: content is
// written and fsynced in a temp file in tmpDir (on path's filesystem) first, then linked
// as the lock, which fails when the lock exists (ErrLocked) as O_EXCL does. A process
// killed while it holds such a lock has held it for a read and a rename only, not for a
// write and an fsync: a lock in a repository other processes push to (a file remote's
// ref) is left stale in that window, and git reports a stale lock without clearing it.
// The caller renames the lock over path (os.Rename) or removes it.
func CreateFullLock(path string, content []byte, tmpDir string) (string, error) {
	f, err := os.CreateTemp(tmpDir, "memd-lock-*.tmp")
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", path, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("lock %s: %w", path, err)
	}
	lock := path + ".lock"
	if err := os.Link(f.Name(), lock); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("lock %s: %w", lock, ErrLocked)
		}
		return "", fmt.Errorf("lock %s: %w", lock, err)
	}
	return lock, nil
}

func RollbackLock(f *os.File) {
	_ = f.Close()
	_ = os.Remove(f.Name())
}

// ReadRef resolves a ref name (e.g. refs/heads/main) to a hash the way git
// does: the loose file first, else packed-refs. Missing = zero hash, nil.
// Symbolic refs are followed a few levels.
func ReadRef(gitDir, name string) (plumbing.Hash, error) {
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

// readPackedRef finds name in packed-refs as git does: mapped, not read onto the heap, and
// by binary search when the file says it is sorted (git writes it so), so a remote with 300k
// refs costs a few page reads; an unsorted file is scanned line by line without copies.
func readPackedRef(gitDir, name string) (plumbing.Hash, error) {
	path := filepath.Join(gitDir, "packed-refs")
	data, unmap, err := mapFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("packed-refs: %w", err)
	}
	defer unmap()
	body := data
	sorted := false
	if bytes.HasPrefix(body, []byte("# pack-refs with:")) {
		nl := bytes.IndexByte(body, '\n')
		if nl < 0 {
			return plumbing.ZeroHash, nil
		}
		sorted = bytes.Contains(body[:nl], []byte(" sorted"))
		body = body[nl+1:]
	}
	if sorted {
		return searchPackedRefs(body, name), nil
	}
	for len(body) > 0 {
		line, rest, _ := bytes.Cut(body, []byte("\n"))
		body = rest
		if h, ref, ok := packedLine(line); ok && ref == name {
			return h, nil
		}
	}
	return plumbing.ZeroHash, nil
}

// packedLine splits "<hash> <ref>" (peeled "^" lines and comments are not refs).
func packedLine(line []byte) (plumbing.Hash, string, bool) {
	if len(line) < 42 || line[0] == '#' || line[0] == '^' || line[40] != ' ' || !plumbing.IsHash(string(line[:40])) {
		return plumbing.ZeroHash, "", false
	}
	return plumbing.NewHash(string(line[:40])), string(bytes.TrimSuffix(line[41:], []byte("\r"))), true
}

// searchPackedRefs binary-searches sorted packed-refs lines (git's packed_refs lookup): a
// probe lands mid-line and backs up to its start; on a "^" peeled line it takes the next.
func searchPackedRefs(body []byte, name string) plumbing.Hash {
	lo, hi := 0, len(body)
	for lo < hi {
		mid := lo + (hi-lo)/2
		start := bytes.LastIndexByte(body[:mid], '\n') + 1
		end := bytes.IndexByte(body[start:], '\n')
		if end < 0 {
			end = len(body) - start
		}
		line := body[start : start+end]
		if len(line) > 0 && line[0] == '^' { // a peeled line: probe the line after it
			next := start + end + 1
			if next >= hi {
				hi = start
				continue
			}
			start = next
			if end = bytes.IndexByte(body[start:], '\n'); end < 0 {
				end = len(body) - start
			}
			line = body[start : start+end]
		}
		h, ref, ok := packedLine(line)
		if !ok {
			return plumbing.ZeroHash // not what git writes: no answer rather than a wrong one
		}
		switch {
		case ref == name:
			return h
		case ref < name:
			lo = start + end + 1
		default:
			hi = start
		}
	}
	return plumbing.ZeroHash
}

// Stale lock files (index.lock, a ref's lock).
//
// How "live" is decided: on Linux we scan /proc for processes whose command
// name starts with "git" and whose current directory is inside this repo
// (git chdirs to the work tree top; `git -C` too). If one exists the lock is
// live and we wait for it (bounded). If none exists the lock is only removed
// once its mtime is at least minAge old (ClearStaleLock), which covers a non-git
// writer (a libgit2/go-git tool) that holds it briefly. Without /proc
// (macOS, BSD) we cannot see other processes' cwd, so only age decides:
// older than blindStaleAge is stale.
const blindStaleAge = 10 * time.Minute

// ClearStaleLock removes the git lock file lock once it is stale: no live
// git in the work tree workDir and at least minAge old (or, without /proc,
// older than blindStaleAge). It waits up to wait for a live one to go away.
func ClearStaleLock(lock, workDir string, wait, minAge time.Duration, log *slog.Logger) error {
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
		live, canSee := LiveGitProcess(workDir)
		stale := false
		switch {
		case canSee && !live && age >= minAge:
			stale = true
		case !canSee && age >= max(minAge, blindStaleAge):
			stale = true
		}
		if stale {
			if err := os.Remove(lock); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("remove stale lock %s: %w", lock, err)
			}
			log.Warn("removed stale git lock", "lock", lock, "age", age.Round(time.Second).String())
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("lock %s (age %s, live git: %v): %w", lock, age.Round(time.Millisecond), live, ErrLocked)
		}
		time.Sleep(lockPoll)
	}
}

// LiveGitProcess reports whether a git process runs with its cwd inside the
// work tree workDir. canSee is false when /proc is not available.
func LiveGitProcess(workDir string) (live, canSee bool) {
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
		if (cwd == workDir || strings.HasPrefix(cwd, workDir+"/")) && !ownGroup(pid) {
			return true, true
		}
	}
	return false, true
}

// ownGroups are the process groups of git filter drivers memd runs (`git lfs
// filter-process` in the work tree is memd's own work, not another git's); the filter
// runner registers them (OwnProcessGroup).
var ownGroups sync.Map // pgid → struct{}

// OwnProcessGroup records (running) or forgets a process group memd started.
func OwnProcessGroup(pgid int, running bool) {
	if running {
		ownGroups.Store(pgid, struct{}{})
	} else {
		ownGroups.Delete(pgid)
	}
}

// ownGroup says whether pid is in a process group OwnProcessGroup recorded.
func ownGroup(pid int) bool {
	empty := true
	ownGroups.Range(func(any, any) bool { empty = false; return false })
	if empty {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	j := bytes.LastIndexByte(b, ')')
	if j < 0 {
		return false
	}
	f := strings.Fields(string(b[j+1:]))
	if len(f) < 3 {
		return false
	}
	pgid, err := strconv.Atoi(f[2])
	if err != nil {
		return false
	}
	_, ok := ownGroups.Load(pgid)
	return ok
}
