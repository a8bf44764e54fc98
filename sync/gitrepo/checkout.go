package gitrepo

// The checkout of a fast-forward or merge (docs/ARCHITECTURE.md §4): all or nothing, and
// never through a symlink.
//
//  1. prepare: every path that changes is looked at once (lstat stamp, then
//     its content hash). A path that holds neither the old head's content
//     nor the new one's is a writer's edit (dirty). Every new file or link
//     is streamed from its blob into a short temp name beside its target
//     (internal/safefs: O_CREAT|O_EXCL|O_NOFOLLOW, ".memd-<random>.tmp",
//     26 bytes whatever the target's length) and fsynced. Missing parent
//     directories are created; a temp whose directory does not exist yet
//     because a file being deleted is in the way waits in the root.
//  2. verify: just before the branch moves every path is stat'ed again and
//     must be the version prepare checked (same device, inode, size, mode,
//     mtime, ctime). Any failure so far removes the temps and leaves HEAD
//     and the work tree as they were (ErrWorktreeChanged names the paths
//     edited meanwhile, so the caller commits them first and merges again).
//  3. the marker is written and the branch moves (merge.go moveHeadLocked).
//  4. apply: deletions, then each temp renamed over its target only if the
//     target still has the stamp prepare took (safefs Temp.CommitHold,
//     Tree.RemoveHold).
//  5. the new head's index, with the stat data of what step 4 wrote, goes into
//     the index.lock held since step 2 and is renamed over .git/index
//     (index.go writeCheckoutIndexLocked): no git sees HEAD moved and the
//     index behind it.
//
// A path edited between step 2 and its rename in step 4 is not clobbered: it
// is left as it is and reported (late), and the caller commits it on the
// version it was made on and merges it (edits.go, mergeEditsLocked) so that
// its edit and the merge's change both stay.
//
// A writer that opened a file before step 4's re-stat and writes after the
// rename writes into the version the rename took off the name (finding 11 of
// docs/RELIABILITY.md: a ledger append in no git object). So step 4 never
// lets a version vanish: the rename is an atomic exchange (a removal a rename
// to a temp name), and what it took off the name is held open (heldVersion)
// for at least heldMin (2 s), past the sync that took it. Each edit-merge
// round, and every commit (requireNoMergeLocked), reads the held versions
// again; one a writer changed is merged three-way against the version
// prepare verified and committed (mergeHeldLocked), so an append, a
// truncate-and-rewrite, or a file another process renamed over the target in
// the microseconds after the re-stat all survive, for every path the
// checkout replaces or removes, not only the ledger. What remains:
//   - a write through a descriptor opened before the swap that comes after
//     the release: more than heldMin after the swap, and after the first
//     commit or edit merge from then on (the "released versions" debug line
//     logs held_for); a process that exits (a one-shot memd sync) releases
//     them right after its edit merges;
//   - in a file over 256 KiB (readHeldBelow; smaller ones are always hashed),
//     a rewrite in place that keeps the size and lands within the file
//     system's timestamp granularity (ext4: a jiffy), which no stat can see;
//   - a crash before the merge of a held version: it lived only in an
//     unlinked inode;
//   - on a file system without an atomic exchange (errNoSwap in safefs), a
//     file renamed over the target between the re-stat and the rename (tens
//     of microseconds, BenchmarkCommitIfWindow).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/sync/treemerge"

	"github.com/memd-dev/memd/internal/workpool"
	"github.com/memd-dev/memd/sync/gitstore"
)

// ErrWorktreeChanged: a path the checkout would replace or remove was
// edited after it was checked. The checkout did not clobber it;
// *WorktreeChangedError says which paths and whether HEAD had moved.
var ErrWorktreeChanged = errors.New("work tree changed during checkout")

// WorktreeChangedError is the error behind ErrWorktreeChanged.
//
// Moved false: nothing happened (HEAD, the work tree and the index are as
// they were, no temp file left); commit Paths on HEAD and integrate again.
// Moved true: HEAD moved and every other path was checked out; Paths still
// hold the writer's edit, made on top of the old head's version.
type WorktreeChangedError struct {
	Paths []string
	Moved bool
}

