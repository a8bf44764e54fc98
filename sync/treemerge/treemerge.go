// Package treemerge is memd's three-way merge of git trees (go-git v5 merges
// fast-forward only; docs/ARCHITECTURE.md §4). Only the paths that differ are
// visited: trees are diffed recursively and identical subtrees (same hash) are
// skipped, so the cost follows the number of changed paths, not the size of
// the repo. What a path both sides changed holds after the merge is the merge
// policy's (Policy, mergepolicy.go: one rule per file kind, reading the
// formats through format/...); this package applies it to trees. It never
// touches the work tree or a ref: moving HEAD and checking the result out,
// crash-safely, is sync's (sync/gitrepo/merge.go).
package treemerge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/memorymd"
)

// ErrPathConflict is returned when a merge would need a file and a
// directory at the same path. Nothing is changed; a person must rename one.
var ErrPathConflict = errors.New("file and directory at the same path")

// Entry is a file (blob, symlink or gitlink) in a tree.
type Entry struct {
	Hash plumbing.Hash
	Mode filemode.FileMode
}

func (e *Entry) Same(o *Entry) bool {
	if e == nil || o == nil {
		return e == nil && o == nil
	}
	return e.Hash == o.Hash && e.Mode == o.Mode
}

// Change is one path's change between two trees; nil = absent.
type Change struct {
	From, To *Entry
}

