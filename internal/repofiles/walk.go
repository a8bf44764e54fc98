package repofiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Rule is an ignore rule for a repo-relative, '/'-separated path: (*Ignorer).Ignored in
// memd, a stand-in in some tests. nil applies only the built-in rules every walk applies
// (.git, the writer lock, nested repositories).
type Rule func(rel string, isDir bool) bool

// Funcs are Walk's callbacks; any may be nil.
type Funcs struct {
	// Dir runs for every directory entered (start included) before it is listed, so a
	// watch added there sees everything created after the listing.
	Dir func(rel string)
	// File runs for every file of the repo: a regular file or a symlink (committed as a
	// link, never followed: a symlink to a directory is a file here). FIFOs, sockets and
	// devices are not files of the repo and are never opened. A non-nil error stops the
	// walk and is returned.
	File func(rel string, d fs.DirEntry) error
	// Fail runs for a directory below start that cannot be listed (one that vanished
	// during the walk is skipped silently).
	Fail func(rel string, err error)
}

// Walk visits the files of the repo at root under start (repo-relative, "" = root) in
// name order: it never enters .git, a directory ignored by ignored, a nested repository
// (a directory holding .git: not ours to commit) or a symlink, and lists only what IsFile
// accepts and ignored does not ignore. It fails only when start itself cannot be listed.
//
// This is the one definition of "the files of the repo": the committer, reconcile,
// doctor, the inventory and the watcher walk with it, and sleep's parallel walk asks
// SkipDir and SkipFile, the same rules, per entry.
func Walk(root, start string, ignored Rule, fn Funcs) error {
	return walk(root, start, ignored, fn)
}

// IsFile reports whether a directory entry of type typ (not a directory) is a file of the
// repo: a regular file or a symlink.
func IsFile(typ fs.FileMode) bool { return typ.IsRegular() || typ&fs.ModeSymlink != 0 }

// SkipFile reports whether a walk leaves out the non-directory entry rel of type typ.
// Its parent is known not to be skipped.
func SkipFile(rel string, typ fs.FileMode, ignored Rule) bool {
	if !IsFile(typ) {
		return true
	}
	base := rel[strings.LastIndexByte(rel, '/')+1:]
	return privateName(base, "") || base == ".git" || (ignored != nil && ignored(rel, false))
}

// SkipDir reports whether a walk leaves out directory rel (abs on disk): .git, ignored,
// or a nested repository. Its parent is known not to be skipped.
func SkipDir(abs, rel string, ignored Rule) bool {
	if rel[strings.LastIndexByte(rel, '/')+1:] == ".git" || (ignored != nil && ignored(rel, true)) {
		return true
	}
	return NestedRepo(abs)
}

// NestedRepo reports whether the directory abs is another repository's work tree (it
// holds a .git file or directory). memd never commits into one, as git does not.
func NestedRepo(abs string) bool {
	_, err := os.Lstat(filepath.Join(abs, ".git"))
	return err == nil
}

func walk(root, start string, ignored Rule, fn Funcs) error {
	var firstErr error
	var rec func(rel string) bool // false: stop
	rec = func(rel string) bool {
		if fn.Dir != nil {
			fn.Dir(rel)
		}
		abs := filepath.Join(root, filepath.FromSlash(rel))
		ents, err := readDir(abs)
		if err != nil {
			switch {
			case rel == start:
				firstErr = fmt.Errorf("list %s: %w", abs, err)
			case fn.Fail != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
				fn.Fail(rel, err)
			}
			return firstErr == nil
		}
		for _, e := range ents {
			child := joinRel(rel, e.Name())
			if e.IsDir() {
				if !SkipDir(filepath.Join(abs, e.Name()), child, ignored) && !rec(child) {
					return false
				}
				continue
			}
			if fn.File == nil || SkipFile(child, e.Type(), ignored) {
				continue
			}
			if err := fn.File(child, e); err != nil {
				firstErr = err
				return false
			}
		}
		return true
	}
	rec(start)
	return firstErr
}

// readDir lists a directory in name order (deterministic walks; the sort is cheap beside
// the system calls).
func readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// AbsRoot resolves root to a clean absolute path of an existing directory.
func AbsRoot(root string) (string, error) {
	if root == "" {
		return "", errors.New("repo root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("repo root %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("repo root %q: %w", root, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("repo root %q: not a directory", root)
	}
	return abs, nil
}

// InNestedRepo reports whether an ancestor directory of rel is a nested repository, so a
// path named by an event or by git status is held to Walk's rule. cache (directory →
// answer) makes it one lstat per directory over a pass; it may be nil.
func InNestedRepo(root, rel string, cache map[string]bool) bool {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		dir := rel[:i]
		nested, known := cache[dir]
		if !known {
			nested = NestedRepo(filepath.Join(root, filepath.FromSlash(dir)))
			if cache != nil {
				cache[dir] = nested
			}
		}
		if nested {
			return true
		}
	}
	return false
}