func (e *WorktreeChangedError) Error() string {
	when := "before the branch moved"
	if e.Moved {
		when = "after the branch moved"
	}
	return fmt.Sprintf("%s (%s): %s", ErrWorktreeChanged, when, strings.Join(e.Paths, ", "))
}

func (e *WorktreeChangedError) Unwrap() error { return ErrWorktreeChanged }

type coKind uint8

const (
	coNone  coKind = iota
	coDel          // remove the file
	coWrite        // rename tmp over the file
	coMode         // content already there; fix the executable bit
)

type coItem struct {
	path    string
	c       treemerge.Change
	kind    coKind
	stamp   safefs.Stamp // the version prepare checked
	want    safefs.Stamp // what the target must be at its rename (stamp, or nothing for a drained directory)
	tmp     *safefs.Temp
	staged  bool   // tmp waits in the root: its directory does not exist yet
	ignored bool   // an ignored path HEAD does not track: the remote wins, no edit to protect
	kept    []byte // held lines the work tree keeps after the new content (guard.go)
}

type checkout struct {
	r       *Repo
	t       *safefs.Tree
	items   []*coItem
	dirty   []string // strict: edits in the way; lenient: paths left alone
	created []string // directories prepare created (removed again on abort)
	// deferSync: apply leaves the directory fsyncs to the caller (synced
	// lists the directories) so they can run after the writer lock is
	// released; the merge marker stays until they are done.
	deferSync bool
	synced    []string
	// marked: the merge marker for this checkout is already written (a
	// sync writes it while planning, before the writer lock).
	marked bool
	// gitlinks: submodule paths with no directory yet; apply makes each an empty
	// directory, as git's checkout of an uninitialised submodule does.
	gitlinks []string
	// gitlinkDirs: a submodule's (empty) directory where a file goes; apply removes it.
	gitlinkDirs []string
}

// openWorkTree opens the work tree for safe writes.
func (r *Repo) openWorkTree() (*safefs.Tree, error) {
	t, err := safefs.Open(r.dir)
	if err != nil {
		return nil, fmt.Errorf("open work tree %s: %w", r.dir, err)
	}
	return t, nil
}

// prepareCheckout does steps 1 and 2 for changes. strict (a fast-forward or
// merge about to move HEAD): an edit in the way is an error
// (*WorktreeChangedError, Moved false) and nothing is left behind. Not
// strict (finishing an interrupted checkout, HEAD already moved): such paths
// are left alone and listed in co.dirty.
func (r *Repo) prepareCheckout(changes map[string]treemerge.Change, strict bool) (co *checkout, err error) {
	r.filters.begin(checkoutSource(r.repo.Storer, changes))
	t, err := r.openWorkTree()
	if err != nil {
		return nil, err
	}
	co = &checkout{r: r, t: t}
	defer func() {
		if err != nil {
			co.abort()
			co = nil
		}
	}()
	s := r.repo.Storer
	var open []*safefs.Temp // written, not yet fsynced and closed
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		if r.private(p) { // the writer lock (the lock protocol owns it), memd's temps: never the tree's
			continue
		}
		it, err := co.classify(p, changes, strict)
		if err != nil {
			return co, err
		}
		if it == nil {
			continue // nothing to do, or left alone (co.dirty)
		}
		if it.kind == coWrite {
			if it.c.To.Mode == filemode.Submodule {
				continue // a gitlink has no work tree content of ours
			}
			if err := co.makeTemp(s, it, changes); err != nil {
				if !strict && (errors.Is(err, safefs.ErrSymlink) || errors.Is(err, treemerge.ErrPathConflict)) {
					co.dirty = append(co.dirty, p)
					continue
				}
				return co, err
			}
			open = append(open, it.tmp)
		}
		co.items = append(co.items, it)
		if len(open) >= maxOpenTemps {
			// fsync and close in batches: a checkout of 100,000 files
			// must not hold 100,000 descriptors.
			if err := closeTemps(open); err != nil {
				return co, err
			}
			open = open[:0]
		}
	}
	if strict && len(co.dirty) > 0 {
		return co, &WorktreeChangedError{Paths: co.dirty}
	}
	if err := closeTemps(open); err != nil {
		return co, err
	}
	if strict {
		if h := r.hooks; h != nil && h.beforeVerify != nil {
			h.beforeVerify()
		}
		if changed := co.changedSince(); len(changed) > 0 {
			return co, &WorktreeChangedError{Paths: changed}
		}
	}
	return co, nil
}

