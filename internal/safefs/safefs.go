// Package safefs is the one way memd writes inside a work tree it does not
// fully trust (a checkout of a remote's tree, memd's own files in the repo
// and under .git/memd). It is built on the standard library's os.Root, which
// refuses any path that resolves outside the root, and adds git's "beyond a
// symbolic link" rule: no directory on the way to a target may be a symlink,
// not even one that stays inside the tree. A final component that is a
// symlink is replaced (rename, unlink), never followed (files are created
// O_CREAT|O_EXCL|O_NOFOLLOW under short unpredictable temp names and renamed
// over the target).
//
// The parent chain is walked one component at a time from the root: each
// component is lstat'ed, must be a real directory, and is opened as a
// sub-root whose identity (device and inode) is compared with what lstat
// saw, so a directory swapped for a symlink between the check and the open is
// caught. Every operation then happens on a single name inside that verified
// parent handle. Rename and Link between two directories, and Chmod and
// OpenFile of a final name, are the exceptions (os.Root has no renameat
// between two handles, and resolves a final symlink itself): both parent
// chains (or the final name) are checked first and the operation then runs
// through the root, so a local process racing memd can at worst redirect it
// to another place inside the tree, never outside.
//
// Paths are slash-separated and relative to the root ("a/b.md"); "." is the
// root itself. Errors are *fs.PathError naming the relative path and wrap
// ErrEscape, ErrSymlink, ErrChanged or the system error.
package safefs

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

var (
	// ErrEscape: the path is not a clean relative path inside the root
	// (absolute, "..", empty component, NUL).
	ErrEscape = errors.New("path leaves the work tree")
	// ErrSymlink: a directory on the way to the target is a symlink (or
	// not a directory), or the target itself is a symlink where a file or
	// directory must be read or changed in place.
	ErrSymlink = errors.New("path goes through a symbolic link")
	// ErrChanged: the target is no longer the version the caller checked
	// (Temp.CommitIf); nothing was replaced.
	ErrChanged = errors.New("file changed since it was checked")
)

// TempPrefix and TempSuffix frame every temp name safefs creates:
// ".memd-<16 random base32 chars>.tmp", 26 bytes whatever the target's name
// (a 255-byte name still fits beside it). Watchers and committers ignore
// "*.tmp"; sweepers may remove names matching IsTempName.
const (
	TempPrefix = ".memd-"
	TempSuffix = ".tmp"
	tempRand   = 16
)

// IsTempName reports whether a file name (no directory) is a safefs temp name.
func IsTempName(name string) bool {
	return len(name) == len(TempPrefix)+tempRand+len(TempSuffix) &&
		strings.HasPrefix(name, TempPrefix) && strings.HasSuffix(name, TempSuffix)
}

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

func tempName() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return TempPrefix + b32.EncodeToString(b[:]) + TempSuffix
}

// Tree is a directory memd writes into safely. Safe for concurrent use.
type Tree struct {
	root *os.Root
	dir  string
}

// Open opens dir (which may itself be reached through a symlink: the user
// chose it) as a Tree.
func Open(dir string) (*Tree, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	return &Tree{root: r, dir: abs}, nil
}

// Root is the directory the tree was opened on (absolute).
func (t *Tree) Root() string { return t.dir }

// Close releases the root handle.
func (t *Tree) Close() error { return t.root.Close() }

func perr(op, rel string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // restate with the tree-relative path
	}
	return &fs.PathError{Op: op, Path: rel, Err: err}
}

// CheckRel reports ErrEscape unless rel is a clean slash-separated relative
// path inside the root ("." is the root).
func CheckRel(rel string) error {
	if rel == "." {
		return nil
	}
	if rel == "" || strings.ContainsRune(rel, 0) || strings.Contains(rel, "\\") && filepath.Separator == '\\' {
		return ErrEscape
	}
	if path.IsAbs(rel) || path.Clean(rel) != rel || !filepath.IsLocal(filepath.FromSlash(rel)) {
		return ErrEscape
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "." || c == ".." || c == "" {
			return ErrEscape
		}
	}
	return nil
}

