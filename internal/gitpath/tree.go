package gitpath

// What a fetched tree may write (docs/ARCHITECTURE.md §4): before a remote's tree is
// merged or checked out, every entry memd has not already vetted is checked
// the way git's verify_path and fsck check a tree (CheckName, go, is the
// per-name rule). The walk skips a subtree whose hash equals the local
// tree's at the same place (memd committed it itself, or vetted it when it
// came in), so its cost follows what changed. It is depth-first with a depth
// limit, keeps only the names along the current path (no per-entry path
// strings) and builds a path string only to report a refusal, so a hostile
// 30,000-deep tree costs a few kilobytes, not gigabytes.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/memd-dev/memd"
)

// ErrUnsafeTree: a commit's tree holds an entry git would refuse to check
// out (an invalid or reserved name, a duplicate, a bad mode, too deep). Such
// a commit is never merged or checked out; sync stops with state `error`
// naming the commit and path (*UnsafeTreeError) until the remote moves on.
var ErrUnsafeTree = errors.New("tree entry memd will not check out")

// UnsafeTreeError names the commit and the path (as far as it can be
// spelled: a name with a NUL or '/' is quoted) of a refused entry.
type UnsafeTreeError struct {
	Commit plumbing.Hash
	Path   string
	Reason string
}

func (e *UnsafeTreeError) Error() string {
	return fmt.Sprintf("commit %s: invalid path %q: %s", short(e.Commit), e.Path, e.Reason)
}

func (e *UnsafeTreeError) Unwrap() error { return ErrUnsafeTree }

// Limits of a tree memd checks out. MaxTreeDepth is git's core.maxTreeDepth
// default; MaxPathBytes is PATH_MAX: a longer path cannot be checked out
// (git fails on it with ENAMETOOLONG), and the bound keeps every path string
// the diff builds small.
// MaxNameBytes is NAME_MAX: no file system memd runs on holds a longer name,
// and a checkout must fail before the branch moves, not at the rename.
const (
	MaxTreeDepth = 4096
	MaxPathBytes = 4096
	MaxNameBytes = 255
)

// CheckTree vets tree (of commit, for the error) against known, a tree
// already vetted (zero = none): every entry of every subtree that is not
// identical to known's at the same path. It is TreeCheck{}.Check: no size
// limit, names compared byte-wise.
func CheckTree(s storer.EncodedObjectStorer, commit, tree, known plumbing.Hash) error {
	return TreeCheck{}.Check(s, commit, tree, known)
}

// TreeCheck is how a tree is vetted beyond the names and the shape: the size
// limit, how the work tree's file system compares names, and who hears of
// names that collide only on a stricter file system.
type TreeCheck struct {
	MaxBlob int64 // sync.max_file_size; 0: sizes unchecked
	// FS is how the work tree compares names: two entries one name there
	// are refused like a duplicate; Warn (when set) gets those that collide
	// only on a case-insensitive or normalising one (a clone on a Mac).
	FS   FS
	Warn func(path string, err error)
}

// Check vets tree (of commit, for the error) against known, a tree already
// vetted (zero = none), as CheckTree does, with o's limit and file system.
func (o TreeCheck) Check(s storer.EncodedObjectStorer, commit, tree, known plumbing.Hash) error {
	c := &treeChecker{s: s, commit: commit, maxBlob: o.MaxBlob, fs: o.FS, warn: o.Warn}
	return c.dir(tree, known, 1, 0)
}

// ErrBlobTooLarge: a fetched commit holds a file larger than sync.max_file_size. It is
// refused like an unsafe tree (errors.Is(err, ErrUnsafeTree) holds too): state `error`
// naming the path and the size until the remote moves on. The blob is never read: its size
// is the pack entry's header. The pack it came in is kept, so no restart fetches it again.
var ErrBlobTooLarge = errors.New("file larger than sync.max_file_size")

// BlobTooLargeError names the commit, the path and the size of a refused blob.
type BlobTooLargeError struct {
	Commit      plumbing.Hash
	Path        string
	Size, Limit int64
}

func (e *BlobTooLargeError) Error() string {
	return fmt.Sprintf("commit %s: %q is %s (%d bytes), larger than sync.max_file_size %s",
		short(e.Commit), e.Path, memd.ByteSize(e.Size), e.Size, memd.ByteSize(e.Limit))
}

func (e *BlobTooLargeError) Unwrap() []error { return []error{ErrBlobTooLarge, ErrUnsafeTree} }

type treeChecker struct {
	s       storer.EncodedObjectStorer
	maxBlob int64 // 0: sizes unchecked
	commit  plumbing.Hash
	names   []string // the path to the tree being checked
	// fs and warn: TreeCheck's FS and Warn.
	fs   FS
	warn func(path string, err error)
}

