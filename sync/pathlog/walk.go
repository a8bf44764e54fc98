package pathlog

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/memd-dev/memd"
)

// Actions (Entry.Action).
const (
	ActAdded      = "added"
	ActModified   = "modified"
	ActDeleted    = "deleted"
	ActRenamed    = "renamed"
	ActArchived   = "archived"
	ActUnarchived = "unarchived"
)

// Entry is one commit that changed the path. Path is its name after the commit (for a
// deletion: the name it had), From the name before a rename or archive move; Blob the
// version after the commit (zero when deleted), Before the one it replaced (zero when added).
type Entry struct {
	Commit, Parent plumbing.Hash // Parent: the first parent, zero for a root commit
	At             time.Time
	Action         string
	Path, From     string
	Blob, Before   plumbing.Hash
	Message        string
}

// Walk is one walk down the first-parent chain from Head, as `git log --first-parent
// --follow -- Path` walks it.
type Walk struct {
	Source *Source
	Head   plumbing.Hash
	Path   string
	// Visit, when set, sees each commit before its step with the name the path has there;
	// true ends the walk at that commit.
	Visit func(id plumbing.Hash, when time.Time, name string) bool
	// Entry gets each entry, newest first; false ends the walk.
	Entry func(Entry) bool
	// Progress, when set, is called every progressEvery commits with the count so far.
	Progress func(commits int)

	keys    []bloomKey // keyPath's and its directories' changed-path hashes (none: not ASCII)
	keyPath string
}

const progressEvery = 10_000

// errStop ends a walk early without an error.
var errStop = errors.New("stop")

// way is the path's way down one commit's tree: the ids of the trees on the way (trees[k]
// holds parts[k]) and the file at its end (ok false: no file there).
type way struct {
	trees []plumbing.Hash
	end   entry
}

// Run walks until the chain ends or a callback stops it.
func (w *Walk) Run() error {
	if w.Head.IsZero() {
		return nil
	}
	c, err := w.Source.commit(w.Head)
	if err != nil {
		return err
	}
	cur := memd.NormalizePath(w.Path)
	wc, err := w.resolve(c.tree, cur, nil)
	if err != nil {
		return err
	}
	var ahead *prefetcher // prefetch.go
	defer func() { ahead.close() }()
	for n := 1; ; n++ {
		if w.Visit != nil && w.Visit(c.id, c.when, cur) {
			return nil
		}
		if w.Progress != nil && n%progressEvery == 0 {
			w.Progress(n)
		}
		if n == prefetchAfter && c.pos < 0 && len(c.parents) > 0 {
			ahead = w.Source.startPrefetch(c.parents[0])
		}
		p, err := w.parent(c, &ahead)
		if err != nil {
			return err
		}
		next, wp, err := w.step(c, p, cur, wc)
		if errors.Is(err, errStop) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s at %s: %w", cur, c.id.String()[:12], err)
		}
		if p == nil {
			return nil
		}
		c, cur, wc = p, next, wp
	}
}

// parent is c's first parent: read ahead when *ahead has it, else by the Source (and the
// read-ahead, ended or off the chain, is stopped).
func (w *Walk) parent(c *commit, ahead **prefetcher) (*commit, error) {
	if *ahead != nil && len(c.parents) > 0 {
		if p, ok := (*ahead).next(c.parents[0]); ok {
			return p, nil
		}
		(*ahead).close()
		*ahead = nil
	}
	return w.Source.firstParent(c)
}

