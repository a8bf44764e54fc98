package safefs

// Replacing and removing a file without losing a write that lands while it happens
// (docs/RELIABILITY.md, finding 11). A writer that takes no lock may open the target
// before the caller's last check of it and write after the rename over it: its bytes
// then go into an inode that no name points to any more. So CommitHold and RemoveHold
// never let a version vanish unseen: they take what is at the target off its name in
// one atomic step (rename(2) with RENAME_EXCHANGE, or a rename to a fresh temp name
// for a removal), open it, unlink the temp name and hand it back held open
// (Displaced). The caller keeps it while it can still act on it, and reads it to see
// whether a writer changed it after the check (the checkout carries such an edit into
// a commit: sync/gitrepo/checkout.go, sync/gitrepo/edits.go). What the swap takes is exactly what was
// at the target at that instant, so a file a writer renamed over the target after the
// check is held too, not clobbered.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// errNoSwap: the file system (or the kernel) offers neither an atomic exchange
// nor a no-replace rename (renameIn); the callers fall back to a plain rename.
var errNoSwap = errors.New("atomic exchange not supported")

// noSwap (tests) makes renameAt report errNoSwap, as a file system without
// an atomic exchange does.
var noSwap bool

// hookBeforeSwap (tests) runs after the re-stat, just before the swap: a writer
// acting there is what the swap must not lose.
var hookBeforeSwap func(rel string)

// Displaced is a version of a file that CommitHold or RemoveHold took off its name:
// a regular file held open (a writer that opened it earlier still writes into it),
// a symlink's target, or nothing readable (a FIFO or socket). Close releases it.
type Displaced struct {
	rel    string
	f      *os.File
	link   string
	isLink bool
	held   Stamp
}

// Rel is the path the version was taken from.
func (d *Displaced) Rel() string { return d.rel }

// Held is the version's stamp just after it was taken off its name. The swap
// itself sets the ctime; the other fields are the writer's.
func (d *Displaced) Held() Stamp { return d.held }

// Link is a displaced symlink's target.
func (d *Displaced) Link() (target string, ok bool) { return d.link, d.isLink }

// Regular reports whether the version is a regular file (readable, and
// written into by whoever still has it open).
func (d *Displaced) Regular() bool { return d.f != nil }

// Stat is the held file's stamp now (fstat); a symlink's or a special
// file's is Held.
func (d *Displaced) Stat() (Stamp, error) {
	if d.f == nil {
		return d.held, nil
	}
	fi, err := d.f.Stat()
	if err != nil {
		return Stamp{}, perr("fstat", d.rel, err)
	}
	return stampOf(fi), nil
}

// ReadAll reads the held file from its start (a symlink: its target).
func (d *Displaced) ReadAll() ([]byte, error) {
	if d.isLink {
		return []byte(d.link), nil
	}
	if d.f == nil {
		return nil, perr("read", d.rel, fmt.Errorf("not a regular file (%s)", d.held.Mode.Type()))
	}
	b, err := io.ReadAll(io.NewSectionReader(d.f, 0, 1<<62))
	if err != nil {
		return nil, perr("read", d.rel, err)
	}
	return b, nil
}

// Close releases the held file. Safe to call more than once.
func (d *Displaced) Close() error {
	if d == nil || d.f == nil {
		return nil
	}
	f := d.f
	d.f = nil
	return f.Close()
}

// SameButCtime reports whether s and o agree in everything but the ctime: a
// version taken off its name by a swap is unchanged when this holds against
// the stamp taken before the swap (the rename sets the ctime, nothing else).
func (s Stamp) SameButCtime(o Stamp) bool {
	s.Ctime, o.Ctime = 0, 0
	return s == o
}

// CommitHold is CommitIf that never lets the replaced version vanish: the temp and
// the target swap names atomically (RENAME_EXCHANGE; RENAME_SWAP on macOS), and what
// the target held at that instant is opened, its name unlinked, and returned held
// (nil when nothing was there). A target that was a directory at the swap is swapped
// back (ErrChanged); one gone since the re-stat is ErrChanged too. With want the
// zero Stamp (nothing there) the rename refuses to replace a file created since the
// re-stat (ErrChanged). On any error the temp file is removed and the target is as
// it was.
//
// Where the file system has no atomic exchange (errNoSwap: some network and FUSE
// file systems), a regular target is opened before the re-stat and the rename is a
// plain one: an append into the checked version is still held, but a file another
// process renames over the target in the microseconds between the re-stat and the
// rename is replaced unseen (the window BenchmarkCommitIfWindow measures).
func (tm *Temp) CommitHold(want Stamp) (d *Displaced, err error) {
	err = tm.finish(tm.rel, func() error {
		base, got, err := tm.targetStamp()
		if err != nil {
			return err
		}
		if got != want {
			return perr("rename", tm.rel, ErrChanged)
		}
		if hookBeforeSwap != nil {
			hookBeforeSwap(tm.rel)
		}
		d, err = tm.swap(base, want)
		return err
	})
	return d, err
}