// blob refuses entry name (a blob, not in the vetted tree) when it is over the limit.
func (c *treeChecker) blob(name string, h plumbing.Hash) error {
	if c.maxBlob <= 0 {
		return nil
	}
	size, err := c.s.EncodedObjectSize(h)
	if err != nil || size <= c.maxBlob {
		return nil // a missing blob is the merge's or checkout's error to report
	}
	p := strings.Join(append(append([]string(nil), c.names...), name), "/")
	return &BlobTooLargeError{Commit: c.commit, Path: p, Size: size, Limit: c.maxBlob}
}

func (c *treeChecker) fail(name, reason string) error {
	p := strings.Join(append(append([]string(nil), c.names...), name), "/")
	if len(p) > 512 {
		p = p[:200] + "…" + p[len(p)-200:]
	}
	return &UnsafeTreeError{Commit: c.commit, Path: p, Reason: reason}
}

func (c *treeChecker) dir(tree, known plumbing.Hash, depth, pathLen int) error {
	if tree == known {
		return nil
	}
	t, err := object.GetTree(c.s, tree)
	if err != nil && !errors.Is(err, plumbing.ErrObjectNotFound) {
		// A tree go-git cannot even decode (empty name, NUL in a mode, ...).
		return &UnsafeTreeError{Commit: c.commit, Path: strings.Join(c.names, "/"), Reason: err.Error()}
	}
	if err != nil {
		return fmt.Errorf("commit %s: read tree %s at %q: %w", short(c.commit), tree, strings.Join(c.names, "/"), err)
	}
	var knownDirs map[string]plumbing.Hash // and the known tree's files, when sizes are checked
	if !known.IsZero() {
		if kt, err := object.GetTree(c.s, known); err == nil {
			knownDirs = make(map[string]plumbing.Hash, len(kt.Entries))
			for _, e := range kt.Entries {
				if e.Mode == filemode.Dir || c.maxBlob > 0 {
					knownDirs[e.Name] = e.Hash
				}
			}
		}
	}
	seen := make(map[string]struct{}, len(t.Entries))
	folded := map[string]string{} // Everywhere's key → the first name with it
	for _, e := range t.Entries {
		if err := CheckName(e.Name, e.Mode == filemode.Symlink); err != nil {
			return c.fail(e.Name, err.Error())
		}
		if len(e.Name) > MaxNameBytes {
			return c.fail(e.Name, fmt.Sprintf("name longer than %d bytes", MaxNameBytes))
		}
		if _, dup := seen[e.Name]; dup {
			return c.fail(e.Name, "duplicate entry in its tree")
		}
		seen[e.Name] = struct{}{}
		if err := c.collision(folded, e.Name); err != nil {
			return err
		}
		plen := pathLen + len(e.Name)
		if pathLen > 0 {
			plen++
		}
		if plen > MaxPathBytes {
			return c.fail(e.Name, fmt.Sprintf("path longer than %d bytes", MaxPathBytes))
		}
		switch e.Mode {
		case filemode.Regular, filemode.Deprecated, filemode.Executable, filemode.Symlink:
			if h, ok := knownDirs[e.Name]; !ok || h != e.Hash {
				if err := c.blob(e.Name, e.Hash); err != nil {
					return err
				}
			}
		case filemode.Submodule:
		case filemode.Dir:
			if depth >= MaxTreeDepth {
				return c.fail(e.Name, fmt.Sprintf("tree deeper than %d", MaxTreeDepth))
			}
			c.names = append(c.names, e.Name)
			err := c.dir(e.Hash, knownDirs[e.Name], depth+1, plen)
			c.names = c.names[:len(c.names)-1]
			if err != nil {
				return err
			}
		default:
			return c.fail(e.Name, fmt.Sprintf("bad file mode %o", uint32(e.Mode)))
		}
	}
	return nil
}

// collision checks name against the names already seen in its tree: one that
// is the same file on the work tree's file system is refused; one that would
// be on a case-insensitive or normalising one is a warning.
func (c *treeChecker) collision(folded map[string]string, name string) error {
	k := Everywhere.Key(name)
	other, ok := folded[k]
	if !ok {
		folded[k] = name
		return nil
	}
	if err := c.fs.Collision(name, other); err != nil {
		return c.fail(name, err.Error()+" on this file system")
	}
	if c.warn != nil {
		p := strings.Join(append(append([]string(nil), c.names...), name), "/")
		c.warn(p, Everywhere.Collision(name, other))
	}
	return nil
}

// short is a commit's hash as the errors name it.
func short(h plumbing.Hash) string {
	if h.IsZero() {
		return "(none)"
	}
	return h.String()[:12]
}
