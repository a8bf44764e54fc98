package gitrepo

// Moving HEAD to a merged or fetched commit and checking it out. The merge
// of the trees itself is sync/treemerge's; what each path gets is the
// domain policy's (treemerge.Policy).
//
// Crash safety of a fast-forward or merge (the ref moves before the work
// tree follows it):
//
//  1. every object (blobs, trees, the merge commit) is written first, and
//     the remote's tree has been vetted (internal/gitpath/tree.go);
//  2. every new file is written to a temp name beside its target and
//     fsynced, and every path re-checked (checkout.go): a failure or an
//     edit made meanwhile stops here with HEAD and the work tree untouched;
//  3. .git/memd/merge-in-progress is written and fsynced, holding the old
//     and the new head, and the branch ref moves with compare-and-set;
//  4. the temps are renamed over their targets, each only if the target is
//     still the version checked (else the writer's edit is merged again);
//  5. the index is refreshed and the marker removed.
//
// A SIGKILL between 3 and 5 leaves files that still hold the old head's
// content while HEAD has the new one: a reconcile would take them for local
// edits that revert the merge. FinishInterruptedMerge (called at the start
// of every Sync and Fetch, and meant to be called right after Open, before
// the first reconcile) reads the marker and, when HEAD is the new head,
// finishes step 4 for the paths still equal to the old head's blobs. A kill
// before 3 leaves HEAD at the old head: the marker is dropped and the next
// Sync redoes the merge (the objects and temp files written before are
// unreferenced, and the temps are removed). A checkout that cannot be
// finished is undone. No commit or reconcile runs while the marker stands.
// Nothing is lost either way.

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/sync/treemerge"

	"github.com/memd-dev/memd/internal/gitpath"

	"github.com/memd-dev/memd/sync/gitstore"
)

// mgStore is a treemerge.Store writing through a gitstore.ObjectBatch (git's loose
// format, durable once flushed).
type mgStore struct {
	*treemerge.Store
	b *gitstore.ObjectBatch
}

func (r *Repo) newMgStore() *mgStore {
	b := r.newObjectBatch()
	return &mgStore{Store: treemerge.NewStore(r.repo.Storer, b.Write), b: b}
}

// flush makes the written objects durable and visible.
func (st *mgStore) flush() error { return st.b.Flush() }

func (st *mgStore) discard() { st.b.Discard() }

// crashHooks are a Repo's test seams: they stop a sync at the points where a
// crash matters (a returned error abandons the sync right there, as a SIGKILL
// would, leaving files and marker as they are) or let a writer race the
// checkout. Only tests set them (export_test.go); nil in production.
type crashHooks struct {
	beforeRefMove  func() error
	afterRefMove   func() error
	afterWorkWrite func(rel string)
	// beforeVerify runs between a strict prepare and its re-stat before the
	// ref moves: a writer's edit there must surface as ErrWorktreeChanged.
	beforeVerify func()
	// applyErr fails the rename of a path, as a full disk would.
	applyErr func(rel string) error
	// beforeReplace runs just before apply's last re-stat of a path it
	// replaces or removes: a writer that opens the file there and writes
	// after the rename writes into the version taken off the name
	// (heldVersion).
	beforeReplace func(rel string)
	// indexLockHeld runs while an index refresh holds index.lock, with the
	// temp file (tmp) about to be renamed over the index. Armed for the
	// refreshes that start after setCrashHooks (indexState.lockHeld).
	indexLockHeld func(tmp string)
	// checkoutLockHeld runs once a checkout holds .git/index.lock (checkoutlock.go),
	// before it verifies and writes anything.
	checkoutLockHeld func()
	// afterPlan runs once a sync round has fetched and planned, before its local part.
	afterPlan func()
}

// mergeTreesLocked merges ours' and theirs' trees against base
// (treemerge.Merge), writing the new objects in git's loose format, durable
// before it returns.
func (r *Repo) mergeTreesLocked(base, ours, theirs plumbing.Hash, pol treemerge.Policy) (res treemerge.Result, err error) {
	st := r.newMgStore()
	defer func() {
		if err == nil {
			err = st.flush()
		}
		st.discard()
	}()
	pol.Filter = mergeFilter{r} // filtered paths merge on their text (filters.go)
	return treemerge.Merge(st.Store, base, ours, theirs, pol, r.log)
}

// ---- work tree ----

