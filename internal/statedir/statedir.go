// Package statedir is memd's state directory (<repo>/.git/memd, docs/ARCHITECTURE.md §6) written through
// internal/safefs: neither .git nor memd nor any file in it is ever a symlink memd follows.
// A symlinked state directory is refused (safefs.ErrSymlink, naming the path); a symlink at
// a file's name is replaced by the atomic write, never written through.
package statedir

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/memd-dev/memd/internal/safefs"
)

// Dir is one opened state directory. Close it when done.
type Dir struct {
	tree *safefs.Tree
	rel  string // the state dir relative to tree ("." never: it has a parent in the tree)
	abs  string
	r    *os.Root // the state dir itself, verified (openRoot); nil until needed
}

// Open opens stateDir for safe writes. The default <repo>/.git/memd is opened from the repo,
// so .git is checked too; another directory is opened from its parent (which must exist).
// Nothing is created: see Ensure.
func Open(stateDir string) (*Dir, error) {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	base, root := filepath.Base(abs), filepath.Dir(abs)
	rel := base
	if filepath.Base(root) == ".git" {
		rel, root = ".git/"+base, filepath.Dir(root)
	}
	t, err := safefs.Open(root)
	if errors.Is(err, fs.ErrNotExist) {
		// The repo (or the state dir's parent) is the user's choice, not a tree's: made as a
		// plain path, like `memd init` makes it; from there on everything is checked.
		if err = os.MkdirAll(root, 0o755); err == nil {
			t, err = safefs.Open(root)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	return &Dir{tree: t, rel: rel, abs: abs}, nil
}

// Create is Open and Ensure: the state dir opened for writes, made (0700) if missing.
func Create(stateDir string) (*Dir, error) {
	d, err := Open(stateDir)
	if err != nil {
		return nil, err
	}
	if err := d.Ensure(); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the directory handles.
func (d *Dir) Close() error {
	if d.r != nil {
		d.r.Close()
	}
	return d.tree.Close()
}

// openRoot opens the state dir itself as an os.Root whose identity is checked against what
// safefs lstat'ed through a parent chain without symlinks: a handle on the verified
// directory, for what safefs has no form of (an in-place open).
func (d *Dir) openRoot() (*os.Root, error) {
	if d.r != nil {
		return d.r, nil
	}
	fi, err := d.tree.Lstat(d.rel)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", d.abs, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("state dir %s: %w", d.abs, safefs.ErrSymlink)
	}
	r, err := os.OpenRoot(d.abs)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", d.abs, err)
	}
	if st, err := r.Stat("."); err != nil || !os.SameFile(fi, st) {
		r.Close()
		return nil, fmt.Errorf("state dir %s: swapped while opened: %w", d.abs, safefs.ErrSymlink)
	}
	d.r = r
	return r, nil
}

// WriteCache writes name atomically for readers (safefs.Temp, renamed over name) but without
// the fsync (Temp.NoSync): for caches of what can be rebuilt (status lines, sleep's parse
// cache and idle record), where eight fsyncs per publish would cost the owner tens of
// milliseconds on a slow disk. write streams the content; a non-zero mtime is set before the
// rename.
func (d *Dir) WriteCache(name string, perm fs.FileMode, mtime time.Time, write func(w io.Writer) error) error {
	return d.write(name, perm, mtime, false, write)
}

// RefreshCache is WriteCache of data that a reader may find unchanged: a file already
// holding exactly data only gets its modification time set to mtime, with no temp file
// and rename. The status line files are rewritten on every publish with mostly the same
// text, and on ext4 each temp file's new inode costs more than the write (perf, bench/RESULTS.md).
func (d *Dir) RefreshCache(name string, perm fs.FileMode, mtime time.Time, data []byte) error {
	if cur, err := d.tree.ReadFile(d.Rel(name)); err == nil && bytes.Equal(cur, data) && !mtime.IsZero() {
		if err := d.tree.Chtimes(d.Rel(name), mtime, mtime); err == nil {
			return nil
		}
	}
	return d.write(name, perm, mtime, false, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// write is the one atomic write of the state dir: safefs.Temp, fsynced when durable, its
// modification time set to mtime unless zero, renamed over name.
func (d *Dir) write(name string, perm fs.FileMode, mtime time.Time, durable bool, write func(w io.Writer) error) error {
	tm, err := d.CreateTemp(name, perm)
	if err != nil {
		return err
	}
	if !durable {
		tm.NoSync()
	}
	tm.SetModTime(mtime)
	if err := write(tm); err != nil {
		tm.Abort()
		return fmt.Errorf("write %s: %w", filepath.Join(d.abs, name), err)
	}
	if err := tm.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(d.abs, name), err)
	}
	return nil
}

// Path is the state directory's absolute path.
func (d *Dir) Path() string { return d.abs }

// Tree and Rel address a file of the state dir through safefs directly.
func (d *Dir) Tree() *safefs.Tree { return d.tree }

// Rel is name's path relative to Tree ("" is the directory itself).
func (d *Dir) Rel(name string) string {
	if name == "" {
		return d.rel
	}
	return d.rel + "/" + name
}

// Ensure creates the directory (0700) if missing and makes it private (chmod 0700: an
// existing one keeps its mode under MkdirAll). A symlink on the way is refused.
func (d *Dir) Ensure() error {
	if err := d.tree.MkdirAll(d.rel, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", d.abs, err)
	}
	if err := d.tree.Chmod(d.rel, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", d.abs, err)
	}
	return nil
}

// WriteFile writes name atomically and durably (temp file, fsync, rename), mode perm.
func (d *Dir) WriteFile(name string, data []byte, perm fs.FileMode) error {
	return d.WriteFileAt(name, data, perm, time.Time{})
}

// WriteFileAt is WriteFile with the file's modification time set to mtime before it appears
// under its name (zero: left as written).
func (d *Dir) WriteFileAt(name string, data []byte, perm fs.FileMode, mtime time.Time) error {
	return d.write(name, perm, mtime, true, func(w io.Writer) error { _, err := w.Write(data); return err })
}

// CreateTemp starts an atomic write of name (safefs.Temp: Commit renames it into place).
func (d *Dir) CreateTemp(name string, perm fs.FileMode) (*safefs.Temp, error) {
	tm, err := d.tree.CreateTemp(d.Rel(name), perm)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", filepath.Join(d.abs, name), err)
	}
	return tm, nil
}