// classify decides what the checkout does at p from what the work tree
// holds there: delete it, fix its mode or write it (coItem.kind). nil:
// nothing to do, or an edit in the way (added to co.dirty; when strict, a
// directory with other files in the way is an error).
func (co *checkout) classify(p string, changes map[string]treemerge.Change, strict bool) (*coItem, error) {
	c := changes[p]
	// Only an untracked path is the remote's to overwrite (as in git): c.From is what
	// the head we are leaving has at p.
	it := &coItem{path: p, c: c, ignored: c.From == nil && co.r.ignoredPath(p, nil)}
	st, h, there, isDir, err := co.workState(p)
	if err != nil {
		return nil, err
	}
	it.stamp, it.want = st, st
	if c.To != nil && c.To.Mode == filemode.Submodule {
		if !isDir {
			co.gitlinks = append(co.gitlinks, p) // an empty directory, as git checks one out
		}
		if isDir || !there {
			return nil, nil // a gitlink has no content of ours; a submodule's checkout stays
		}
	}
	if c.To == nil || c.To.Mode == filemode.Submodule {
		// Gone, or a gitlink over a file: the file goes if it is the old side's.
		switch {
		case !there:
			return nil, nil // already gone
		case !isDir && c.From != nil && h == c.From.Hash:
			it.kind = coDel
			return it, nil
		case co.leftAlone(p, h):
			return nil, nil // held whole by the guard: stays as it is (guard.go)
		case it.ignored:
			return nil, nil // an ignored file of the user's: kept, never committed
		default:
			co.dirty = append(co.dirty, p)
			return nil, nil
		}
	}
	switch {
	case there && !isDir && h == c.To.Hash:
		it.kind = coMode
	case isDir:
		drains, err := co.r.mgDirDrains(co.t, p, changes)
		if err != nil {
			return nil, err
		}
		if !drains {
			if strict {
				return nil, fmt.Errorf("check out %s: a directory with other files is in the way: %w", p, treemerge.ErrPathConflict)
			}
			co.dirty = append(co.dirty, p)
			return nil, nil
		}
		it.kind = coWrite
		it.want = safefs.Stamp{} // gone once its files are deleted
		if c.From != nil && c.From.Mode == filemode.Submodule {
			co.gitlinkDirs = append(co.gitlinkDirs, p) // holds no file of ours to delete: removed itself
		}
	case !there && c.From == nil, there && c.From != nil && h == c.From.Hash, it.ignored:
		it.kind = coWrite
	case co.leftAlone(p, h):
		return nil, nil // held whole by the guard: stays as it is (guard.go)
	default:
		if kept, ok := co.keptLines(p, c); ok {
			it.kind, it.kept = coWrite, kept // From plus held lines only: they stay (guard.go)
			return it, nil
		}
		co.dirty = append(co.dirty, p)
		return nil, nil
	}
	return it, nil
}