// dirtyPaths lists the paths of changes whose work tree content is neither
// the old side's (From) nor already the new side's (To): uncommitted edits
// that moving HEAD would overwrite. Ignored paths the old side does not track
// are never dirty (they are never committed, so the remote's version wins, as
// in git); an ignored tracked file is dirty like any other (git pull refuses to
// overwrite it; memd commits and merges it). memd's lock file never is (the
// checkout leaves it alone).
func (r *Repo) dirtyPaths(changes map[string]treemerge.Change) ([]string, error) {
	t, err := r.openWorkTree()
	if err != nil {
		return nil, err
	}
	co := &checkout{r: r, t: t}
	defer t.Close()
	var dirty []string
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		c := changes[p]
		if r.private(p) || (c.From == nil && r.ignoredPath(p, nil)) {
			continue
		}
		_, h, there, isDir, err := co.workState(p)
		if err != nil {
			return nil, err
		}
		if isDir {
			// A directory where a file goes (one side turned a directory
			// into a file): fine when the checkout empties it, i.e. it
			// holds only tracked files being deleted, unchanged.
			drains, err := r.mgDirDrains(t, p, changes)
			if err != nil {
				return nil, err
			}
			if !drains {
				dirty = append(dirty, p)
			}
			continue
		}
		switch {
		case !there && (c.From == nil || c.To == nil):
			continue
		case there && c.From != nil && h == c.From.Hash:
			continue
		case there && c.To != nil && h == c.To.Hash:
			continue
		case there && co.leftAlone(p, h):
			continue // held whole by the guard (guard.go)
		case there && c.To != nil:
			if _, ok := co.keptLines(p, c); ok {
				continue // the guard's held lines only (guard.go)
			}
		}
		dirty = append(dirty, p)
	}
	return dirty, nil
}

// mgDirDrains reports whether every file under the work tree directory dir
// is a tracked file the change set deletes and still holds its old content.
// Nothing is followed: a symlink inside is a file like any other.
func (r *Repo) mgDirDrains(t *safefs.Tree, dir string, changes map[string]treemerge.Change) (bool, error) {
	co := &checkout{r: r, t: t}
	var walk func(d string, depth int) (bool, error)
	walk = func(d string, depth int) (bool, error) {
		if depth > gitpath.MaxTreeDepth {
			return false, nil
		}
		names, err := t.ReadDirNames(d)
		if err != nil {
			return false, fmt.Errorf("check %s: %w", d, err)
		}
		for _, n := range names {
			rel := d + "/" + n
			c, ok := changes[rel]
			_, h, there, isDir, err := co.workState(rel)
			if err != nil {
				return false, err
			}
			if isDir {
				if ok, err := walk(rel, depth+1); err != nil || !ok {
					return false, err
				}
				continue
			}
			if !ok || c.To != nil || c.From == nil || !there || h != c.From.Hash {
				return false, nil
			}
		}
		return true, nil
	}
	return walk(dir, 0)
}

// ---- merge-in-progress marker (under .git/memd, written through safefs) ----

const (
	mergeMarkerName = "merge-in-progress"
	mergeMarkerRel  = memd.StateDirName + "/" + mergeMarkerName
)

func (r *Repo) openGitDirTree() (*safefs.Tree, error) {
	t, err := safefs.Open(r.gitDir)
	if err != nil {
		return nil, fmt.Errorf("merge marker: %w", err)
	}
	return t, nil
}

func (r *Repo) writeMergeMarker(old, nw plumbing.Hash) error {
	t, err := r.openGitDirTree()
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.MkdirAll(memd.StateDirName, 0o700); err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	content := "old " + old.String() + "\nnew " + nw.String() + "\n"
	if err := t.WriteFileAtomic(mergeMarkerRel, []byte(content), 0o600); err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	if err := t.SyncDir(memd.StateDirName); err != nil {
		r.log.Warn("merge marker dir fsync failed", "err", err)
	}
	return nil
}

func (r *Repo) readMergeMarker() (old, nw plumbing.Hash, ok bool, err error) {
	t, err := r.openGitDirTree()
	if err != nil {
		return old, nw, false, err
	}
	defer t.Close()
	b, err := t.ReadFile(mergeMarkerRel)
	if errors.Is(err, fs.ErrNotExist) {
		return old, nw, false, nil
	}
	if errors.Is(err, safefs.ErrSymlink) {
		// .git/memd (or the marker) is a symlink: memd never wrote a
		// marker through one, so there is none of ours.
		return old, nw, false, nil
	}
	if err == nil && len(b) > 4096 {
		// Not a marker memd wrote: it cannot guide a checkout.
		r.log.Warn("dropping a merge marker memd did not write", "path", mergeMarkerRel, "size", len(b))
		return old, nw, false, r.removeMergeMarker()
	}
	if err != nil {
		return old, nw, false, fmt.Errorf("merge marker: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		switch k {
		case "old":
			old = plumbing.NewHash(v)
		case "new":
			nw = plumbing.NewHash(v)
		}
	}
	if nw.IsZero() {
		// A torn or foreign marker: it cannot guide a checkout, and
		// HEAD still says where we are. Drop it.
		return old, nw, false, r.removeMergeMarker()
	}
	return old, nw, true, nil
}

