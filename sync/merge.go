package sync

// Three-way merge of trees, done by memd itself (go-git v5 merges
// fast-forward only). Only the paths that differ are visited: trees are
// diffed recursively and identical subtrees (same hash) are skipped, so the
// cost follows the number of changed paths, not the size of the repo.
//
// Crash safety of a fast-forward or merge (the ref moves before the work
// tree follows it):
//
//  1. every object (blobs, trees, the merge commit) is written first;
//  2. .git/memd/merge-in-progress is written and fsynced, holding the old
//     and the new head;
//  3. the branch ref moves with compare-and-set;
//  4. the work tree paths that differ between the two heads are updated,
//     each only if it still holds the old head's content (else it is a
//     writer's edit made meanwhile, left alone and committed later);
//  5. the index is refreshed and the marker removed.
//
// A SIGKILL between 3 and 5 leaves files that still hold the old head's
// content while HEAD has the new one: a reconcile would take them for local
// edits that revert the merge. FinishInterruptedMerge (called at the start
// of every Sync and Fetch, and meant to be called right after Open, before
// the first reconcile) reads the marker and, when HEAD is the new head,
// finishes step 4 for the paths still equal to the old head's blobs. A kill
// before 3 leaves HEAD at the old head: the marker is dropped and the next
// Sync redoes the merge (the objects written before are unreferenced and
// harmless). Nothing is lost either way.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/memd-dev/memd"
)

// ErrPathConflict is returned when a merge would need a file and a
// directory at the same path. Nothing is changed; a person must rename one.
var ErrPathConflict = errors.New("file and directory at the same path")

// Test hooks, nil in production: they let tests stop a sync at the points
// where a crash matters (a returned error abandons the sync right there, as
// a SIGKILL would, leaving files and marker as they are).
var (
	hookBeforeRefMove  func() error
	hookAfterRefMove   func() error
	hookAfterWorkWrite func(rel string)
)

// mEntry is a file (blob, symlink or gitlink) in a tree.
type mEntry struct {
	Hash plumbing.Hash
	Mode filemode.FileMode
}

func (e *mEntry) same(o *mEntry) bool {
	if e == nil || o == nil {
		return e == nil && o == nil
	}
	return e.Hash == o.Hash && e.Mode == o.Mode
}

// pathChange is one path's change between two trees; nil = absent.
type pathChange struct {
	From, To *mEntry
}

// mgDiffTrees records in out every file path whose entry differs between
// trees a and b (zero hash = empty tree), skipping equal subtrees.
func mgDiffTrees(s storer.EncodedObjectStorer, a, b plumbing.Hash, prefix string, out map[string]pathChange) error {
	if a == b {
		return nil
	}
	ae, err := mgTreeEntries(s, a)
	if err != nil {
		return err
	}
	be, err := mgTreeEntries(s, b)
	if err != nil {
		return err
	}
	bm := make(map[string]object.TreeEntry, len(be))
	for _, e := range be {
		bm[e.Name] = e
	}
	am := make(map[string]bool, len(ae))
	for _, x := range ae {
		am[x.Name] = true
		y, ok := bm[x.Name]
		if ok && x.Hash == y.Hash && x.Mode == y.Mode {
			continue
		}
		if err := mgDiffEntry(s, prefix+x.Name, &x, ptrIf(ok, y), out); err != nil {
			return err
		}
	}
	for _, y := range be {
		if am[y.Name] {
			continue
		}
		if err := mgDiffEntry(s, prefix+y.Name, nil, &y, out); err != nil {
			return err
		}
	}
	return nil
}

func ptrIf(ok bool, e object.TreeEntry) *object.TreeEntry {
	if !ok {
		return nil
	}
	return &e
}

// mgDiffEntry diffs one name present on at least one side. A directory on
// one side against a file (or nothing) on the other expands to its files.
func mgDiffEntry(s storer.EncodedObjectStorer, name string, x, y *object.TreeEntry, out map[string]pathChange) error {
	xDir := x != nil && x.Mode == filemode.Dir
	yDir := y != nil && y.Mode == filemode.Dir
	var xh, yh plumbing.Hash
	if xDir {
		xh = x.Hash
	}
	if yDir {
		yh = y.Hash
	}
	if xDir || yDir {
		if err := mgDiffTrees(s, xh, yh, name+"/", out); err != nil {
			return err
		}
	}
	var from, to *mEntry
	if x != nil && !xDir {
		from = &mEntry{x.Hash, x.Mode}
	}
	if y != nil && !yDir {
		to = &mEntry{y.Hash, y.Mode}
	}
	if from != nil || to != nil {
		out[name] = pathChange{from, to}
	}
	return nil
}