// workState stamps rel and hashes what is there (a link's target for a
// link). Nothing there, or a symlink or file in rel's parent chain (nothing
// of ours can be at rel then), is there == false.
func (co *checkout) workState(rel string) (st safefs.Stamp, h plumbing.Hash, there, isDir bool, err error) {
	fi, err := co.t.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, safefs.ErrSymlink) {
		return safefs.Stamp{}, h, false, false, nil
	}
	if err != nil {
		return st, h, false, false, fmt.Errorf("check out %s: %w", rel, err)
	}
	st = safefs.StampOf(fi)
	switch {
	case fi.IsDir():
		return st, h, true, true, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := co.t.Readlink(rel)
		if err != nil {
			return st, h, false, false, fmt.Errorf("check out %s: %w", rel, err)
		}
		return st, plumbing.ComputeHash(plumbing.BlobObject, []byte(target)), true, false, nil
	case fi.Mode().IsRegular():
		f, err := co.t.OpenRead(rel)
		if err != nil {
			return st, h, false, false, fmt.Errorf("check out %s: %w", rel, err)
		}
		defer f.Close()
		h, err := co.r.workBlobHash(rel, f, fi.Size()) // what `git add` would store (filters.go)
		if err != nil {
			// Changed size while read: a writer is at it; the stamp
			// check catches it, the hash only has to be wrong. A filter
			// that fails: not what any side has, so not overwritten.
			return st, plumbing.ZeroHash, true, false, nil
		}
		return st, h, true, false, nil
	default:
		return st, plumbing.ZeroHash, true, false, nil // a FIFO or socket: never ours
	}
}

// makeTemp streams it's new content into a temp file (or link) beside the
// target, creating missing parent directories.
func (co *checkout) makeTemp(s storer.EncodedObjectStorer, it *coItem, changes map[string]treemerge.Change) error {
	dir := path.Dir(it.path)
	if dir != "." {
		blocked, err := co.mkParents(dir, changes)
		if err != nil {
			return fmt.Errorf("check out %s: %w", it.path, err)
		}
		it.staged = blocked
	}
	target := it.path
	if it.staged {
		target = "staged" // the temp goes to the root; CommitAt moves it
	}
	e := it.c.To
	obj, err := s.EncodedObject(plumbing.BlobObject, e.Hash)
	if err != nil {
		return fmt.Errorf("check out %s: read blob %s: %w", it.path, e.Hash, err)
	}
	rd, err := obj.Reader()
	if err != nil {
		return fmt.Errorf("check out %s: read blob %s: %w", it.path, e.Hash, err)
	}
	defer rd.Close()
	if e.Mode == filemode.Symlink {
		b, err := io.ReadAll(io.LimitReader(rd, 64<<10))
		if err != nil {
			return fmt.Errorf("check out %s: read blob %s: %w", it.path, e.Hash, err)
		}
		it.tmp, err = co.t.CreateTempSymlink(string(b), target)
		if err != nil {
			return fmt.Errorf("check out %s: %w", it.path, err)
		}
		return nil
	}
	perm := fs.FileMode(0o644)
	if e.Mode == filemode.Executable {
		perm = 0o755
	}
	var src io.Reader = rd
	if c := co.r.filters.conv(it.path); !c.Identity() {
		// What `git checkout` writes: eol conversion, then the smudge filter (filters.go).
		b, err := io.ReadAll(rd)
		if err != nil {
			return fmt.Errorf("check out %s: read blob %s: %w", it.path, e.Hash, err)
		}
		if b, err = c.Smudge(b); err != nil {
			return fmt.Errorf("check out %s: %w", it.path, err)
		}
		src = bytes.NewReader(b)
	}
	it.tmp, err = co.t.CreateTemp(target, perm)
	if err != nil {
		return fmt.Errorf("check out %s: %w", it.path, err)
	}
	if _, err := it.tmp.ReadFrom(withKept(src, it.kept)); err != nil {
		return fmt.Errorf("check out %s: %w", it.path, err)
	}
	return nil
}