func (r *Repo) removeMergeMarker() error {
	// Renames a deferred checkout tail has not made durable yet are guarded
	// by this marker too (durable.go).
	if err := r.syncDurableDirsLocked(); err != nil {
		return err
	}
	t, err := r.openGitDirTree()
	if err != nil {
		return err
	}
	defer t.Close()
	if err := t.Remove(mergeMarkerRel); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("merge marker: %w", err)
	}
	return nil
}

// ErrMergeInProgress: a checkout was interrupted and could neither be
// finished nor undone; no commit of the work tree is made until it is (the
// files may still hold the old head's content, which a commit would record
// as reverts of the merge).
var ErrMergeInProgress = errors.New("an interrupted checkout is not finished")

// requireNoMergeLocked is called before any commit of the work tree: an
// interrupted checkout is finished (or undone) first, and writes into versions
// a checkout replaced are merged (edits.go carryHeldLocked).
func (r *Repo) requireNoMergeLocked() error {
	if _, err := r.finishInterruptedMergeLocked(); err != nil {
		return fmt.Errorf("%w: %w", ErrMergeInProgress, err)
	}
	return r.carryHeldLocked()
}

// FinishInterruptedMerge completes a fast-forward or merge that a crash cut
// short after the branch ref moved (see the file comment): paths that still
// hold the old head's content get the new head's. When that fails (a path
// that cannot be written), the checkout is undone instead: the branch goes
// back to the old head and paths already written get the old content again,
// so an interrupted merge never blocks memd (the next Sync merges again and
// reports the path). Call it after Open and before the first reconcile; Sync,
// Fetch and every commit call it themselves. It reports whether there was
// anything to finish.
func (r *Repo) FinishInterruptedMerge() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.finishInterruptedMergeLocked()
}

func (r *Repo) finishInterruptedMergeLocked() (bool, error) {
	old, nw, ok, err := r.readMergeMarker()
	if err != nil || !ok {
		return false, err
	}
	head, err := r.readBranch()
	if err != nil {
		return false, err
	}
	if head != nw {
		// Killed before the ref moved (head == old): the merge is simply
		// redone by the next Sync. Anything else: history moved on; the
		// marker is stale.
		if head != old {
			r.log.Warn("dropping stale merge marker", "repo", r.dir, "old", short(old), "new", short(nw), "head", short(head))
		} else if changes, err := r.commitDiffLocked(old, nw); err == nil {
			r.removeTempFiles(changes)
		}
		return false, r.removeMergeMarker()
	}
	changes, err := r.commitDiffLocked(old, nw)
	if err != nil {
		return false, fmt.Errorf("finish interrupted merge in %s: %w", r.dir, err)
	}
	r.removeTempFiles(changes)
	// Finished (or undone) under index.lock like any checkout; one memd held when it was
	// killed is cleared here once stale (checkoutlock.go).
	hold, err := r.lockIndexForCheckout("finish interrupted merge", indexLockWait)
	if err != nil {
		return false, err
	}
	skipped, err := r.checkoutLenientLocked(old, nw, changes)
	if err != nil {
		uerr := r.undoInterruptedLocked(old, nw, changes)
		hold.release()
		if uerr != nil {
			return false, fmt.Errorf("finish interrupted merge in %s: %w (undo failed too: %v)", r.dir, err, uerr)
		}
		r.log.Warn("could not finish an interrupted merge; undone, the next sync merges again", "repo", r.dir, "head", short(old), "err", err)
		return true, r.removeMergeMarker()
	}
	r.noteMoved(old, nw, nil) // the index may be anything after a crash: the whole tree
	r.writeCheckoutIndexLocked(hold, nw)
	hold.release() // before the edit merge below, a checkout of its own
	r.log.Info("finished interrupted merge", "repo", r.dir, "head", short(nw), "paths", len(changes))
	if len(skipped) > 0 {
		// Edited since: made on old's content, so committed on old and merged (remote.go).
		_, err := r.mergeEditsLocked(old, nw, skipped)
		return true, err
	}
	return true, r.removeMergeMarker()
}