// swap is CommitHold's rename (see there), in the verified parent.
func (tm *Temp) swap(base string, want Stamp) (*Displaced, error) {
	p := tm.parent
	if !want.Exists {
		err := renameAt(p, tm.name, base, false)
		if errors.Is(err, errNoSwap) {
			err = p.Rename(tm.name, base)
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, perr("rename", tm.rel, ErrChanged) // created since the re-stat
		}
		if err != nil {
			return nil, perr("rename", tm.rel, err)
		}
		return nil, nil
	}
	err := renameAt(p, tm.name, base, true)
	if errors.Is(err, errNoSwap) {
		return tm.replaceHolding(base, want)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, perr("rename", tm.rel, ErrChanged) // removed since the re-stat
	}
	if err != nil {
		return nil, perr("rename", tm.rel, err)
	}
	// tm.name now holds what was at base: hold it, or put it back.
	d, isDir, herr := hold(p, tm.name, tm.rel)
	if herr == nil && !isDir {
		_ = p.Remove(tm.name) // the held descriptor keeps the inode
		d.restamp()
		return d, nil
	}
	if berr := renameAt(p, tm.name, base, true); berr != nil {
		// Neither held nor back at its name: it stays under the temp name,
		// which Abort must then not remove.
		tm.ended = true
		tm.release()
		return nil, perr("rename", tm.rel, fmt.Errorf("displaced version left at %s: %w", tm.Path(), errors.Join(herr, berr)))
	}
	if herr != nil {
		return nil, herr
	}
	return nil, perr("rename", tm.rel, ErrChanged) // a directory was put there
}

// replaceHolding is swap without an atomic exchange: open the target, check it is
// still want, then rename over it.
func (tm *Temp) replaceHolding(base string, want Stamp) (*Displaced, error) {
	p := tm.parent
	d, isDir, err := hold(p, base, tm.rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, perr("rename", tm.rel, ErrChanged) // removed since the re-stat
	}
	if err != nil {
		return nil, err
	}
	if isDir || !d.held.SameButCtime(want) || d.held.Ctime != want.Ctime {
		d.Close()
		return nil, perr("rename", tm.rel, ErrChanged)
	}
	if err := p.Rename(tm.name, base); err != nil {
		d.Close()
		return nil, perr("rename", tm.rel, err)
	}
	d.restamp()
	return d, nil
}

// restamp takes Held again once the swap and the unlink (which set the ctime)
// are done: from here on only a writer changes the stamp.
func (d *Displaced) restamp() {
	if st, err := d.Stat(); err == nil && d.f != nil {
		d.held = st
	}
}

// hold opens the file, symlink or special file at name in p without following
// anything. isDir: a directory is there (nothing opened).
func hold(p *os.Root, name, rel string) (d *Displaced, isDir bool, err error) {
	fi, err := p.Lstat(name)
	if err != nil {
		return nil, false, perr("open", rel, err)
	}
	d = &Displaced{rel: rel, held: stampOf(fi)}
	switch {
	case fi.IsDir():
		return nil, true, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		if d.link, err = p.Readlink(name); err != nil {
			return nil, false, perr("readlink", rel, err)
		}
		d.isLink = true
	case fi.Mode().IsRegular():
		f, err := p.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, false, perr("open", rel, err)
		}
		st, err := f.Stat()
		if err != nil || !os.SameFile(fi, st) {
			f.Close()
			if err == nil {
				err = ErrChanged // our own temp name, swapped meanwhile: not ours to trust
			}
			return nil, false, perr("open", rel, err)
		}
		d.f, d.held = f, stampOf(st)
	}
	return d, false, nil
}

// RemoveHold removes rel when it is still the version want says (else ErrChanged,
// nothing removed): it is renamed to a fresh temp name in its directory, opened,
// and that name unlinked, so the version removed is exactly the one held and
// returned (see CommitHold). A directory found there is put back (ErrChanged).
func (t *Tree) RemoveHold(rel string, want Stamp) (*Displaced, error) {
	p, base, done, err := t.parent("remove", rel, 0)
	if err != nil {
		return nil, err
	}
	defer done()
	var got Stamp
	fi, err := p.Lstat(base)
	switch {
	case err == nil:
		got = stampOf(fi)
		if fi.IsDir() {
			return nil, perr("remove", rel, syscall.EISDIR)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, perr("remove", rel, err)
	}
	if got != want || !want.Exists {
		return nil, perr("remove", rel, ErrChanged)
	}
	if hookBeforeSwap != nil {
		hookBeforeSwap(rel)
	}
	name := tempName()
	err = renameAt(p, base, name, false)
	if errors.Is(err, errNoSwap) {
		err = p.Rename(base, name)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, perr("remove", rel, ErrChanged)
	}
	if err != nil {
		return nil, perr("remove", rel, err)
	}
	d, isDir, herr := hold(p, name, rel)
	if herr == nil && !isDir {
		_ = p.Remove(name)
		d.restamp()
		return d, nil
	}
	if berr := renameAt(p, name, base, false); berr != nil && !errors.Is(berr, errNoSwap) {
		return nil, perr("remove", rel, fmt.Errorf("displaced version left at %s: %w", name, errors.Join(herr, berr)))
	} else if berr != nil {
		if p.Link(name, base) == nil { // fails if base exists again: then it stays at name
			_ = p.Remove(name)
		}
	}
	if herr != nil {
		return nil, herr
	}
	return nil, perr("remove", rel, ErrChanged)
}

// renameAt is renameIn on p's directory.
func renameAt(p *os.Root, from, to string, exchange bool) error {
	if noSwap {
		return errNoSwap
	}
	dir, err := p.Open(".")
	if err != nil {
		return err
	}
	defer dir.Close()
	rc, err := dir.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	if err := rc.Control(func(fd uintptr) { rerr = renameIn(int(fd), from, to, exchange) }); err != nil {
		return err
	}
	return rerr
}