// mkParents creates dir's missing components. blocked: a component is a
// file or symlink this checkout deletes, so the directory can only be made
// after the deletions. Anything else in the way is treemerge.ErrPathConflict.
func (co *checkout) mkParents(dir string, changes map[string]treemerge.Change) (blocked bool, err error) {
	comps := strings.Split(dir, "/")
	for i := range comps {
		pre := strings.Join(comps[:i+1], "/")
		fi, err := co.t.Lstat(pre)
		if errors.Is(err, fs.ErrNotExist) {
			if err := co.t.MkdirAll(dir, 0o755); err != nil {
				return false, err
			}
			for j := i; j < len(comps); j++ {
				co.created = append(co.created, strings.Join(comps[:j+1], "/"))
			}
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if fi.IsDir() {
			continue
		}
		if c, ok := changes[pre]; ok && c.To == nil {
			return true, nil
		}
		return false, fmt.Errorf("%s is a %s: %w", pre, kindOf(fi), treemerge.ErrPathConflict)
	}
	return false, nil
}

func kindOf(fi fs.FileInfo) string {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return "symlink"
	}
	return "file"
}

// maxOpenTemps bounds the temp files a checkout holds open at once.
const maxOpenTemps = 32

// closeTemps fsyncs and closes temp files, in parallel (the filesystem
// folds concurrent fsyncs into few journal commits).
func closeTemps(tmps []*safefs.Temp) error {
	return workpool.Each(len(tmps), gitstore.FsyncWorkers, func(i int) error { return tmps[i].Close() })
}

// changedSince lists the paths no longer at the stamp prepare took.
func (co *checkout) changedSince() []string {
	var changed []string
	for _, it := range co.items {
		if it.ignored || it.kind == coNone {
			continue
		}
		st, err := co.t.Stamp(it.path)
		if errors.Is(err, safefs.ErrSymlink) {
			st, err = safefs.Stamp{}, nil
		}
		if err != nil || st != it.stamp {
			changed = append(changed, it.path)
		}
	}
	return changed
}

// abort removes the temps and the directories prepare created (when still
// empty): the work tree is as it was.
func (co *checkout) abort() {
	for _, it := range co.items {
		if it.tmp != nil {
			it.tmp.Abort()
		}
	}
	for i := len(co.created) - 1; i >= 0; i-- {
		_ = co.t.Remove(co.created[i])
	}
	co.t.Close()
}

// apply is step 4: deletions, then the renames, each only over the version
// prepare checked. It returns the paths edited since (left as they are) and
// the paths written (for the index refresh and the directory fsync).
func (co *checkout) apply() (late []string, err error) {
	defer co.t.Close()
	var dirs = map[string]bool{}
	if late, err = co.removeDeleted(dirs); err != nil {
		return late, err
	}
	for _, p := range co.gitlinkDirs {
		// Only an empty one goes (rmdir); a submodule someone checked out makes the
		// write below fail, naming the path.
		if err := co.t.Remove(p); err == nil {
			dirs[path.Dir(p)] = true
		}
	}
	if late, err = co.writeItems(dirs, late); err != nil {
		return late, err
	}
	co.makeGitlinkDirs(dirs)
	// The renames are durable before the caller drops the marker.
	ds := co.planDirs(dirs)
	if co.deferSync {
		co.synced = ds
		return late, nil
	}
	if err := syncWorkDirs(co.t, ds); err != nil {
		return late, err
	}
	return late, nil
}

// makeGitlinkDirs makes an empty directory at each gitlink path that is free (a file
// left in the way, an edit, stays: it is committed and merged like any edit).
func (co *checkout) makeGitlinkDirs(dirs map[string]bool) {
	for _, p := range co.gitlinks {
		if _, err := co.t.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := co.t.MkdirAll(p, 0o755); err != nil {
			co.r.log.Warn("submodule directory not made", "path", p, "err", err)
			continue
		}
		dirs[path.Dir(p)] = true
	}
}