func mgTreeEntries(s storer.EncodedObjectStorer, h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	return t.Entries, nil
}

// mgPatchTree writes the tree that results from applying changes (path →
// entry, nil = delete) to the tree root, creating and dropping directories
// as needed, and returns its hash. Only the directories along changed paths
// are rewritten.
func mgPatchTree(st *mgStore, root plumbing.Hash, changes map[string]*mEntry) (plumbing.Hash, error) {
	h, _, err := mgPatchDir(st, root, "", changes)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if h.IsZero() { // everything deleted: git's empty tree
		return st.writeTree(nil)
	}
	return h, nil
}

func mgPatchDir(st *mgStore, tree plumbing.Hash, prefix string, changes map[string]*mEntry) (plumbing.Hash, bool, error) {
	ents, err := mgTreeEntries(st.s, tree)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	byName := make(map[string]object.TreeEntry, len(ents)+len(changes))
	for _, e := range ents {
		byName[e.Name] = e
	}
	sub := map[string]map[string]*mEntry{}
	files := map[string]*mEntry{}
	for p, e := range changes {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			m := sub[dir]
			if m == nil {
				m = map[string]*mEntry{}
				sub[dir] = m
			}
			m[rest] = e
		} else {
			files[p] = e
		}
	}
	// Directories first, so a file replacing an emptied directory (or a
	// directory replacing a deleted file) sees the final state.
	for _, dir := range sortedKeys(sub) {
		var child plumbing.Hash
		if cur, ok := byName[dir]; ok {
			if cur.Mode == filemode.Dir {
				child = cur.Hash
			} else if fe, set := files[dir]; !set || fe != nil {
				// A file stays at dir: only deletions below it are
				// harmless (nothing there to delete).
				if mgAllNil(sub[dir]) {
					continue
				}
				return plumbing.ZeroHash, false, fmt.Errorf("merge %s%s: %w", prefix, dir, ErrPathConflict)
			} else {
				delete(byName, dir) // the file is deleted in this change set
			}
		}
		h, empty, err := mgPatchDir(st, child, prefix+dir+"/", sub[dir])
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if empty {
			delete(byName, dir)
		} else {
			byName[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
		}
	}
	for _, p := range sortedKeys(files) {
		e := files[p]
		cur, exists := byName[p]
		if e == nil {
			if exists && cur.Mode != filemode.Dir {
				delete(byName, p)
			}
			continue
		}
		if exists && cur.Mode == filemode.Dir {
			return plumbing.ZeroHash, false, fmt.Errorf("merge %s%s: %w", prefix, p, ErrPathConflict)
		}
		byName[p] = object.TreeEntry{Name: p, Mode: e.Mode, Hash: e.Hash}
	}
	if len(byName) == 0 {
		return plumbing.ZeroHash, true, nil
	}
	list := make([]object.TreeEntry, 0, len(byName))
	for _, e := range byName {
		list = append(list, e)
	}
	h, err := st.writeTree(list)
	return h, false, err
}

func mgAllNil(m map[string]*mEntry) bool {
	for _, e := range m {
		if e != nil {
			return false
		}
	}
	return true
}

// mgStore writes the objects of a merge through objectBatch (durable once
// flushed, git's loose format) and keeps the blobs it wrote readable before
// the flush.
type mgStore struct {
	s     storer.EncodedObjectStorer
	b     *objectBatch
	blobs map[plumbing.Hash][]byte
}

func (r *Repo) newMgStore() *mgStore {
	return &mgStore{s: r.repo.Storer, b: newObjectBatch(r), blobs: map[plumbing.Hash][]byte{}}
}

func (st *mgStore) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sort.Sort(object.TreeEntrySorter(entries))
	t := &object.Tree{Entries: entries}
	obj := &plumbing.MemoryObject{}
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	rd, err := obj.Reader()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	content, err := io.ReadAll(rd)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	h, err := st.b.write(plumbing.TreeObject, content)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write tree: %w", err)
	}
	return h, nil
}