// step compares cur in c (its way wc) with the parent p: it sends the entry c makes, and
// answers the name to look for in p and its way there.
func (w *Walk) step(c, p *commit, cur string, wc way) (string, way, error) {
	var wp way
	if p != nil {
		if w.unchanged(c, cur) {
			return cur, way{end: wc.end}, nil // the trees on the way are not known: not read
		}
		var err error
		if wp, err = w.resolve(p.tree, cur, &wc); err != nil {
			return cur, wp, err
		}
	}
	now, was := wc.end, wp.end
	if now.ok == was.ok && (!now.ok || now.id == was.id) {
		return cur, wp, nil
	}
	msg, err := w.Source.message(c)
	if err != nil {
		return cur, wp, err
	}
	e := Entry{Commit: c.id, At: c.when, Path: cur, Message: msg}
	if p != nil {
		e.Parent = p.id
	}
	next := cur
	switch {
	case now.ok && was.ok:
		e.Action, e.Blob, e.Before = ActModified, now.id, was.id
	case now.ok:
		e.Action, e.Blob = ActAdded, now.id
		if p != nil {
			from, fromID, err := w.movedFrom(p, c, cur, now.id)
			if err != nil {
				return cur, wp, err
			}
			if from != "" {
				e.Action, e.From, e.Before = moveAction(from, cur), from, fromID
				next = from
				if wp, err = w.resolve(p.tree, from, nil); err != nil {
					return cur, wp, err
				}
			}
		}
	default:
		e.Action, e.Before = ActDeleted, was.id
	}
	if w.Entry != nil && !w.Entry(e) {
		return next, wp, errStop
	}
	return next, wp, nil
}

// unchanged says that c's changed-path filter rules out cur: c left it as its first
// parent had it. False when there is no filter to ask.
func (w *Walk) unchanged(c *commit, cur string) bool {
	g := w.Source.graph
	if c.pos < 0 || g == nil || g.bidx == nil {
		w.Source.unfiltered++
		return false
	}
	if w.keyPath != cur {
		w.keys, w.keyPath = bloomKeys(cur), cur
	}
	f := g.filter(uint32(c.pos))
	if len(f) == 0 {
		return false
	}
	// The filter holds every directory above a changed path too: any of cur's names it
	// rules out rules cur out, and all of them being false positives together is rare.
	for _, k := range w.keys {
		if !k.mayHold(f, g.hashes) {
			return true
		}
	}
	return false
}

func moveAction(from, to string) string {
	switch {
	case memd.IsArchived(to) && !memd.IsArchived(from):
		return ActArchived
	case memd.IsArchived(from) && !memd.IsArchived(to):
		return ActUnarchived
	}
	return ActRenamed
}

// resolve is p's way down the tree root. like is the way of the same p in a commit whose
// trees are often the same: from the first tree id they share, the rest is like's, unread.
func (w *Walk) resolve(root plumbing.Hash, p string, like *way) (way, error) {
	parts := strings.Split(p, "/")
	wy := way{trees: make([]plumbing.Hash, 0, len(parts))}
	id := root
	for k, name := range parts {
		if like != nil && k < len(like.trees) && like.trees[k] == id {
			wy.trees = append(wy.trees, like.trees[k:]...)
			wy.end = like.end
			return wy, nil
		}
		wy.trees = append(wy.trees, id)
		e, err := w.lookupIn(id, name)
		if err != nil || !e.ok {
			return wy, err
		}
		if k == len(parts)-1 {
			if isFile(e.mode) {
				wy.end = e
			}
			return wy, nil
		}
		if e.mode != filemode.Dir {
			return wy, nil
		}
		id = e.id
	}
	return wy, nil
}

func isFile(m filemode.FileMode) bool { return m.IsFile() }

func (w *Walk) lookupIn(tree plumbing.Hash, name string) (entry, error) {
	b, err := readTree(w.Source.store, tree)
	if err != nil {
		return entry{}, err
	}
	return lookup(b, name)
}