// planDirs is the directories to fsync, checked against the plan itself: a directory the
// plan replaced by a file or a link (a remote that turned a folder into a symlink, its
// files deleted first) is no directory any more, and fsyncing it would open a link after
// HEAD moved (finding 5 of issue 31). Its parent, which holds that rename, is synced
// instead; the deletions in it went with the folder.
func (co *checkout) planDirs(dirs map[string]bool) []string {
	written := map[string]bool{}
	for _, it := range co.items {
		if it.kind == coWrite {
			written[it.path] = true
		}
	}
	out := map[string]bool{}
	for d := range dirs {
		for p := d; p != "." && p != "/" && p != ""; p = path.Dir(p) {
			if written[p] {
				d = path.Dir(p)
			}
		}
		out[d] = true
	}
	ds := make([]string, 0, len(out))
	for d := range out {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	return ds
}

// removeDeleted removes the paths the checkout deletes, holding the version
// taken off each name (heldVersion); an ignored file is simply removed. A
// path edited since prepare is late. dirs collects the directories changed.
func (co *checkout) removeDeleted(dirs map[string]bool) (late []string, err error) {
	for _, it := range co.items {
		if it.kind != coDel {
			continue
		}
		if it.ignored {
			if err := co.t.Remove(it.path); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, safefs.ErrSymlink) {
				return late, fmt.Errorf("remove %s: %w", it.path, err)
			}
		} else {
			if h := co.r.hooks; h != nil && h.beforeReplace != nil {
				h.beforeReplace(it.path)
			}
			d, err := co.t.RemoveHold(it.path, it.stamp)
			if isLate(err) {
				late = append(late, it.path)
				continue
			}
			if err != nil {
				return late, fmt.Errorf("remove %s: %w", it.path, err)
			}
			co.r.keepHeld(it, d)
		}
		co.prune(path.Dir(it.path))
		dirs[path.Dir(it.path)] = true
	}
	return late, nil
}

// writeItems renames the prepared temps over their paths (holding the
// version replaced) and fixes the modes that changed; a path edited since
// prepare joins late. dirs collects the directories changed.
func (co *checkout) writeItems(dirs map[string]bool, late []string) ([]string, error) {
	for _, it := range co.items {
		switch it.kind {
		case coMode:
			co.fixMode(it.path, it.c.To.Mode)
			continue
		case coWrite:
		default:
			continue
		}
		if it.tmp == nil {
			continue
		}
		if h := co.r.hooks; h != nil && h.applyErr != nil {
			if err := h.applyErr(it.path); err != nil {
				return late, fmt.Errorf("check out %s: %w", it.path, err)
			}
		}
		want := it.want
		var err error
		switch {
		case it.staged:
			if err = co.t.MkdirAll(path.Dir(it.path), 0o755); err == nil {
				err = it.tmp.CommitAt(it.path, want, !it.ignored)
			}
		case it.ignored:
			err = it.tmp.Commit()
		default:
			if h := co.r.hooks; h != nil && h.beforeReplace != nil {
				h.beforeReplace(it.path)
			}
			var d *safefs.Displaced
			if d, err = it.tmp.CommitHold(want); err == nil && d != nil {
				co.r.keepHeld(it, d)
			}
		}
		if errors.Is(err, safefs.ErrChanged) {
			late = append(late, it.path)
			continue
		}
		if err != nil {
			return late, fmt.Errorf("check out %s: %w", it.path, err)
		}
		dirs[path.Dir(it.path)] = true
		if h := co.r.hooks; h != nil && h.afterWorkWrite != nil {
			h.afterWorkWrite(it.path)
		}
	}
	return late, nil
}