func (st *mgStore) writeBlob(data []byte) (plumbing.Hash, error) {
	h, err := st.b.write(plumbing.BlobObject, data)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	st.blobs[h] = data
	return h, nil
}

func (st *mgStore) readBlob(e *mEntry) ([]byte, error) {
	if e != nil {
		if b, ok := st.blobs[e.Hash]; ok {
			return b, nil
		}
	}
	return mgReadBlob(st.s, e)
}

// flush makes the written objects durable and visible.
func (st *mgStore) flush() error { return st.b.flush() }

func (st *mgStore) discard() { st.b.discard() }

func mgReadBlob(s storer.EncodedObjectStorer, e *mEntry) ([]byte, error) {
	if e == nil {
		return nil, nil
	}
	obj, err := s.EncodedObject(plumbing.BlobObject, e.Hash)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", e.Hash, err)
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", e.Hash, err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", e.Hash, err)
	}
	return b, nil
}

// mgRenames pairs the paths a side deleted with the paths it added holding
// the same blob (a pure rename, as an archive move is). An add is used once.
// Among several candidates the archive mapping of the old path wins
// (archive/<YYYY>/<old>), then the first in path order.
func mgRenames(changes map[string]pathChange) map[string]string {
	added := map[plumbing.Hash][]string{}
	for _, p := range sortedKeys(changes) {
		c := changes[p]
		if c.From == nil && c.To != nil && c.To.Mode != filemode.Symlink {
			added[c.To.Hash] = append(added[c.To.Hash], p)
		}
	}
	if len(added) == 0 {
		return nil
	}
	used := map[string]bool{}
	out := map[string]string{}
	for _, p := range sortedKeys(changes) {
		c := changes[p]
		if c.From == nil || c.To != nil {
			continue
		}
		cands := added[c.From.Hash]
		pick := ""
		for _, q := range cands {
			if !used[q] && mgUnarchive(q) == p {
				pick = q
				break
			}
		}
		if pick == "" {
			for _, q := range cands {
				if !used[q] {
					pick = q
					break
				}
			}
		}
		if pick != "" {
			used[pick] = true
			out[p] = pick
		}
	}
	return out
}

// mgUnarchive strips one archive/<YYYY>/ prefix; p itself when there is none.
func mgUnarchive(p string) string {
	if orig, _, ok := memd.UnarchivePath(p); ok {
		return orig
	}
	return p
}

// treeMergeResult is what mergeTreesLocked produced.
type treeMergeResult struct {
	Tree      plumbing.Hash
	Conflicts []string // conflict copies written
}