func split(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// openDir opens the directory rel, walking from the root one verified
// component at a time (no symlink, a real directory, the handle opened is
// the one lstat'ed). With mkPerm != 0 missing components are created.
// The caller closes the result unless it is t.root (check with isRoot).
func (t *Tree) openDir(rel string, mkPerm fs.FileMode) (*os.Root, error) {
	if rel == "." {
		return t.root, nil
	}
	cur := t.root
	closeCur := func() {
		if cur != t.root {
			cur.Close()
		}
	}
	comps := strings.Split(rel, "/")
	for i, c := range comps {
		fi, err := cur.Lstat(c)
		if errors.Is(err, fs.ErrNotExist) && mkPerm != 0 {
			if err = cur.Mkdir(c, mkPerm); err == nil || errors.Is(err, fs.ErrExist) {
				fi, err = cur.Lstat(c)
			}
		}
		if err != nil {
			closeCur()
			return nil, perr("open", strings.Join(comps[:i+1], "/"), err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			closeCur()
			return nil, perr("open", strings.Join(comps[:i+1], "/"), ErrSymlink)
		}
		if !fi.IsDir() {
			closeCur()
			return nil, perr("open", strings.Join(comps[:i+1], "/"), syscall.ENOTDIR)
		}
		next, err := cur.OpenRoot(c)
		if err != nil {
			closeCur()
			return nil, perr("open", strings.Join(comps[:i+1], "/"), err)
		}
		closeCur()
		cur = next
		st, err := cur.Stat(".")
		if err != nil || !os.SameFile(fi, st) {
			// Swapped (for a symlink, most likely) between lstat and open.
			closeCur()
			return nil, perr("open", strings.Join(comps[:i+1], "/"), ErrSymlink)
		}
	}
	return cur, nil
}

// parent opens rel's verified parent directory and returns it with rel's
// final name. done releases the handle.
func (t *Tree) parent(op, rel string, mkPerm fs.FileMode) (p *os.Root, base string, done func(), err error) {
	if err := CheckRel(rel); err != nil || rel == "." {
		if err == nil {
			err = ErrEscape // the root itself has no parent inside the tree
		}
		return nil, "", nil, perr(op, rel, err)
	}
	dir, base := split(rel)
	p, err = t.openDir(dir, mkPerm)
	if err != nil {
		return nil, "", nil, err
	}
	return p, base, func() {
		if p != t.root {
			p.Close()
		}
	}, nil
}

// MkdirAll creates rel and its missing parents with perm; an existing
// component must be a real directory (ErrSymlink otherwise).
func (t *Tree) MkdirAll(rel string, perm fs.FileMode) error {
	if err := CheckRel(rel); err != nil {
		return perr("mkdir", rel, err)
	}
	if perm == 0 {
		perm = 0o755
	}
	d, err := t.openDir(rel, perm)
	if err != nil {
		return err
	}
	if d != t.root {
		d.Close()
	}
	return nil
}

// Lstat stats rel without following a final symlink (a symlink in the
// parent chain is ErrSymlink).
func (t *Tree) Lstat(rel string) (fs.FileInfo, error) {
	if rel == "." {
		return t.root.Lstat(".")
	}
	p, base, done, err := t.parent("lstat", rel, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	fi, err := p.Lstat(base)
	if err != nil {
		return nil, perr("lstat", rel, err)
	}
	return fi, nil
}

// Readlink reads the symlink rel.
func (t *Tree) Readlink(rel string) (string, error) {
	p, base, done, err := t.parent("readlink", rel, 0)
	if err != nil {
		return "", err
	}
	defer done()
	s, err := p.Readlink(base)
	if err != nil {
		return "", perr("readlink", rel, err)
	}
	return s, nil
}

// OpenRead opens the regular file rel for reading, never following a
// symlink (ErrSymlink for a final symlink, an error for a non-regular file;
// a FIFO does not block).
func (t *Tree) OpenRead(rel string) (*os.File, error) {
	p, base, done, err := t.parent("open", rel, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	if fi, err := p.Lstat(base); err != nil {
		return nil, perr("open", rel, err)
	} else if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, perr("open", rel, ErrSymlink)
	}
	f, err := p.OpenFile(base, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = ErrSymlink
		}
		return nil, perr("open", rel, err)
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, perr("open", rel, err)
	}
	return f, nil
}

// ReadFile reads the regular file rel (see OpenRead).
func (t *Tree) ReadFile(rel string) ([]byte, error) {
	f, err := t.OpenRead(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, perr("read", rel, err)
	}
	return b, nil
}

// Remove removes the file, symlink or empty directory rel (a symlink is
// removed, not its target).
func (t *Tree) Remove(rel string) error {
	p, base, done, err := t.parent("remove", rel, 0)
	if err != nil {
		return err
	}
	defer done()
	if err := p.Remove(base); err != nil {
		return perr("remove", rel, err)
	}
	return nil
}

// RemoveAll removes rel and everything below it; nothing is followed.
// A missing rel is no error.
func (t *Tree) RemoveAll(rel string) error {
	p, base, done, err := t.parent("removeall", rel, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	if err := p.RemoveAll(base); err != nil {
		return perr("removeall", rel, err)
	}
	return nil
}

// Chmod changes rel's permission bits; a symlink at rel is ErrSymlink.
func (t *Tree) Chmod(rel string, mode fs.FileMode) error {
	p, base, done, err := t.parent("chmod", rel, 0)
	if err != nil {
		return err
	}
	defer done()
	fi, err := p.Lstat(base)
	if err != nil {
		return perr("chmod", rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return perr("chmod", rel, ErrSymlink)
	}
	if err := p.Chmod(base, mode); err != nil {
		return perr("chmod", rel, err)
	}
	return nil
}

// Chtimes sets rel's access and modification times; a symlink at rel is ErrSymlink.
func (t *Tree) Chtimes(rel string, atime, mtime time.Time) error {
	p, base, done, err := t.parent("chtimes", rel, 0)
	if err != nil {
		return err
	}
	defer done()
	fi, err := p.Lstat(base)
	if err != nil {
		return perr("chtimes", rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return perr("chtimes", rel, ErrSymlink)
	}
	if err := p.Chtimes(base, atime, mtime); err != nil {
		return perr("chtimes", rel, err)
	}
	return nil
}

// Rename moves from to to (both inside the tree, parents checked). A
// symlink at to is replaced, a symlink at from is moved as a link.
func (t *Tree) Rename(from, to string) error {
	for _, rel := range []string{from, to} {
		_, _, done, err := t.parent("rename", rel, 0)
		if err != nil {
			return err
		}
		done()
	}
	fd, fb := split(from)
	td, tb := split(to)
	if fd == td {
		p, _, done, err := t.parent("rename", from, 0)
		if err != nil {
			return err
		}
		defer done()
		if err := p.Rename(fb, tb); err != nil {
			return perr("rename", from, err)
		}
		return nil
	}
	if err := t.root.Rename(from, to); err != nil {
		return perr("rename", from, err)
	}
	return nil
}

// SyncDir fsyncs the directory rel (makes renames in it durable).
func (t *Tree) SyncDir(rel string) error {
	if err := CheckRel(rel); err != nil {
		return perr("fsync", rel, err)
	}
	d, err := t.openDir(rel, 0)
	if err != nil {
		return err
	}
	if d != t.root {
		defer d.Close()
	}
	f, err := d.Open(".")
	if err != nil {
		return perr("fsync", rel, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return perr("fsync", rel, err)
	}
	return nil
}

// WriteFileAtomic writes data to rel: a temp file beside it, fsynced, renamed
// over rel (a symlink at rel is replaced, not followed). The parent must
// exist (MkdirAll first). A reader sees the old or the new content, never a
// part.
func (t *Tree) WriteFileAtomic(rel string, data []byte, perm fs.FileMode) error {
	tmp, err := t.CreateTemp(rel, perm)
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Abort()
		return err
	}
	return tmp.Commit()
}

// Symlink makes rel a symlink to target (not validated: a link is content),
// replacing whatever file or link is at rel, atomically.
func (t *Tree) Symlink(target, rel string) error {
	tmp, err := t.CreateTempSymlink(target, rel)
	if err != nil {
		return err
	}
	return tmp.Commit()
}

// Temp is a new file (or symlink) under a temp name beside its target, to be
// renamed over the target by Commit or CommitIf, or removed by Abort. The
// verified parent directory handle is released once the file is created (a
// checkout may hold thousands of temps), and Commit and Abort verify the
// parent chain again, so the rename lands in a directory verified just
// before it.
type Temp struct {
	t      *Tree
	rel    string // target
	name   string // temp name in parent
	parent *os.Root
	done   func()
	f      *os.File // nil for a symlink or once closed
	ended  bool
	nosync bool      // Close skips the fsync (NoSync)
	mtime  time.Time // set on the file by Close when not zero (SetModTime)
}

// NoSync makes Close, and so Commit, skip the fsync: for a cache of what can be rebuilt, or
// for a writer that makes many files durable at once (sleep's apply flushes the file system
// once before its commit). Readers still see the old file or the new one, never a part.
func (tm *Temp) NoSync() { tm.nosync = true }

// SetModTime makes Close set the file's modification (and access) time to t, to the
// microsecond, before it is renamed into place: through the open file, so a symlink put at
// the temp name is never followed.
func (tm *Temp) SetModTime(t time.Time) { tm.mtime = t }

// CreateTemp creates a temp file for rel (O_CREAT|O_EXCL|O_NOFOLLOW, mode
// perm) in rel's verified parent directory, which must exist.
func (t *Tree) CreateTemp(rel string, perm fs.FileMode) (*Temp, error) {
	p, _, done, err := t.parent("create", rel, 0)
	if err != nil {
		return nil, err
	}
	for range 8 {
		name := tempName()
		f, err := p.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, perm&fs.ModePerm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			done()
			return nil, perr("create", rel, err)
		}
		tm := &Temp{t: t, rel: rel, name: name, parent: p, done: done, f: f}
		tm.release() // the open file needs no directory handle
		return tm, nil
	}
	done()
	return nil, perr("create", rel, fs.ErrExist)
}

// CreateTempSymlink creates a temp symlink to target for rel.
func (t *Tree) CreateTempSymlink(target, rel string) (*Temp, error) {
	p, _, done, err := t.parent("symlink", rel, 0)
	if err != nil {
		return nil, err
	}
	for range 8 {
		name := tempName()
		err := p.Symlink(target, name)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			done()
			return nil, perr("symlink", rel, err)
		}
		tm := &Temp{t: t, rel: rel, name: name, parent: p, done: done}
		tm.release()
		return tm, nil
	}
	done()
	return nil, perr("symlink", rel, fs.ErrExist)
}

// Path is the temp file's path relative to the tree.
func (tm *Temp) Path() string {
	d, _ := split(tm.rel)
	if d == "." {
		return tm.name
	}
	return d + "/" + tm.name
}

// Target is the path the temp file will be renamed to.
func (tm *Temp) Target() string { return tm.rel }

// Write appends to the temp file.
func (tm *Temp) Write(b []byte) (int, error) {
	if tm.f == nil {
		return 0, perr("write", tm.rel, fs.ErrClosed)
	}
	n, err := tm.f.Write(b)
	if err != nil {
		return n, perr("write", tm.rel, err)
	}
	return n, nil
}

// ReadFrom streams r into the temp file.
func (tm *Temp) ReadFrom(r io.Reader) (int64, error) {
	if tm.f == nil {
		return 0, perr("write", tm.rel, fs.ErrClosed)
	}
	n, err := io.Copy(tm.f, r)
	if err != nil {
		return n, perr("write", tm.rel, err)
	}
	return n, nil
}

// Close fsyncs (unless NoSync) and closes the temp file, keeping it for Commit: a checkout
// writes and closes every file before it moves the branch, then commits
// them all.
func (tm *Temp) Close() error {
	if tm.f == nil {
		return nil
	}
	f := tm.f
	tm.f = nil
	var err error
	if !tm.mtime.IsZero() {
		err = setModTime(f, tm.mtime)
	}
	if !tm.nosync && err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	tm.release()
	if err != nil {
		return perr("write", tm.rel, err)
	}
	return nil
}

// release closes the parent handle; acquire opens (and verifies) it again.
func (tm *Temp) release() {
	if tm.parent != nil {
		tm.done()
		tm.parent, tm.done = nil, nil
	}
}

func (tm *Temp) acquire(op string) error {
	if tm.parent != nil {
		return nil
	}
	p, _, done, err := tm.t.parent(op, tm.rel, 0)
	if err != nil {
		return err
	}
	tm.parent, tm.done = p, done
	return nil
}

// Commit closes the temp file (fsync) and renames it over the target. A
// directory at the target is an error (nothing is deleted); on any error the
// temp file is removed.
func (tm *Temp) Commit() error { return tm.commit(nil) }

// CommitIf is Commit, but only when the target is still what want says
// (Stamp taken when the caller checked it); otherwise the temp file is
// removed and the error wraps ErrChanged. The remaining window is the time
// between this re-stat and the rename (one syscall), and a write into the
// replaced file through a descriptor opened before the re-stat; CommitHold
// (hold.go) closes both, and the checkout uses it.
func (tm *Temp) CommitIf(want Stamp) error { return tm.commit(&want) }

func (tm *Temp) commit(want *Stamp) error {
	return tm.finish(tm.rel, func() error {
		base, got, err := tm.targetStamp()
		if err != nil {
			return err
		}
		if want != nil && got != *want {
			return perr("rename", tm.rel, ErrChanged)
		}
		if err := tm.parent.Rename(tm.name, base); err != nil {
			return perr("rename", tm.rel, err)
		}
		return nil
	})
}

// targetStamp takes the parent for the rename and re-stats the target: its base name and
// its Stamp (zero when absent). A directory at the target is never replaced.
func (tm *Temp) targetStamp() (base string, got Stamp, err error) {
	if err := tm.acquire("rename"); err != nil {
		return "", Stamp{}, err
	}
	_, base = split(tm.rel)
	fi, lerr := tm.parent.Lstat(base)
	switch {
	case errors.Is(lerr, fs.ErrNotExist):
		return base, Stamp{}, nil
	case lerr != nil:
		return "", Stamp{}, perr("rename", tm.rel, lerr)
	case fi.IsDir():
		return "", Stamp{}, perr("rename", tm.rel, syscall.EISDIR)
	}
	return base, stampOf(fi), nil
}

// finish closes (fsyncs) the temp file and runs rename, the one way every commit ends: once
// only, and on any error the temp file is removed.
func (tm *Temp) finish(rel string, rename func() error) (err error) {
	if tm.ended {
		return perr("rename", rel, fs.ErrClosed)
	}
	defer func() {
		if err != nil {
			tm.Abort()
		} else {
			tm.ended = true
			tm.release()
		}
	}()
	if err := tm.Close(); err != nil {
		return err
	}
	return rename()
}

// Abort removes the temp file. Safe to call more than once and after Commit.
func (tm *Temp) Abort() {
	if tm.ended {
		return
	}
	tm.ended = true
	if tm.f != nil {
		tm.f.Close()
		tm.f = nil
	}
	if tm.acquire("remove") == nil {
		_ = tm.parent.Remove(tm.name)
	}
	tm.release()
}

// Stamp identifies one version of a file: device, inode, size, mode, mtime
// and ctime. A rewrite in place changes size or the times (ctime cannot be
// set by a writer); a replacement changes the inode. The zero Stamp means
// "nothing there".
type Stamp struct {
	Exists       bool
	Dev, Ino     uint64
	Size         int64
	Mode         fs.FileMode
	Mtime, Ctime int64
}

func stampOf(fi fs.FileInfo) Stamp {
	s := Stamp{Exists: true, Size: fi.Size(), Mode: fi.Mode(), Mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Dev, s.Ino, s.Ctime = stampSys(st)
	}
	return s
}

// StampOf is the Stamp of fi (from Lstat); nil means nothing there.
func StampOf(fi fs.FileInfo) Stamp {
	if fi == nil {
		return Stamp{}
	}
	return stampOf(fi)
}

// Stamp lstats rel; a missing rel (or a missing parent) is the zero Stamp.
func (t *Tree) Stamp(rel string) (Stamp, error) {
	fi, err := t.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Stamp{}, nil
	}
	if err != nil {
		return Stamp{}, err
	}
	return stampOf(fi), nil
}

// CommitAt renames the temp to rel rather than to the target it was created
// for (a checkout stages a temp in an existing directory when rel's
// directory can only be made later). With check, only when rel still has
// the stamp want (else ErrChanged). On any error the temp file is removed.
func (tm *Temp) CommitAt(rel string, want Stamp, check bool) error {
	return tm.finish(rel, func() error {
		got, err := tm.t.Stamp(rel)
		if err != nil {
			return err
		}
		if got.Exists && got.Mode.IsDir() {
			return perr("rename", rel, syscall.EISDIR)
		}
		if check && got != want {
			return perr("rename", rel, ErrChanged)
		}
		return tm.t.Rename(tm.Path(), rel)
	})
}

// ReadDirNames lists the names in directory rel (unsorted).
func (t *Tree) ReadDirNames(rel string) ([]string, error) {
	if err := CheckRel(rel); err != nil {
		return nil, perr("readdir", rel, err)
	}
	d, err := t.openDir(rel, 0)
	if err != nil {
		return nil, err
	}
	if d != t.root {
		defer d.Close()
	}
	f, err := d.Open(".")
	if err != nil {
		return nil, perr("readdir", rel, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, perr("readdir", rel, err)
	}
	return names, nil
}

// Link makes a hard link to from at to (both parents verified). It fails
// when to exists, and never follows a symlink at from (the link is to the
// symlink itself): the writer lock is taken this way.
func (t *Tree) Link(from, to string) error {
	if _, _, done, err := t.parent("link", from, 0); err != nil {
		return err
	} else {
		done()
	}
	if _, _, done, err := t.parent("link", to, 0); err != nil {
		return err
	} else {
		done()
	}
	if err := t.root.Link(from, to); err != nil {
		return perr("link", from, err)
	}
	return nil
}

// OpenFile opens rel with flag and perm in its verified parent, never
// following a symlink at rel (O_NOFOLLOW is always added; a final symlink is
// ErrSymlink). For what the atomic writers do not cover (an append-only log).
func (t *Tree) OpenFile(rel string, flag int, perm fs.FileMode) (*os.File, error) {
	p, base, done, err := t.parent("open", rel, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	if fi, err := p.Lstat(base); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, perr("open", rel, ErrSymlink)
	}
	f, err := p.OpenFile(base, flag|syscall.O_NOFOLLOW, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = ErrSymlink
		}
		return nil, perr("open", rel, err)
	}
	return f, nil
}

// setModTime sets f's access and modification times to t (futimes on the descriptor).
func setModTime(f *os.File, t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	if err := unix.Futimes(int(f.Fd()), []unix.Timeval{tv, tv}); err != nil {
		return &fs.PathError{Op: "chtimes", Path: f.Name(), Err: err}
	}
	return nil
}