// checkoutLenientLocked brings the work tree from a to b along changes,
// leaving paths edited since alone (returned). The tree of b is vetted again
// (the marker names it).
func (r *Repo) checkoutLenientLocked(a, b plumbing.Hash, changes map[string]treemerge.Change) ([]string, error) {
	ta, tb, err := r.commitTreesLocked(a, b)
	if err != nil {
		return nil, err
	}
	if err := r.checkFetchedTreeLocked(r.repo.Storer, b, tb, ta); err != nil {
		return nil, err
	}
	co, err := r.prepareCheckout(changes, false)
	if err != nil {
		return nil, err
	}
	late, err := co.apply()
	return append(co.dirty, late...), err
}

// undoInterruptedLocked moves the branch back from nw to old and gives the
// paths that already hold nw's content old's again.
func (r *Repo) undoInterruptedLocked(old, nw plumbing.Hash, changes map[string]treemerge.Change) error {
	if err := r.updateRef(r.BranchRef().String(), old, nw, "memd: undo interrupted checkout"); err != nil {
		return err
	}
	back := make(map[string]treemerge.Change, len(changes))
	for p, c := range changes {
		back[p] = treemerge.Change{From: c.To, To: c.From}
	}
	r.removeTempFiles(back)
	co, err := r.prepareCheckout(back, false)
	if err == nil {
		_, err = co.apply()
	}
	r.noteCommitted(nw, old, nil)
	return err
}

// mgChangeList turns a tree diff into D's memd.Change list (for the index
// refresh and callers' counts).
func mgChangeList(changes map[string]treemerge.Change) []memd.Change {
	out := make([]memd.Change, 0, len(changes))
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		c := changes[p]
		op := byte('M')
		switch {
		case c.From == nil:
			op = 'A'
		case c.To == nil:
			op = 'D'
		}
		out = append(out, memd.Change{Path: p, Op: op})
	}
	return out
}

// commitTreesLocked is the trees of commits a and b (zero = the empty tree).
func (r *Repo) commitTreesLocked(a, b plumbing.Hash) (ta, tb plumbing.Hash, err error) {
	if ta, err = r.commitTreeLocked(a); err != nil {
		return
	}
	tb, err = r.commitTreeLocked(b)
	return
}

// commitDiffLocked diffs the trees of two commits (zero = empty).
func (r *Repo) commitDiffLocked(a, b plumbing.Hash) (map[string]treemerge.Change, error) {
	ta, tb, err := r.commitTreesLocked(a, b)
	if err != nil {
		return nil, err
	}
	out := map[string]treemerge.Change{}
	if err := treemerge.DiffTrees(r.repo.Storer, ta, tb, "", out); err != nil {
		return nil, err
	}
	return out, nil
}

func (r *Repo) commitTreeLocked(h plumbing.Hash) (plumbing.Hash, error) {
	if h.IsZero() {
		return plumbing.ZeroHash, nil
	}
	c, err := object.GetCommit(r.repo.Storer, h)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read commit %s: %w", h, err)
	}
	return c.TreeHash, nil
}

// moveHeadLocked moves the branch from old to nw (a fast-forward or a merge
// commit already written) and brings the work tree along, in the crash-safe
// order of the file comment and checkout.go. changes is the old→new tree
// diff. Every new file is written and fsynced before the ref moves; any
// failure up to the ref move leaves HEAD and the work tree as they were (a
// *WorktreeChangedError, Moved false, when a path was edited meanwhile: the
// caller commits it on old and integrates again). Paths edited after the
// ref moved are committed on old and merged in (edits.go), so the branch
// may end past nw: the returned editMerge says where, and which conflict
// copies that merge made.
func (r *Repo) moveHeadLocked(old, nw plumbing.Hash, changes map[string]treemerge.Change, msg string) (editMerge, error) {
	return r.moveHeadPreparedLocked(old, nw, changes, msg, nil)
}

// moveHeadPreparedLocked is moveHeadLocked with the checkout's step 1 already
// done (co, from prepareCheckout strict on the same changes; nil = do it
// now): a sync prepares before it takes the writer lock, so the lock covers
// the verify, the ref move and the renames only.
func (r *Repo) moveHeadPreparedLocked(old, nw plumbing.Hash, changes map[string]treemerge.Change, msg string, co *checkout) (editMerge, error) {
	late, err := r.moveHeadFromLocked(old, old, nw, changes, msg, co)
	if err != nil {
		return editMerge{Head: old}, err
	}
	return r.mergeEditsLocked(old, nw, late)
}