// mergeTreesLocked merges ours' and theirs' trees against base: start from
// theirs, replay ours' changes, per-path policy for paths both touched.
func (r *Repo) mergeTreesLocked(base, ours, theirs plumbing.Hash, pol MergePolicy) (res treeMergeResult, err error) {
	s := r.repo.Storer
	st := r.newMgStore()
	defer func() {
		if err == nil {
			err = st.flush()
		}
		st.discard()
	}()
	dO, dT := map[string]pathChange{}, map[string]pathChange{}
	if err := mgDiffTrees(s, base, ours, "", dO); err != nil {
		return treeMergeResult{}, fmt.Errorf("diff base..ours: %w", err)
	}
	if err := mgDiffTrees(s, base, theirs, "", dT); err != nil {
		return treeMergeResult{}, fmt.Errorf("diff base..theirs: %w", err)
	}
	rO, rT := mgRenames(dO), mgRenames(dT)

	set := map[string]*mEntry{} // changes applied to theirs' tree
	fixed := map[string]bool{}  // paths decided by a rename rule
	var conflicts []string
	losers := map[string][][]byte{} // conflicts file → ledger loser lines

	// theirsAt reads the entry theirs' tree holds at p.
	theirsAt := func(p string) *mEntry {
		if c, ok := dT[p]; ok {
			return c.To
		}
		if c, ok := dO[p]; ok {
			return c.From // unchanged by theirs: base's entry
		}
		e, _ := mgTreeFile(s, theirs, p)
		return e
	}

	// Renames by ours of a path theirs changed: theirs' change lands at the
	// new path, nothing at the old one.
	for _, old := range sortedKeys(rO) {
		nw := rO[old]
		t, ok := dT[old]
		if !ok || t.To == nil {
			continue // theirs did not change (or also deleted) it
		}
		if _, clash := dT[nw]; clash {
			continue // theirs also wrote the new path: general rules decide
		}
		set[nw] = t.To
		set[old] = nil
		fixed[nw], fixed[old] = true, true
	}
	// Renames by theirs of a path ours changed: ours' change lands at the
	// new path.
	for _, old := range sortedKeys(rT) {
		nw := rT[old]
		o, ok := dO[old]
		if !ok || o.To == nil {
			continue
		}
		if _, clash := dO[nw]; clash {
			continue
		}
		set[nw] = o.To
		fixed[nw], fixed[old] = true, true // old stays deleted (theirs' tree)
	}

	for _, p := range sortedKeys(dO) {
		if fixed[p] {
			continue
		}
		o := dO[p]
		t, both := dT[p]
		if !both {
			set[p] = o.To // only ours touched it
			continue
		}
		if o.To.same(t.To) {
			continue // same result on both sides
		}
		switch {
		case o.To == nil:
			continue // ours deleted, theirs changed: the change stays
		case t.To == nil:
			set[p] = o.To // theirs deleted, ours changed: the change stays
			continue
		}
		// Both changed p differently.
		bb, err := st.readBlob(o.From)
		if err != nil {
			return res, err
		}
		ob, err := st.readBlob(o.To)
		if err != nil {
			return res, err
		}
		tb, err := st.readBlob(t.To)
		if err != nil {
			return res, err
		}
		regular := o.To.Mode.IsFile() && t.To.Mode.IsFile() && o.To.Mode != filemode.Symlink && t.To.Mode != filemode.Symlink
		kind := KindOther
		if regular {
			kind = pol.KindOf(p, bb, ob, tb)
		}
		var merged []byte
		switch kind {
		case KindDerived:
			continue // theirs; the next sleep renders it again
		case KindLedger:
			var lost [][]byte
			merged, lost = MergeLedger(bb, ob, tb)
			if len(lost) > 0 {
				cp := ConflictsPathFor(p)
				losers[cp] = append(losers[cp], lost...)
			}
		case KindLineUnion:
			merged = MergeLineUnion(bb, ob, tb)
		case KindIndexMD:
			merged = MergeIndexMD(bb, ob, tb)
		default:
			cp := ConflictCopyPath(p, pol.Host, pol.Now)
			for i := 2; mgExists(s, theirs, dO, set, cp); i++ {
				cp = ConflictCopyPath(p, fmt.Sprintf("%s-%d", pol.Host, i), pol.Now)
			}
			set[cp] = o.To
			conflicts = append(conflicts, cp)
			continue
		}
		h, err := st.writeBlob(merged)
		if err != nil {
			return res, err
		}
		set[p] = &mEntry{Hash: h, Mode: t.To.Mode}
	}

	for _, cp := range sortedKeys(losers) {
		cur, ok := set[cp]
		if !ok {
			cur = theirsAt(cp)
		}
		data, err := st.readBlob(cur)
		if err != nil {
			return res, err
		}
		h, err := st.writeBlob(AppendMissingLines(data, losers[cp]))
		if err != nil {
			return res, err
		}
		set[cp] = &mEntry{Hash: h, Mode: filemode.Regular}
	}

	moved, err := mgResolveFileDir(s, theirs, set, pol)
	if err != nil {
		return res, err
	}
	conflicts = append(conflicts, moved...)
	sort.Strings(conflicts)
	tree, err := mgPatchTree(st, theirs, set)
	if err != nil {
		return res, err
	}
	res.Tree = tree
	res.Conflicts = conflicts
	return res, nil
}

// mgExists says whether the merged tree would hold p (a conflict copy name
// must not overwrite anything).
func mgExists(s storer.EncodedObjectStorer, theirs plumbing.Hash, dO map[string]pathChange, set map[string]*mEntry, p string) bool {
	if e, ok := set[p]; ok {
		return e != nil
	}
	if c, ok := dO[p]; ok && c.To != nil {
		return true
	}
	e, _ := mgTreeFile(s, theirs, p)
	return e != nil
}

// mgTreeFile looks up one file path in a tree (nil when absent or a
// directory).
func mgTreeFile(s storer.EncodedObjectStorer, tree plumbing.Hash, p string) (*mEntry, error) {
	e, err := mgTreeLookup(s, tree, p)
	if err != nil || e == nil || e.Mode == filemode.Dir {
		return nil, err
	}
	return &mEntry{e.Hash, e.Mode}, nil
}