func readTree(st Store, h plumbing.Hash) ([]byte, error) {
	t, b, err := st.Read(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.TreeObject {
		return nil, fmt.Errorf("%s is a %s, not a tree: %w", h, t, ErrBadObject)
	}
	return b, nil
}

// movedFrom is the name cur had in p when c moved it there: its archive twin first (memd's
// own moves, which may also edit the file), else a path c deleted whose blob is cur's (an
// exact rename, git's 100% similarity). "" when cur is new.
func (w *Walk) movedFrom(p, c *commit, cur string, blob plumbing.Hash) (string, plumbing.Hash, error) {
	var twins []string
	if orig, _, ok := memd.UnarchivePath(cur); ok {
		twins = append(twins, orig)
	} else {
		// Unarchived: sleep archives by the year of the move, so the twin is this year's or,
		// across a new year, last year's.
		y := c.when.UTC().Year()
		twins = append(twins, memd.ArchivePath(cur, y), memd.ArchivePath(cur, y-1))
	}
	for _, tw := range twins {
		was, err := w.resolve(p.tree, tw, nil)
		if err != nil {
			return "", plumbing.ZeroHash, err
		}
		if !was.end.ok {
			continue
		}
		still, err := w.resolve(c.tree, tw, nil)
		if err != nil {
			return "", plumbing.ZeroHash, err
		}
		if !still.end.ok {
			return tw, was.end.id, nil
		}
	}
	from, err := w.deletedWith(p.tree, c.tree, "", blob)
	if err != nil || from == "" {
		return "", plumbing.ZeroHash, err
	}
	return from, blob, nil
}

// deletedWith is the first path (in tree order) holding the file blob in the tree was and
// not in now (now zero: an empty tree), descending only into subtrees whose ids differ.
func (w *Walk) deletedWith(was, now plumbing.Hash, prefix string, blob plumbing.Hash) (string, error) {
	if was == now {
		return "", nil
	}
	wb, err := readTree(w.Source.store, was)
	if err != nil {
		return "", err
	}
	var nb []byte
	if !now.IsZero() {
		if nb, err = readTree(w.Source.store, now); err != nil {
			return "", err
		}
	}
	found := ""
	err = eachEntry(wb, func(name string, e entry) error {
		n, err := lookup(nb, name)
		if err != nil {
			return err
		}
		if n.ok && n.id == e.id && n.mode == e.mode {
			return nil
		}
		if e.mode == filemode.Dir {
			sub := plumbing.ZeroHash
			if n.ok && n.mode == filemode.Dir {
				sub = n.id
			}
			if found, err = w.deletedWith(e.id, sub, prefix+name+"/", blob); err != nil || found != "" {
				return errOr(err)
			}
			return nil
		}
		if isFile(e.mode) && e.id == blob && !(n.ok && isFile(n.mode)) {
			found = prefix + name
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return found, err
}

func errOr(err error) error {
	if err != nil {
		return err
	}
	return errStop
}

// ErrNotFound: ReadFile's path is no file in the commit.
var ErrNotFound = errors.New("no such file in the commit")

// ReadFile is the file p in commit id: its mode and content.
func (s *Source) ReadFile(id plumbing.Hash, p string) (filemode.FileMode, []byte, error) {
	c, err := s.commit(id)
	if err != nil {
		return 0, nil, err
	}
	w := &Walk{Source: s}
	wy, err := w.resolve(c.tree, memd.NormalizePath(p), nil)
	if err != nil {
		return 0, nil, err
	}
	if !wy.end.ok {
		return 0, nil, fmt.Errorf("%s in %s: %w", p, id.String()[:12], ErrNotFound)
	}
	t, b, err := s.store.Read(wy.end.id)
	if err == nil && t != plumbing.BlobObject {
		err = fmt.Errorf("%s is a %s, not a blob: %w", wy.end.id, t, ErrBadObject)
	}
	return wy.end.mode, b, err
}

// CommitAt is the newest commit on the first-parent chain from head whose committer time
// is at or before t (zero when none is): commits only, no trees.
func (s *Source) CommitAt(head plumbing.Hash, t time.Time) (plumbing.Hash, time.Time, error) {
	for h := head; !h.IsZero(); {
		c, err := s.commit(h)
		if err != nil {
			return plumbing.ZeroHash, time.Time{}, err
		}
		if !c.when.After(t) {
			return c.id, c.when, nil
		}
		if len(c.parents) == 0 {
			break
		}
		h = c.parents[0]
	}
	return plumbing.ZeroHash, time.Time{}, nil
}