// moveHeadFromLocked moves the branch from cur to nw and checks out changes,
// whose From sides are base's entries (base = cur, except when edits made
// during a checkout are merged: then the side commit holding them). The
// marker names base, so a crash is finished against what the work tree
// held. It returns the paths edited after the ref moved (left as they are);
// then the marker stays until they are merged.
func (r *Repo) moveHeadFromLocked(base, cur, nw plumbing.Hash, changes map[string]treemerge.Change, msg string, co *checkout) ([]string, error) {
	t0 := time.Now()
	// index.lock from the verify to the last rename, as git's checkout holds it (checkoutlock.go).
	hold, err := r.lockIndexForCheckout("checkout", checkoutLockWait)
	if err != nil {
		if co != nil {
			co.abort()
			if co.marked {
				_ = r.removeMergeMarker() // it named the head we stay at
			}
		}
		return nil, err
	}
	defer hold.release()
	co, err = r.readyCheckoutLocked(base, cur, nw, changes, co)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	if !co.marked {
		if err := r.writeMergeMarker(base, nw); err != nil {
			co.abort()
			return nil, err
		}
	}
	t2 := time.Now()
	if err := r.moveRefLocked(co, cur, nw, msg); err != nil {
		return nil, err
	}
	t3 := time.Now()
	deferred := co.deferSync
	late, err := co.apply()
	if deferred {
		for _, d := range co.synced {
			r.durable.dirs[d] = true
		}
	}
	r.log.Debug("checkout", "paths", len(changes), "prepare_or_verify", t1.Sub(t0), "marker", t2.Sub(t1),
		"ref", t3.Sub(t2), "apply", time.Since(t3))
	// The index is written only now, the last step under index.lock as in git's checkout:
	// it takes stat data from the work tree, which must already hold the new content. A
	// sync's checkout that renamed every path leaves it, with index.lock, to flushDurable
	// after the writer lock (durable.go).
	r.noteMoved(cur, nw, mgChangeList(changes))
	if deferred && err == nil && len(late) == 0 && hold.f != nil && r.durable.index == nil {
		r.durable.index = hold.handOff()
	} else {
		r.writeCheckoutIndexLocked(hold, nw)
	}
	if err != nil {
		// The marker stays: the next Sync or start finishes (or undoes) the checkout.
		return nil, fmt.Errorf("update work tree in %s: %w", r.dir, err)
	}
	if len(late) > 0 {
		r.durable.dropMarker = false
		return late, nil
	}
	if deferred {
		// Durable, and the marker dropped, by flushDurable after the lock.
		r.durable.dropMarker, r.durable.base, r.durable.nw = true, base, nw
		return nil, nil
	}
	return nil, r.removeMergeMarker()
}

// readyCheckoutLocked prepares the checkout of changes (co nil) or, for one
// prepared before the lock, verifies nothing was edited since. A checkout
// that is not ready leaves no marker of its own behind.
func (r *Repo) readyCheckoutLocked(base, cur, nw plumbing.Hash, changes map[string]treemerge.Change, co *checkout) (*checkout, error) {
	if co == nil {
		// The marker first when it names the head we are at (a crash before
		// the ref moves then drops it and the temps with it); an edit
		// merge's round keeps the previous round's marker until it is ready.
		marked := false
		if base == cur {
			if err := r.writeMergeMarker(base, nw); err != nil {
				return nil, err
			}
			marked = true
		}
		co, err := r.prepareCheckout(changes, true)
		if err != nil {
			if marked {
				_ = r.removeMergeMarker()
			}
			return nil, err
		}
		co.marked = marked
		return co, nil
	}
	if changed := co.changedSince(); len(changed) > 0 {
		// Prepared before the lock: anything edited since is a writer's.
		co.abort()
		if co.marked {
			_ = r.removeMergeMarker() // it named the head we stay at
		}
		return nil, &WorktreeChangedError{Paths: changed}
	}
	return co, nil
}

// moveRefLocked moves the branch from cur to nw (the marker is written), the
// crash hooks around it. A failed move aborts the checkout and drops the
// marker; a crash hook's error leaves both, as a crash would.
func (r *Repo) moveRefLocked(co *checkout, cur, nw plumbing.Hash, msg string) error {
	if r.hooks != nil && r.hooks.beforeRefMove != nil {
		if err := r.hooks.beforeRefMove(); err != nil {
			return err // as a crash would: temps and marker stay
		}
	}
	if cur != nw {
		if err := r.updateRef(r.BranchRef().String(), nw, cur, msg); err != nil {
			co.abort()
			_ = r.removeMergeMarker()
			return err
		}
	}
	if r.hooks != nil && r.hooks.afterRefMove != nil {
		if err := r.hooks.afterRefMove(); err != nil {
			return err
		}
	}
	return nil
}