// mgTreeLookup finds the entry (file or directory) at p; nil when absent.
func mgTreeLookup(s storer.EncodedObjectStorer, tree plumbing.Hash, p string) (*object.TreeEntry, error) {
	h := tree
	for {
		ents, err := mgTreeEntries(s, h)
		if err != nil {
			return nil, err
		}
		name, rest, more := strings.Cut(p, "/")
		var found *object.TreeEntry
		for i := range ents {
			if ents[i].Name == name {
				found = &ents[i]
				break
			}
		}
		if found == nil || !more {
			return found, nil
		}
		if found.Mode != filemode.Dir {
			return nil, nil
		}
		h, p = found.Hash, rest
	}
}

// mgResolveFileDir handles ours' files that would collide with theirs'
// tree as file against directory (one side made areas/x a file, the other
// a directory): theirs stays, ours' file moves to a conflict copy name
// (for a file under a path theirs holds as a file, the whole directory
// part is renamed: areas/x.conflict-…/y.html). Nothing is dropped and the
// merge does not get stuck on ErrPathConflict.
func mgResolveFileDir(s storer.EncodedObjectStorer, theirs plumbing.Hash, set map[string]*mEntry, pol MergePolicy) ([]string, error) {
	var moved []string
	for _, p := range sortedKeys(set) {
		e := set[p]
		if e == nil {
			continue
		}
		target := ""
		te, err := mgTreeLookup(s, theirs, p)
		if err != nil {
			return nil, err
		}
		if te != nil && te.Mode == filemode.Dir {
			gone, err := mgAllDeletedUnder(s, te.Hash, set, p)
			if err != nil {
				return nil, err
			}
			if !gone {
				target = ConflictCopyPath(p, pol.Host, pol.Now)
			}
		} else {
			for i := strings.IndexByte(p, '/'); i >= 0; i = mgNextSlash(p, i) {
				anc := p[:i]
				if del, ok := set[anc]; ok && del == nil {
					continue // theirs' file there is deleted by ours
				}
				ae, err := mgTreeLookup(s, theirs, anc)
				if err != nil {
					return nil, err
				}
				if ae != nil && ae.Mode != filemode.Dir {
					target = ConflictCopyPath(anc, pol.Host, pol.Now) + p[i:]
					break
				}
				if ae == nil {
					break // nothing deeper can collide
				}
			}
		}
		if target == "" {
			continue
		}
		delete(set, p)
		set[target] = e
		moved = append(moved, target)
	}
	return moved, nil
}

func mgNextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// mgAllDeletedUnder: does set delete every file of theirs' directory dir
// (ours replaced the directory by a file)? Then the file is no collision.
func mgAllDeletedUnder(s storer.EncodedObjectStorer, dirHash plumbing.Hash, set map[string]*mEntry, dir string) (bool, error) {
	files := map[string]pathChange{}
	if err := mgDiffTrees(s, dirHash, plumbing.ZeroHash, dir+"/", files); err != nil {
		return false, err
	}
	for f := range files {
		if e, ok := set[f]; !ok || e != nil {
			return false, nil
		}
	}
	return true, nil
}

// ---- work tree ----

// mgWorkHash is the git blob hash of what the work tree holds at rel (a
// symlink's target for a link); ok false when nothing is there.
func (r *Repo) mgWorkHash(rel string) (h plumbing.Hash, ok bool, err error) {
	abs := filepath.Join(r.dir, filepath.FromSlash(rel))
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("stat %s: %w", rel, err)
	}
	var data []byte
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(abs)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("readlink %s: %w", rel, err)
		}
		data = []byte(t)
	case fi.Mode().IsRegular():
		data, err = os.ReadFile(abs)
		if err != nil {
			return plumbing.ZeroHash, false, fmt.Errorf("read %s: %w", rel, err)
		}
	case fi.IsDir():
		return plumbing.ZeroHash, true, nil // a directory where a file was: never equal
	default:
		return plumbing.ZeroHash, true, nil
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), true, nil
}

// workMatches says whether the work tree holds exactly e at rel (e nil =
// nothing there).
func (r *Repo) workMatches(rel string, e *mEntry) (bool, error) {
	h, ok, err := r.mgWorkHash(rel)
	if err != nil {
		return false, err
	}
	if e == nil {
		return !ok, nil
	}
	return ok && h == e.Hash, nil
}