// CreateScratch creates a new, empty file in the verified state dir (openRoot), O_EXCL and
// mode 0600, named prefix + a random part + suffix, and returns it open for writing. It is
// for a file another package fsyncs and renames out of the state dir itself, the index
// refresh's new index renamed over .git/index, which safefs.Temp (renamed within the tree)
// cannot be; a symlinked state dir is refused as for every other write.
func (d *Dir) CreateScratch(prefix, suffix string) (*os.File, error) {
	r, err := d.openRoot()
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		name := prefix + strconv.FormatUint(uint64(rand.Uint32()), 36) + suffix
		f, err := r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", filepath.Join(d.abs, name), err)
		}
		return f, nil
	}
}

// ReadFile reads name, never through a symlink (and a FIFO does not block).
func (d *Dir) ReadFile(name string) ([]byte, error) { return d.tree.ReadFile(d.Rel(name)) }

// Remove removes name; a missing one is no error.
func (d *Dir) Remove(name string) error {
	if err := d.tree.Remove(d.Rel(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.abs, name), err)
	}
	return nil
}

// RemoveAll removes name and everything below it (nothing followed).
func (d *Dir) RemoveAll(name string) error {
	if err := d.tree.RemoveAll(d.Rel(name)); err != nil {
		return fmt.Errorf("remove %s: %w", filepath.Join(d.abs, name), err)
	}
	return nil
}

// MkdirAll creates the subdirectory name (0700).
func (d *Dir) MkdirAll(name string) error {
	if err := d.tree.MkdirAll(d.Rel(name), 0o700); err != nil {
		return fmt.Errorf("mkdir %s: %w", filepath.Join(d.abs, name), err)
	}
	return nil
}

// OpenInPlace opens name read-write, creating it (perm) if missing, in place: for a file
// whose inode must stay (memd.pid carries a flock). The directory is opened as an os.Root
// whose identity is checked against what safefs lstat'ed, and the name with O_NOFOLLOW, so
// neither the directory nor the file can be a symlink. A symlink (or FIFO, socket) at name
// is not memd's file: it is removed, never followed, and a regular file made in its place.
func (d *Dir) OpenInPlace(name string, perm fs.FileMode) (*os.File, error) {
	p := filepath.Join(d.abs, name)
	r, err := d.openRoot()
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	if st, err := r.Lstat(name); err == nil && !st.Mode().IsRegular() && !st.IsDir() {
		if err := r.Remove(name); err != nil {
			return nil, fmt.Errorf("open %s: remove the %s there: %w", p, st.Mode().Type(), err)
		}
	}
	f, err := r.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ELOOP) {
		err = safefs.ErrSymlink
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: not a regular file", p)
	}
	return f, nil
}
