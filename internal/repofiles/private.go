package repofiles

import (
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
)

// Private is the one definition of "private to this machine": a path memd never commits,
// never checks out over and never lets a tree it fetched write, whatever an ignore rule
// says and whether or not a tree tracks it (docs/ARCHITECTURE.md §11: the configured lock.file is never
// committed, whatever its name). It is:
//   - git's own: a .git component at any depth (memd's state directory .git/memd is in it,
//     a nested repository's .git too);
//   - the writer lock: lock (lock.file, "" = memd.DefaultLockFile) or the default name,
//     compared without case (a case-insensitive file system, macOS's default, maps
//     ".MEMORY.LOCK" onto the lock);
//   - memd's temp files: safefs's temp names and the older ".memd-tmp-*".
//
// rel is repo-relative, '/'-separated. Ignorer.Ignored, Walk, the watcher and sync's
// committer and checkout all ask this, so the list lives here only.
func PrivateFor(rel, lock string) bool {
	rel = strings.Trim(rel, "/")
	if rel == "" {
		return false
	}
	for {
		seg, rest, more := strings.Cut(rel, "/")
		if seg == ".git" {
			return true
		}
		if !more {
			return privateName(seg, lock)
		}
		rel = rest
	}
}

// Private is PrivateFor with the default lock file name.
func Private(rel string) bool { return PrivateFor(rel, "") }

// privateName: a file name (no directory) that is the writer lock or a memd temp file.
func privateName(base, lock string) bool {
	if strings.EqualFold(base, memd.DefaultLockFile) || (lock != "" && strings.EqualFold(base, lock)) {
		return true
	}
	return safefs.IsTempName(base) || strings.HasPrefix(base, ".memd-tmp-")
}

// LockFile is the writer lock's name these rules keep private.
func (ig *Ignorer) LockFile() string {
	if ig == nil || ig.lock == "" {
		return memd.DefaultLockFile
	}
	return ig.lock
}

// WithLockFile returns the rules with lock (lock.file) as the writer lock's name; ig is not
// changed. Reload and Extend keep it.
func (ig *Ignorer) WithLockFile(lock string) *Ignorer {
	c := ig.clone()
	c.lock = lock
	return c
}

// Private is PrivateFor with these rules' lock file; a nil Ignorer knows the default name.
func (ig *Ignorer) Private(rel string) bool {
	if ig == nil {
		return Private(rel)
	}
	return PrivateFor(rel, ig.lock)
}