// dirtyPaths lists the paths of changes whose work tree content is neither
// the old side's (From) nor already the new side's (To): uncommitted edits
// that moving HEAD would overwrite.
func (r *Repo) dirtyPaths(changes map[string]pathChange) ([]string, error) {
	var dirty []string
	for _, p := range sortedKeys(changes) {
		c := changes[p]
		if fi, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); err == nil && fi.IsDir() {
			// A directory where a file goes (one side turned a directory
			// into a file): fine when the checkout empties it, i.e. it
			// holds only tracked files being deleted, unchanged.
			drains, err := r.mgDirDrains(p, changes)
			if err != nil {
				return nil, err
			}
			if !drains {
				dirty = append(dirty, p)
			}
			continue
		}
		h, ok, err := r.mgWorkHash(p)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok && (c.From == nil || c.To == nil):
			continue
		case ok && c.From != nil && h == c.From.Hash:
			continue
		case ok && c.To != nil && h == c.To.Hash:
			continue
		}
		dirty = append(dirty, p)
	}
	return dirty, nil
}

// mgDirDrains reports whether every file under the work tree directory dir
// is a tracked file the change set deletes and still holds its old content.
func (r *Repo) mgDirDrains(dir string, changes map[string]pathChange) (bool, error) {
	root := filepath.Join(r.dir, filepath.FromSlash(dir))
	drains := true
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(r.dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		c, ok := changes[rel]
		if !ok || c.To != nil || c.From == nil {
			drains = false
			return filepath.SkipAll
		}
		h, there, err := r.mgWorkHash(rel)
		if err != nil {
			return err
		}
		if !there || h != c.From.Hash {
			drains = false
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("check %s: %w", dir, err)
	}
	return drains, nil
}

// applyWorktreeLocked moves the work tree from the old head's tree to the new
// one along changes. A path is only written when it still holds the old
// content (or already the new); anything else is a writer's edit made
// meanwhile, returned for the caller to commit and merge.
func (r *Repo) applyWorktreeLocked(changes map[string]pathChange) (skipped []string, err error) {
	s := r.repo.Storer
	var written []string
	defer func() {
		// One fsync pass after all writes instead of one per write: the
		// first flushes the journal, the rest find little to do. Only then
		// may the caller drop the merge marker.
		if serr := r.mgSyncFiles(written); serr != nil && err == nil {
			err = serr
		}
	}()
	paths := sortedKeys(changes)
	// Deletions first: a deleted file may be where a new directory goes.
	for _, p := range paths {
		c := changes[p]
		if c.To != nil {
			continue
		}
		ok, err := r.workMatches(p, c.From)
		if err != nil {
			return skipped, err
		}
		if !ok {
			if gone, _ := r.workMatches(p, nil); !gone {
				skipped = append(skipped, p)
			}
			continue
		}
		abs := filepath.Join(r.dir, filepath.FromSlash(p))
		if err := os.Remove(abs); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return skipped, fmt.Errorf("remove %s: %w", p, err)
		}
		r.mgPruneDirs(path.Dir(p))
	}
	for _, p := range paths {
		c := changes[p]
		if c.To == nil {
			continue
		}
		h, there, err := r.mgWorkHash(p)
		if err != nil {
			return skipped, err
		}
		switch {
		case there && h == c.To.Hash:
			r.mgFixMode(p, c.To.Mode) // content there; a chmod may be the change
			continue
		case c.From == nil && !there, c.From != nil && there && h == c.From.Hash:
			// still the old content: ours to replace
		default:
			skipped = append(skipped, p)
			continue
		}
		if c.To.Mode == filemode.Submodule {
			continue // gitlinks have no work tree content of ours
		}
		data, err := mgReadBlob(s, c.To)
		if err != nil {
			return skipped, err
		}
		if err := r.mgWriteFile(p, data, c.To.Mode); err != nil {
			return skipped, err
		}
		if c.To.Mode != filemode.Symlink {
			written = append(written, p)
		}
		if hookAfterWorkWrite != nil {
			hookAfterWorkWrite(p)
		}
	}
	return skipped, nil
}