// DiffTrees records in out every file path whose entry differs between
// trees a and b (zero hash = empty tree), skipping equal subtrees.
func DiffTrees(s storer.EncodedObjectStorer, a, b plumbing.Hash, prefix string, out map[string]Change) error {
	if a == b {
		return nil
	}
	ae, err := treeEntries(s, a)
	if err != nil {
		return err
	}
	be, err := treeEntries(s, b)
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
		if err := diffEntry(s, prefix+x.Name, &x, ptrIf(ok, y), out); err != nil {
			return err
		}
	}
	for _, y := range be {
		if am[y.Name] {
			continue
		}
		if err := diffEntry(s, prefix+y.Name, nil, &y, out); err != nil {
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

// diffEntry diffs one name present on at least one side. A directory on
// one side against a file (or nothing) on the other expands to its files.
func diffEntry(s storer.EncodedObjectStorer, name string, x, y *object.TreeEntry, out map[string]Change) error {
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
		if err := DiffTrees(s, xh, yh, name+"/", out); err != nil {
			return err
		}
	}
	var from, to *Entry
	if x != nil && !xDir {
		from = &Entry{x.Hash, x.Mode}
	}
	if y != nil && !yDir {
		to = &Entry{y.Hash, y.Mode}
	}
	if from != nil || to != nil {
		out[name] = Change{from, to}
	}
	return nil
}

func treeEntries(s storer.EncodedObjectStorer, h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	return t.Entries, nil
}

// PatchTree writes, through st, the tree that results from applying changes (path →
// entry, nil = delete) to the tree root, creating and dropping directories
// as needed, and returns its hash. Only the directories along changed paths
// are rewritten.
func PatchTree(st *Store, root plumbing.Hash, changes map[string]*Entry) (plumbing.Hash, error) {
	h, _, err := patchDir(st, root, "", changes)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if h.IsZero() { // everything deleted: git's empty tree
		return st.writeTree(nil)
	}
	return h, nil
}

func patchDir(st *Store, tree plumbing.Hash, prefix string, changes map[string]*Entry) (plumbing.Hash, bool, error) {
	ents, err := treeEntries(st.s, tree)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	byName := make(map[string]object.TreeEntry, len(ents)+len(changes))
	for _, e := range ents {
		byName[e.Name] = e
	}
	sub := map[string]map[string]*Entry{}
	files := map[string]*Entry{}
	for p, e := range changes {
		if dir, rest, ok := strings.Cut(p, "/"); ok {
			m := sub[dir]
			if m == nil {
				m = map[string]*Entry{}
				sub[dir] = m
			}
			m[rest] = e
		} else {
			files[p] = e
		}
	}
	// Directories first, so a file replacing an emptied directory (or a
	// directory replacing a deleted file) sees the final state.
	for _, dir := range slices.Sorted(maps.Keys(sub)) {
		var child plumbing.Hash
		if cur, ok := byName[dir]; ok {
			if cur.Mode == filemode.Dir {
				child = cur.Hash
			} else if fe, set := files[dir]; !set || fe != nil {
				// A file stays at dir: only deletions below it are
				// harmless (nothing there to delete).
				if allNil(sub[dir]) {
					continue
				}
				return plumbing.ZeroHash, false, fmt.Errorf("merge %s%s: %w", prefix, dir, ErrPathConflict)
			} else {
				delete(byName, dir) // the file is deleted in this change set
			}
		}
		h, empty, err := patchDir(st, child, prefix+dir+"/", sub[dir])
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if empty {
			delete(byName, dir)
		} else {
			byName[dir] = object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
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

func allNil(m map[string]*Entry) bool {
	for _, e := range m {
		if e != nil {
			return false
		}
	}
	return true
}

// Store reads the trees being merged and writes the merge's new objects through
// write (the caller's object writer: sync writes git's loose format and makes
// them durable once the merge is done); the blobs it wrote stay readable before
// the caller flushes them.
type Store struct {
	s     storer.EncodedObjectStorer
	write func(t plumbing.ObjectType, content []byte) (plumbing.Hash, error)
	blobs map[plumbing.Hash][]byte
}

// NewStore reads from s and writes through write.
func NewStore(s storer.EncodedObjectStorer, write func(t plumbing.ObjectType, content []byte) (plumbing.Hash, error)) *Store {
	return &Store{s: s, write: write, blobs: map[plumbing.Hash][]byte{}}
}

func (st *Store) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
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
	h, err := st.write(plumbing.TreeObject, content)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write tree: %w", err)
	}
	return h, nil
}

// WriteBlob writes data as a blob; it stays readable through st before the
// caller flushes its writer.
func (st *Store) WriteBlob(data []byte) (plumbing.Hash, error) {
	h, err := st.write(plumbing.BlobObject, data)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	st.blobs[h] = data
	return h, nil
}

func (st *Store) readBlob(e *Entry) ([]byte, error) {
	if e != nil {
		if b, ok := st.blobs[e.Hash]; ok {
			return b, nil
		}
	}
	return readBlob(st.s, e)
}

func readBlob(s storer.EncodedObjectStorer, e *Entry) ([]byte, error) {
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

// renames pairs the paths a side deleted with the paths it added holding
// the same blob (a pure rename). An add is used once. Among several
// candidates the archive mapping of the old path wins (archive/<YYYY>/<old>),
// then the first in path order. A deleted path left unpaired is paired with
// an add at its archive mapping whatever the blob (a stamped archive move).
func renames(changes map[string]Change) map[string]string {
	added := map[plumbing.Hash][]string{}
	var archivedAdds []string
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		c := changes[p]
		if c.From == nil && c.To != nil && c.To.Mode != filemode.Symlink {
			added[c.To.Hash] = append(added[c.To.Hash], p)
			if unarchive(p) != p && c.To.Mode.IsFile() {
				archivedAdds = append(archivedAdds, p)
			}
		}
	}
	if len(added) == 0 {
		return nil
	}
	used := map[string]bool{}
	out := map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		c := changes[p]
		if c.From == nil || c.To != nil {
			continue
		}
		cands := added[c.From.Hash]
		pick := ""
		for _, q := range cands {
			if !used[q] && unarchive(q) == p {
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
	// An archive move that also stamped the file (memhtml's archive, and memd's: the status
	// and date metas change in the move commit) is a rename too: the add at the deleted
	// path's archive mapping.
	for _, p := range slices.Sorted(maps.Keys(changes)) {
		c := changes[p]
		if _, paired := out[p]; paired || c.From == nil || c.To != nil {
			continue
		}
		for _, q := range archivedAdds {
			if !used[q] && unarchive(q) == p {
				used[q] = true
				out[p] = q
				break
			}
		}
	}
	return out
}

// unarchive strips one archive/<YYYY>/ prefix; p itself when there is none.
func unarchive(p string) string {
	if orig, _, ok := memd.UnarchivePath(p); ok {
		return orig
	}
	return p
}

// Result is what Merge produced.
type Result struct {
	Tree      plumbing.Hash
	Conflicts []string // conflict copies written
}

// Merge merges ours' and theirs' trees against base: start from theirs,
// replay ours' changes, per-path policy for paths both touched. The new
// objects go through st; log gets a line for a structured merge refused or
// over its cap.
func Merge(st *Store, base, ours, theirs plumbing.Hash, pol Policy, log *slog.Logger) (res Result, err error) {
	m, err := newMerger(st, base, ours, theirs, pol, log)
	if err != nil {
		return Result{}, err
	}
	if err := m.carryRenames(); err != nil {
		return res, err
	}
	for _, p := range slices.Sorted(maps.Keys(m.dO)) {
		if err := m.mergePath(p); err != nil {
			return res, err
		}
	}
	if err := m.appendLosers(); err != nil {
		return res, err
	}
	moved, err := resolveFileDir(m.s, theirs, m.set, m.pol)
	if err != nil {
		return res, err
	}
	conflicts := append(m.conflicts, moved...)
	sort.Strings(conflicts)
	tree, err := PatchTree(st, theirs, m.set)
	if err != nil {
		return res, err
	}
	res.Tree = tree
	res.Conflicts = conflicts
	return res, nil
}

// merger is one Merge's state: both sides' changes against base and the
// changes it applies to theirs' tree.
type merger struct {
	st        *Store
	s         storer.EncodedObjectStorer
	theirs    plumbing.Hash
	pol       Policy
	log       *slog.Logger
	dO, dT    map[string]Change
	set       map[string]*Entry   // changes applied to theirs' tree
	fixed     map[string]bool     // paths decided by a rename rule
	conflicts []string            // conflict copies written
	losers    map[string][][]byte // conflicts file → ledger loser lines
	filtered  map[string]string   // conflicts file → the filtered ledger whose losers it takes
}

// newMerger diffs both sides against base.
func newMerger(st *Store, base, ours, theirs plumbing.Hash, pol Policy, log *slog.Logger) (*merger, error) {
	s := st.s
	dO, dT := map[string]Change{}, map[string]Change{}
	if err := DiffTrees(s, base, ours, "", dO); err != nil {
		return nil, fmt.Errorf("diff base..ours: %w", err)
	}
	if err := DiffTrees(s, base, theirs, "", dT); err != nil {
		return nil, fmt.Errorf("diff base..theirs: %w", err)
	}
	pol.MemoryMDAt = memoryMDReader(st, ours, theirs, pol.Filter)
	return &merger{
		st: st, s: s, theirs: theirs, pol: pol, log: log,
		dO: dO, dT: dT,
		set:    map[string]*Entry{},
		fixed:  map[string]bool{},
		losers: map[string][][]byte{}, filtered: map[string]string{},
	}, nil
}

// theirsAt reads the entry theirs' tree holds at p.
func (m *merger) theirsAt(p string) *Entry {
	if c, ok := m.dT[p]; ok {
		return c.To
	}
	if c, ok := m.dO[p]; ok {
		return c.From // unchanged by theirs: base's entry
	}
	e, _ := TreeFile(m.s, m.theirs, p)
	return e
}

// carryRenames moves one side's change to a path the other side renamed,
// and fixes both paths so the general rules leave them alone.
func (m *merger) carryRenames() error {
	rO, rT := renames(m.dO), renames(m.dT)
	// Renames by ours of a path theirs changed: theirs' change lands at the
	// new path, nothing at the old one.
	for _, old := range slices.Sorted(maps.Keys(rO)) {
		nw := rO[old]
		t, ok := m.dT[old]
		if !ok || t.To == nil {
			continue // theirs did not change (or also deleted) it
		}
		if _, clash := m.dT[nw]; clash {
			continue // theirs also wrote the new path: general rules decide
		}
		e, err := m.restamped(m.dO[old].From, m.dO[nw].To, t.To)
		if err != nil {
			return err
		}
		m.set[nw] = e
		m.set[old] = nil
		m.fixed[nw], m.fixed[old] = true, true
	}
	// Renames by theirs of a path ours changed: ours' change lands at the
	// new path.
	for _, old := range slices.Sorted(maps.Keys(rT)) {
		nw := rT[old]
		o, ok := m.dO[old]
		if !ok || o.To == nil {
			continue
		}
		if _, clash := m.dO[nw]; clash {
			continue
		}
		e, err := m.restamped(m.dT[old].From, m.dT[nw].To, o.To)
		if err != nil {
			return err
		}
		m.set[nw] = e
		m.fixed[nw], m.fixed[old] = true, true // old stays deleted (theirs' tree)
	}
	return nil
}

// restamped is changed, moved to where a rename took from: as it is after a pure rename,
// and with the archive stamps the move added (memfile.CarryArchiveStamps) after a stamped one,
// so the memory still reads as archived.
func (m *merger) restamped(from, moved, changed *Entry) (*Entry, error) {
	if from == nil || moved == nil || from.Hash == moved.Hash || !changed.Mode.IsFile() {
		return changed, nil
	}
	mb, err := m.st.readBlob(moved)
	if err != nil {
		return nil, err
	}
	cb, err := m.st.readBlob(changed)
	if err != nil {
		return nil, err
	}
	out := memfile.CarryArchiveStamps(mb, cb)
	if bytes.Equal(out, cb) {
		return changed, nil
	}
	h, err := m.st.WriteBlob(out)
	if err != nil {
		return nil, err
	}
	return &Entry{Hash: h, Mode: changed.Mode}, nil
}

// mergePath replays ours' change of p onto theirs' tree.
func (m *merger) mergePath(p string) error {
	if m.fixed[p] {
		return nil
	}
	o := m.dO[p]
	t, both := m.dT[p]
	if !both {
		m.set[p] = o.To // only ours touched it
		return nil
	}
	if o.To.Same(t.To) {
		return nil // same result on both sides
	}
	switch {
	case o.To == nil:
		return nil // ours deleted, theirs changed: the change stays
	case t.To == nil:
		m.set[p] = o.To // theirs deleted, ours changed: the change stays
		return nil
	case gitlink(o.From) || gitlink(o.To) || gitlink(t.To):
		// A submodule's commit id is no blob of this repo: never read. Theirs
		// stays at p as is, ours goes to a conflict copy.
		m.conflictCopy(p, o.To)
		return nil
	}
	if err := m.mergeBoth(p, o, t); err != nil {
		return fmt.Errorf("merge %s: %w", p, err)
	}
	return nil
}

// gitlink: e is a submodule's commit (mode 160000), carried as is, never read.
func gitlink(e *Entry) bool { return e != nil && e.Mode == filemode.Submodule }

// conflictCopy puts ours (e) beside theirs at p under a conflict copy name no
// path of the merge holds.
func (m *merger) conflictCopy(p string, e *Entry) {
	pol := m.pol
	cp := memd.ConflictCopyPath(p, pol.Host, pol.Now)
	for i := 2; holds(m.s, m.theirs, m.dO, m.set, cp); i++ {
		cp = memd.ConflictCopyPath(p, fmt.Sprintf("%s-%d", pol.Host, i), pol.Now)
	}
	m.set[cp] = e
	m.conflicts = append(m.conflicts, cp)
}

// mergeBoth merges p, which both sides changed differently, by the policy
// for its kind; a kind with no merge gets a conflict copy of ours.
func (m *merger) mergeBoth(p string, o, t Change) error {
	bb, err := m.st.readBlob(o.From)
	if err != nil {
		return err
	}
	ob, err := m.st.readBlob(o.To)
	if err != nil {
		return err
	}
	tb, err := m.st.readBlob(t.To)
	if err != nil {
		return err
	}
	pol := m.pol
	regular := o.To.Mode.IsFile() && t.To.Mode.IsFile() && o.To.Mode != filemode.Symlink && t.To.Mode != filemode.Symlink
	filtered := false
	if regular && pol.Filter != nil {
		var ferr error
		if bb, ob, tb, filtered, ferr = plainAll(pol.Filter, p, bb, ob, tb); ferr != nil {
			m.log.Warn("cannot read a filtered path's text to merge it, keeping a conflict copy", "path", p, "err", ferr)
			m.conflictCopy(p, o.To)
			return nil
		}
	}
	kind := KindOther
	if regular {
		kind = pol.KindOf(p, bb, ob, tb)
	}
	var merged []byte
	if kind.ProjectLayout() {
		mm, note, err := pol.MergeProjectLayout(kind, p, bb, ob, tb)
		switch {
		case err != nil:
			m.log.Warn("structured merge refused, keeping a conflict copy", "err", err)
			kind = KindOther
		case note != "":
			m.log.Warn(note)
		}
		merged = mm
	}
	switch kind {
	case KindProjectMD, KindTopicFile, KindNewer:
		// merged above
	case KindDerived:
		return nil // theirs; the next sleep renders it again
	case KindLedger:
		var lost [][]byte
		merged, lost = MergeLedger(bb, ob, tb)
		if len(lost) > 0 {
			cp := ConflictsPathFor(p)
			m.losers[cp] = append(m.losers[cp], lost...)
		}
	case KindLineUnion:
		merged = MergeLineUnion(bb, ob, tb)
	case KindAccessState:
		merged = MergeAccessState(ob, tb) // a maximum needs no base
	case KindIndexMD:
		merged = memorymd.MergeIndex(bb, ob, tb)
	default:
		if regular && memd.IsArchived(p) && memfile.SameButArchiveStamps(ob, tb) {
			return nil // one memory archived twice (two machines, two instants): theirs
		}
		m.conflictCopy(p, o.To)
		return nil
	}
	if filtered {
		if merged, err = pol.Filter.Blob(p, merged); err != nil {
			m.log.Warn("cannot store a filtered path's merge, keeping a conflict copy", "path", p, "err", err)
			m.conflictCopy(p, o.To)
			return nil
		}
		m.filtered[ConflictsPathFor(p)] = p // its lost lines go through p's filter
	}
	h, err := m.st.WriteBlob(merged)
	if err != nil {
		return err
	}
	m.set[p] = &Entry{Hash: h, Mode: t.To.Mode}
	return nil
}

// plainAll is the text of the three versions of a filtered path (ok false: not filtered).
func plainAll(f BlobFilter, p string, bb, ob, tb []byte) (b, o, t []byte, ok bool, err error) {
	var okB, okO, okT bool
	if bb != nil {
		if b, okB, err = f.Plain(p, bb); err != nil {
			return
		}
	}
	if o, okO, err = f.Plain(p, ob); err != nil {
		return
	}
	if t, okT, err = f.Plain(p, tb); err != nil {
		return
	}
	return b, o, t, okB || okO || okT, nil
}

// appendFiltered is AppendMissingLines on the text of the losers file of a filtered
// ledger, stored through the ledger's filter (p, the ledger's path): the lost lines of an
// encrypted ledger stay encrypted even where the attributes do not name its losers file.
func appendFiltered(f BlobFilter, p string, blob []byte, lines [][]byte) ([]byte, error) {
	text := blob
	if blob != nil {
		var err error
		if text, _, err = f.Plain(p, blob); err != nil {
			return nil, err
		}
	}
	return f.Blob(p, AppendMissingLines(text, lines))
}

// appendLosers appends the ledger lines that lost a merge to their
// conflicts files, so no record is lost.
func (m *merger) appendLosers() error {
	for _, cp := range slices.Sorted(maps.Keys(m.losers)) {
		cur, ok := m.set[cp]
		if !ok {
			cur = m.theirsAt(cp)
		}
		if gitlink(cur) {
			return fmt.Errorf("merge %s: a submodule is where the ledger's lost lines go", cp)
		}
		data, err := m.st.readBlob(cur)
		if err != nil {
			return fmt.Errorf("merge %s: %w", cp, err)
		}
		out := AppendMissingLines(data, m.losers[cp])
		if via, ok := m.filtered[cp]; ok && m.pol.Filter != nil {
			if out, err = appendFiltered(m.pol.Filter, via, data, m.losers[cp]); err != nil {
				return fmt.Errorf("merge %s: %w", cp, err)
			}
		}
		h, err := m.st.WriteBlob(out)
		if err != nil {
			return err
		}
		m.set[cp] = &Entry{Hash: h, Mode: filemode.Regular}
	}
	return nil
}

// exists says whether the merged tree would hold p (a conflict copy name
// must not overwrite anything).
func holds(s storer.EncodedObjectStorer, theirs plumbing.Hash, dO map[string]Change, set map[string]*Entry, p string) bool {
	if e, ok := set[p]; ok {
		return e != nil
	}
	if c, ok := dO[p]; ok && c.To != nil {
		return true
	}
	e, _ := TreeFile(s, theirs, p)
	return e != nil
}

// TreeFile looks up one file path in a tree (nil when absent or a
// directory).
func TreeFile(s storer.EncodedObjectStorer, tree plumbing.Hash, p string) (*Entry, error) {
	e, err := treeLookup(s, tree, p)
	if err != nil || e == nil || e.Mode == filemode.Dir {
		return nil, err
	}
	return &Entry{e.Hash, e.Mode}, nil
}

// treeLookup finds the entry (file or directory) at p; nil when absent.
func treeLookup(s storer.EncodedObjectStorer, tree plumbing.Hash, p string) (*object.TreeEntry, error) {
	h := tree
	for {
		ents, err := treeEntries(s, h)
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

// resolveFileDir handles ours' files that would collide with theirs'
// tree as file against directory (one side made areas/x a file, the other
// a directory): theirs stays, ours' file moves to a conflict copy name
// (for a file under a path theirs holds as a file, the whole directory
// part is renamed: areas/x.conflict-…/y.html). Nothing is dropped and the
// merge does not get stuck on ErrPathConflict.
func resolveFileDir(s storer.EncodedObjectStorer, theirs plumbing.Hash, set map[string]*Entry, pol Policy) ([]string, error) {
	var moved []string
	for _, p := range slices.Sorted(maps.Keys(set)) {
		e := set[p]
		if e == nil {
			continue
		}
		target := ""
		te, err := treeLookup(s, theirs, p)
		if err != nil {
			return nil, err
		}
		if te != nil && te.Mode == filemode.Dir {
			gone, err := allDeletedUnder(s, te.Hash, set, p)
			if err != nil {
				return nil, err
			}
			if !gone {
				target = memd.ConflictCopyPath(p, pol.Host, pol.Now)
			}
		} else {
			for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
				anc := p[:i]
				if del, ok := set[anc]; ok && del == nil {
					continue // theirs' file there is deleted by ours
				}
				ae, err := treeLookup(s, theirs, anc)
				if err != nil {
					return nil, err
				}
				if ae != nil && ae.Mode != filemode.Dir {
					target = memd.ConflictCopyPath(anc, pol.Host, pol.Now) + p[i:]
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

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// allDeletedUnder: does set delete every file of theirs' directory dir
// (ours replaced the directory by a file)? Then the file is no collision.
func allDeletedUnder(s storer.EncodedObjectStorer, dirHash plumbing.Hash, set map[string]*Entry, dir string) (bool, error) {
	files := map[string]Change{}
	if err := DiffTrees(s, dirHash, plumbing.ZeroHash, dir+"/", files); err != nil {
		return false, err
	}
	for f := range files {
		if e, ok := set[f]; !ok || e != nil {
			return false, nil
		}
	}
	return true, nil
}

// memoryMDReader returns MemoryMDAt for a merge of the trees ours and
// theirs: the MEMORY.md at a path in each, read once.
func memoryMDReader(st *Store, ours, theirs plumbing.Hash, f BlobFilter) func(string) [][]byte {
	cache := map[string][][]byte{}
	return func(md string) [][]byte {
		if v, ok := cache[md]; ok {
			return v
		}
		var out [][]byte
		for _, tree := range []plumbing.Hash{ours, theirs} {
			e, err := TreeFile(st.s, tree, md)
			if err != nil || e == nil {
				continue
			}
			if b, err := st.readBlob(e); err == nil {
				if f != nil { // a filtered MEMORY.md is read as its text
					if text, ok, err := f.Plain(md, b); err == nil && ok {
						b = text
					}
				}
				out = append(out, b)
			}
		}
		cache[md] = out
		return out
	}
}