// syncWorkDirs fsyncs the work tree directories ds (repo-relative), in
// parallel, so the renames in them are durable.
func syncWorkDirs(t *safefs.Tree, ds []string) error {
	err := workpool.Each(len(ds), 8, func(i int) error {
		// A deleted file's directory may be gone, or a file now.
		if err := t.SyncDir(ds[i]); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fsync work tree: %w", err)
	}
	return nil
}

// prune removes now-empty directories from dir up to (not including) the
// root.
func (co *checkout) prune(dir string) {
	for dir != "." && dir != "" && dir != "/" {
		if err := co.t.Remove(dir); err != nil {
			return // not empty (or gone): stop
		}
		dir = path.Dir(dir)
	}
}

// fixMode sets the executable bit of a regular file to what mode says.
func (co *checkout) fixMode(rel string, mode filemode.FileMode) {
	if mode != filemode.Regular && mode != filemode.Executable {
		return
	}
	fi, err := co.t.Lstat(rel)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	want := fi.Mode().Perm() &^ 0o111
	if mode == filemode.Executable {
		want |= 0o111 & (fi.Mode().Perm() >> 2) // x where r is set, as git does
	}
	if want != fi.Mode().Perm() {
		if err := co.t.Chmod(rel, want); err != nil {
			co.r.log.Warn("chmod during checkout", "path", rel, "err", err)
		}
	}
}

// removeTempFiles deletes the temp files a killed checkout may have left in
// the directories of changes and in the root (they hold a copy of committed
// content).
func (r *Repo) removeTempFiles(changes map[string]treemerge.Change) {
	t, err := r.openWorkTree()
	if err != nil {
		return
	}
	defer t.Close()
	dirs := map[string]bool{".": true}
	for p := range changes {
		dirs[path.Dir(p)] = true
	}
	for d := range dirs {
		names, err := t.ReadDirNames(d)
		if err != nil {
			continue
		}
		for _, n := range names {
			if !safefs.IsTempName(n) {
				continue
			}
			rel := n
			if d != "." {
				rel = d + "/" + n
			}
			if _, tracked := changes[rel]; !tracked {
				_ = t.Remove(rel)
			}
		}
	}
}

// isLate: a replace or removal found the path no longer the version prepare
// checked (edited, removed, a symlink or file put in its parent chain): left as
// it is, merged by the caller.
func isLate(err error) bool {
	return errors.Is(err, safefs.ErrChanged) || errors.Is(err, fs.ErrNotExist) ||
		errors.Is(err, syscall.ENOTDIR) || errors.Is(err, safefs.ErrSymlink)
}

// heldVersion is a version of a file the checkout took off its name (replaced or
// removed; safefs CommitHold, RemoveHold), held open until the sync's edit merges
// are done (edits.go). A writer that opened the file before the swap and writes
// after it writes here (docs/RELIABILITY.md, finding 11); what it wrote is carried
// into a commit, merged three-way against the version the checkout verified, instead
// of vanishing with the inode.
type heldVersion struct {
	path string
	d    *safefs.Displaced
	base treemerge.Entry // the version last known to be in a commit (first: the one prepare verified)
	seen safefs.Stamp    // d's stamp when it last held base (zero: read it to know)
	at   time.Time       // when it was taken off its name
}

// maxHeld bounds the versions held at once: past it, those no writer touched are
// released (a checkout replacing 100,000 files must not hold 100,000 descriptors).
const maxHeld = 256

// keepHeld holds d, the version it's checkout took off it.path.
func (r *Repo) keepHeld(it *coItem, d *safefs.Displaced) {
	if it.c.From == nil {
		d.Close() // nothing of a commit was there: no version to merge against
		return
	}
	hv := &heldVersion{path: it.path, d: d, base: *it.c.From, at: time.Now()}
	if d.Held().SameButCtime(it.stamp) {
		hv.seen = d.Held() // unchanged up to the swap
	}
	if len(r.held) >= maxHeld {
		r.pruneHeld()
	}
	r.held = append(r.held, hv)
}

// pruneHeld releases the held versions no writer changed.
func (r *Repo) pruneHeld() {
	keep := r.held[:0]
	for _, hv := range r.held {
		if st, err := hv.d.Stat(); err == nil && st == hv.seen {
			hv.d.Close()
			continue
		}
		keep = append(keep, hv)
	}
	clear(r.held[len(keep):])
	r.held = keep
}

// readHeldBelow: a held version this small is read and hashed whatever its stamp
// says, so a rewrite in place that keeps size and mtime (within a timestamp tick)
// is seen too; a bigger one (a long ledger, where writers append) only when its
// stamp moved.
const readHeldBelow = 256 << 10

// heldEdit is what a writer left in a held version: its content and entry.
type heldEdit struct {
	hv   *heldVersion
	data []byte
	to   treemerge.Entry
	st   safefs.Stamp // the held file's stamp when it was read
}

// heldEditsLocked reads every held version a writer may have changed since it was
// last known to be in a commit and returns those that differ from it. A small one whose
// stamp has not moved since it last held base is read only once it is due for release
// (heldMin, as of now): a rewrite in place that kept size and stamps is seen by that read,
// before the version goes, and a sync's checkout does not read every version the last two
// seconds' checkouts hold (in the swarm bench a third of a fast-forward's writer lock).
func (r *Repo) heldEditsLocked(now time.Time) []heldEdit {
	var out []heldEdit
	for _, hv := range r.held {
		if l, ok := hv.d.Link(); ok {
			// A symlink cannot be written into; a different one is a
			// writer's, renamed over the target just before the swap.
			e := treemerge.Entry{Hash: plumbing.ComputeHash(plumbing.BlobObject, []byte(l)), Mode: filemode.Symlink}
			if !e.Same(&hv.base) {
				out = append(out, heldEdit{hv: hv, data: []byte(l), to: e})
			}
			continue
		}
		if !hv.d.Regular() {
			continue // a FIFO or socket a writer put there: no content of ours
		}
		st, err := hv.d.Stat()
		if err != nil || st == hv.seen && (st.Size > readHeldBelow || now.Sub(hv.at) < heldMin) {
			continue
		}
		data, err := hv.d.ReadAll()
		plain := data // the guard reads the plaintext; the blob is what `git add` stores
		if err == nil {
			data, err = r.cleanHeldEdit(hv, data) // filters.go
		}
		if err != nil {
			r.log.Warn("read a version taken off its name by the checkout", "repo", r.dir, "path", hv.path, "err", err)
			continue
		}
		e := treemerge.Entry{Hash: plumbing.ComputeHash(plumbing.BlobObject, data), Mode: filemode.Regular}
		if st.Mode&0o111 != 0 {
			e.Mode = filemode.Executable
		}
		if e.Hash != hv.base.Hash && r.guard != nil {
			vetted, ok := r.vetHeldEdit(hv.path, plain, hv.base)
			if ok {
				vetted, err = r.cleanHeldEdit(hv, vetted)
				ok = err == nil
			}
			if !ok {
				hv.seen = st // held whole: nothing of it goes into a commit (guard.go)
				continue
			}
			data, e.Hash = vetted, plumbing.ComputeHash(plumbing.BlobObject, vetted)
		}
		if e.Hash == hv.base.Hash {
			hv.seen = st
			continue
		}
		out = append(out, heldEdit{hv: hv, data: data, to: e, st: st})
	}
	return out
}

// heldMin is how long a held version is kept at least (it outlives the sync that
// took it; the next commit or edit merge reads it again): a writer must hold a
// descriptor opened before the swap this long before it writes to write into a
// version nobody reads again. A var for tests.
var heldMin = 2 * time.Second

// releaseHeldLocked closes the held versions older than heldMin, just read and
// found unchanged by the caller.
func (r *Repo) releaseHeldLocked(now time.Time) {
	if len(r.held) == 0 {
		return
	}
	var longest time.Duration
	n := 0
	keep := r.held[:0]
	for _, hv := range r.held {
		age := now.Sub(hv.at)
		if age < heldMin {
			keep = append(keep, hv)
			continue
		}
		longest = max(longest, age)
		hv.d.Close()
		n++
	}
	clear(r.held[len(keep):])
	r.held = keep
	if n > 0 {
		// The window that remains: a writer whose open came before a swap and
		// whose write comes after this (docs/RELIABILITY.md, finding 11).
		r.log.Debug("released versions the checkout took off their names", "repo", r.dir, "n", n, "held_for", longest, "still_held", len(keep))
	}
}