// mgWriteFile writes a file atomically (temp file beside it, renamed over):
// a reader never sees half a memory. Temp names end in .tmp, which the
// watcher ignores. The caller fsyncs (mgSyncFiles) once all are written.
func (r *Repo) mgWriteFile(rel string, data []byte, mode filemode.FileMode) error {
	abs := filepath.Join(r.dir, filepath.FromSlash(rel))
	dir := filepath.Dir(abs)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", rel, err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(dir, "."+filepath.Base(abs)+".memd-"+hex.EncodeToString(rnd[:])+".tmp")
	if mode == filemode.Symlink {
		if err := os.Symlink(string(data), tmp); err != nil {
			return fmt.Errorf("write %s: %w", rel, err)
		}
	} else {
		perm := os.FileMode(0o644)
		if mode == filemode.Executable {
			perm = 0o755
		}
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err != nil {
			return fmt.Errorf("write %s: %w", rel, err)
		}
		_, werr := f.Write(data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(tmp)
			return fmt.Errorf("write %s: %w", rel, werr)
		}
	}
	if fi, err := os.Lstat(abs); err == nil && fi.IsDir() {
		// A directory of untracked leftovers where the file goes: never
		// delete content, refuse instead.
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: a directory is in the way: %w", rel, ErrPathConflict)
	}
	if err := os.Rename(tmp, abs); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", rel, err)
	}
	return nil
}

// removeTempFiles deletes the temp files a killed mgWriteFile may have left
// in the directories of changes (they hold a copy of committed content).
func (r *Repo) removeTempFiles(changes map[string]pathChange) {
	dirs := map[string]bool{}
	for p := range changes {
		dirs[path.Dir(p)] = true
	}
	for d := range dirs {
		matches, _ := filepath.Glob(filepath.Join(r.dir, filepath.FromSlash(d), ".*.memd-*.tmp"))
		for _, m := range matches {
			_ = os.Remove(m)
		}
	}
}

// mgFixMode sets the executable bit of a regular file to what mode says.
func (r *Repo) mgFixMode(rel string, mode filemode.FileMode) {
	if mode != filemode.Regular && mode != filemode.Executable {
		return
	}
	abs := filepath.Join(r.dir, filepath.FromSlash(rel))
	fi, err := os.Lstat(abs)
	if err != nil || !fi.Mode().IsRegular() {
		return
	}
	want := fi.Mode().Perm() &^ 0o111
	if mode == filemode.Executable {
		want |= 0o111 & (fi.Mode().Perm() >> 2) // x where r is set, as git does
	}
	if want != fi.Mode().Perm() {
		if err := os.Chmod(abs, want); err != nil {
			r.log.Warn("chmod during checkout", "path", rel, "err", err)
		}
	}
}

// mgSyncFiles fsyncs the files at rels (repo-relative), in parallel: the
// filesystem folds concurrent fsyncs into few journal commits.
func (r *Repo) mgSyncFiles(rels []string) error {
	abs := make([]string, 0, len(rels))
	for _, rel := range rels {
		abs = append(abs, filepath.Join(r.dir, filepath.FromSlash(rel)))
	}
	if len(abs) == 0 {
		return nil
	}
	if err := parallelFsync(abs); err != nil {
		return fmt.Errorf("fsync work tree: %w", err)
	}
	return nil
}

// mgPruneDirs removes now-empty directories from dir up to (not including)
// the repo root.
func (r *Repo) mgPruneDirs(dir string) {
	for dir != "." && dir != "" && dir != "/" {
		if err := os.Remove(filepath.Join(r.dir, filepath.FromSlash(dir))); err != nil {
			return // not empty (or gone): stop
		}
		dir = path.Dir(dir)
	}
}

// ---- merge-in-progress marker ----

const mergeMarkerName = "merge-in-progress"

func (r *Repo) mergeMarkerPath() string {
	return filepath.Join(r.gitDir, "memd", mergeMarkerName)
}

