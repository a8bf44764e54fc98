package sync

// Three-way merge of trees, done by memd itself (go-git v5 merges
// fast-forward only). Only the paths that differ are visited: trees are
// diffed recursively and identical subtrees (same hash) are skipped, so the
// cost follows the number of changed paths, not the size of the repo.
//
// Crash safety of a fast-forward or merge (the ref moves before the work
// tree follows it):
//
//  1. every object (blobs, trees, the merge commit) is written first, and
//     the remote's tree has been vetted (treecheck.go);
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
	"io"
	"io/fs"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
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
	pol.memoryMDAt = memoryMDReader(st, ours, theirs)

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
		if kind.projectLayout() {
			m, note, err := pol.MergeProjectLayout(kind, p, bb, ob, tb)
			switch {
			case err != nil:
				r.log.Warn("structured merge refused, keeping a conflict copy", "err", err)
				kind = KindOther
			case note != "":
				r.log.Warn(note)
			}
			merged = m
		}
		switch kind {
		case KindProjectMD, KindTopicFile, KindNewer:
			// merged above
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

// dirtyPaths lists the paths of changes whose work tree content is neither
// the old side's (From) nor already the new side's (To): uncommitted edits
// that moving HEAD would overwrite. Ignored paths are never dirty (they are
// never committed, so the remote's version wins, as in git), nor is memd's
// lock file (the checkout leaves it alone).
func (r *Repo) dirtyPaths(changes map[string]pathChange) ([]string, error) {
	t, err := r.openWorkTree()
	if err != nil {
		return nil, err
	}
	co := &checkout{r: r, t: t}
	defer t.Close()
	var dirty []string
	for _, p := range sortedKeys(changes) {
		if isLockFile(p) || r.ignoredPath(p) {
			continue
		}
		c := changes[p]
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
		}
		dirty = append(dirty, p)
	}
	return dirty, nil
}

// mgDirDrains reports whether every file under the work tree directory dir
// is a tracked file the change set deletes and still holds its old content.
// Nothing is followed: a symlink inside is a file like any other.
func (r *Repo) mgDirDrains(t *safefs.Tree, dir string, changes map[string]pathChange) (bool, error) {
	co := &checkout{r: r, t: t}
	var walk func(d string, depth int) (bool, error)
	walk = func(d string, depth int) (bool, error) {
		if depth > MaxTreeDepth {
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
	mergeMarkerDir  = "memd"
	mergeMarkerName = "merge-in-progress"
	mergeMarkerRel  = mergeMarkerDir + "/" + mergeMarkerName
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
	if err := t.MkdirAll(mergeMarkerDir, 0o700); err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	content := "old " + old.String() + "\nnew " + nw.String() + "\n"
	if err := t.WriteFileAtomic(mergeMarkerRel, []byte(content), 0o600); err != nil {
		return fmt.Errorf("merge marker: %w", err)
	}
	if err := t.SyncDir(mergeMarkerDir); err != nil {
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
	skipped, err := r.checkoutLenientLocked(old, nw, changes)
	if err != nil {
		if uerr := r.undoInterruptedLocked(old, nw, changes); uerr != nil {
			return false, fmt.Errorf("finish interrupted merge in %s: %w (undo failed too: %v)", r.dir, err, uerr)
		}
		r.log.Warn("could not finish an interrupted merge; undone, the next sync merges again", "repo", r.dir, "head", short(old), "err", err)
		return true, r.removeMergeMarker()
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

// checkoutLenientLocked brings the work tree from a to b along changes,
// leaving paths edited since alone (returned). The tree of b is vetted again
// (the marker names it).
func (r *Repo) checkoutLenientLocked(a, b plumbing.Hash, changes map[string]pathChange) ([]string, error) {
	ta, err := r.commitTreeLocked(a)
	if err != nil {
		return nil, err
	}
	tb, err := r.commitTreeLocked(b)
	if err != nil {
		return nil, err
	}
	if err := checkTreeLocked(r.repo.Storer, b, tb, ta); err != nil {
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
func (r *Repo) undoInterruptedLocked(old, nw plumbing.Hash, changes map[string]pathChange) error {
	if err := r.updateRef(r.BranchRef().String(), old, nw, "memd: undo interrupted checkout"); err != nil {
		return err
	}
	back := make(map[string]pathChange, len(changes))
	for p, c := range changes {
		back[p] = pathChange{From: c.To, To: c.From}
	}
	r.removeTempFiles(back)
	co, err := r.prepareCheckout(back, false)
	if err == nil {
		_, err = co.apply()
	}
	r.noteCommitted(nw, old, nil)
	return err
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
// order of the file comment and checkout.go. changes is the old→new tree
// diff. Every new file is written and fsynced before the ref moves; any
// failure up to the ref move leaves HEAD and the work tree as they were (a
// *WorktreeChangedError, Moved false, when a path was edited meanwhile: the
// caller commits it on old and integrates again). Paths edited after the
// ref moved are committed on old and merged in (edits.go), so the branch
// may end past nw: the returned editMerge says where, and which conflict
// copies that merge made.
func (r *Repo) moveHeadLocked(old, nw plumbing.Hash, changes map[string]pathChange, msg string) (editMerge, error) {
	return r.moveHeadPreparedLocked(old, nw, changes, msg, nil)
}

// moveHeadPreparedLocked is moveHeadLocked with the checkout's step 1 already
// done (co, from prepareCheckout strict on the same changes; nil = do it
// now): a sync prepares before it takes the writer lock, so the lock covers
// the verify, the ref move and the renames only.
func (r *Repo) moveHeadPreparedLocked(old, nw plumbing.Hash, changes map[string]pathChange, msg string, co *checkout) (editMerge, error) {
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
func (r *Repo) moveHeadFromLocked(base, cur, nw plumbing.Hash, changes map[string]pathChange, msg string, co *checkout) ([]string, error) {
	t0 := time.Now()
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
		var err error
		if co, err = r.prepareCheckout(changes, true); err != nil {
			if marked {
				_ = r.removeMergeMarker()
			}
			return nil, err
		}
		co.marked = marked
	} else if changed := co.changedSince(); len(changed) > 0 {
		// Prepared before the lock: anything edited since is a writer's.
		co.abort()
		if co.marked {
			_ = r.removeMergeMarker() // it named the head we stay at
		}
		return nil, &WorktreeChangedError{Paths: changed}
	}
	t1 := time.Now()
	if !co.marked {
		if err := r.writeMergeMarker(base, nw); err != nil {
			co.abort()
			return nil, err
		}
	}
	t2 := time.Now()
	if hookBeforeRefMove != nil {
		if err := hookBeforeRefMove(); err != nil {
			return nil, err // as a crash would: temps and marker stay
		}
	}
	if cur != nw {
		if err := r.updateRef(r.BranchRef().String(), nw, cur, msg); err != nil {
			co.abort()
			_ = r.removeMergeMarker()
			return nil, err
		}
	}
	if hookAfterRefMove != nil {
		if err := hookAfterRefMove(); err != nil {
			return nil, err
		}
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
	// The index refresh is scheduled only now: it takes stat data from the
	// work tree, which must already hold the new content.
	r.noteCommitted(cur, nw, mgChangeList(changes))
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