func (r *Repo) writeMergeMarker(old, nw plumbing.Hash) error {
	dir := filepath.Join(r.gitDir, "memd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	p := r.mergeMarkerPath()
	tmp := p + ".tmp"
	content := "old " + old.String() + "\nnew " + nw.String() + "\n"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	_, werr := f.WriteString(content)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("merge marker: %w", werr)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	if err := syncDir(dir); err != nil {
		r.log.Warn("merge marker dir fsync failed", "err", err)
	}
	return nil
}

func (r *Repo) readMergeMarker() (old, nw plumbing.Hash, ok bool, err error) {
	b, err := os.ReadFile(r.mergeMarkerPath())
	if errors.Is(err, fs.ErrNotExist) {
		return old, nw, false, nil
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
	if err := os.Remove(r.mergeMarkerPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("merge marker: %w", err)
	}
	return nil
}

// FinishInterruptedMerge completes a fast-forward or merge that a crash cut
// short after the branch ref moved (see the file comment): paths that still
// hold the old head's content get the new head's. Call it after Open and
// before the first reconcile; Sync and Fetch call it themselves. It reports
// whether there was anything to finish.
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
		}
		return false, r.removeMergeMarker()
	}
	changes, err := r.commitDiffLocked(old, nw)
	if err != nil {
		return false, fmt.Errorf("finish interrupted merge in %s: %w", r.dir, err)
	}
	r.removeTempFiles(changes)
	skipped, err := r.applyWorktreeLocked(changes)
	if err != nil {
		return false, fmt.Errorf("finish interrupted merge in %s: %w", r.dir, err)
	}
	r.noteCommitted(old, nw, nil) // the index may be anything after a crash: full refresh
	r.log.Info("finished interrupted merge", "repo", r.dir, "head", short(nw), "paths", len(changes))
	if len(skipped) > 0 {
		// Edited since: made on old's content, so committed on old and merged (remote.go).
		_, err := r.mergeEditsLocked(old, nw, skipped)
		return true, err
	}
	return true, r.removeMergeMarker()
}

// mgChangeList turns a tree diff into D's Change list (for the index
// refresh and callers' counts).
func mgChangeList(changes map[string]pathChange) []Change {
	out := make([]Change, 0, len(changes))
	for _, p := range sortedKeys(changes) {
		c := changes[p]
		op := byte('M')
		switch {
		case c.From == nil:
			op = 'A'
		case c.To == nil:
			op = 'D'
		}
		out = append(out, Change{Path: p, Op: op})
	}
	return out
}

// commitDiffLocked diffs the trees of two commits (zero = empty).
func (r *Repo) commitDiffLocked(a, b plumbing.Hash) (map[string]pathChange, error) {
	ta, err := r.commitTreeLocked(a)
	if err != nil {
		return nil, err
	}
	tb, err := r.commitTreeLocked(b)
	if err != nil {
		return nil, err
	}
	out := map[string]pathChange{}
	if err := mgDiffTrees(r.repo.Storer, ta, tb, "", out); err != nil {
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
// order of the file comment. changes is the old→new tree diff. Paths edited
// while it ran are committed on old and merged in (mergeEditsLocked), so the
// branch may end past nw: the returned moved says where, and which conflict
// copies that merge made.
func (r *Repo) moveHeadLocked(old, nw plumbing.Hash, changes map[string]pathChange, msg string) (editMerge, error) {
	skipped, err := r.moveHeadFromLocked(old, old, nw, changes, msg)
	if err != nil {
		return editMerge{Head: nw}, err
	}
	return r.mergeEditsLocked(old, nw, skipped)
}

// moveHeadFromLocked moves the branch from cur to nw and checks out changes,
// whose From sides are base's entries (base = cur except when edits made
// during a checkout are merged: then the side commit holding them). The
// marker names base, so a crash is finished against what the work tree
// held. It returns the paths the checkout found edited meanwhile; then the
// marker stays until they are merged.
func (r *Repo) moveHeadFromLocked(base, cur, nw plumbing.Hash, changes map[string]pathChange, msg string) ([]string, error) {
	if err := r.writeMergeMarker(base, nw); err != nil {
		return nil, err
	}
	if hookBeforeRefMove != nil {
		if err := hookBeforeRefMove(); err != nil {
			return nil, err
		}
	}
	if cur != nw {
		if err := r.updateRef(r.BranchRef().String(), nw, cur, msg); err != nil {
			_ = r.removeMergeMarker()
			return nil, err
		}
	}
	if hookAfterRefMove != nil {
		if err := hookAfterRefMove(); err != nil {
			return nil, err
		}
	}
	skipped, err := r.applyWorktreeLocked(changes)
	// The index refresh is scheduled only now: it takes stat data from the
	// work tree, which must already hold the new content.
	r.noteCommitted(cur, nw, mgChangeList(changes))
	if err != nil {
		// The marker stays: the next Sync or start finishes the checkout.
		return nil, fmt.Errorf("update work tree in %s: %w", r.dir, err)
	}
	if len(skipped) > 0 {
		return skipped, nil
	}
	return nil, r.removeMergeMarker()
}
