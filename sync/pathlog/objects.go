package pathlog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/memd-dev/memd/sync/gitstore"
)

// ErrBadObject: a commit or tree object the walk could not parse.
var ErrBadObject = errors.New("malformed object")

// Store reads whole objects by id.
type Store interface {
	Read(h plumbing.Hash) (plumbing.ObjectType, []byte, error)
}

// Source is what walks read: a read-only object store on a .git directory
// (gitstore.RawReader: packs read in place, delta bases kept up to 64 MiB) and git's
// commit-graph when there is one, apart from the owner's go-git handle, so a walk never
// waits for Repo.mu nor holds it. One walk at a time uses a Source.
type Source struct {
	store  Store
	graph  *graph
	gitDir string
	close  func() error
	// unfiltered counts the commits a walk stepped through without a changed-path filter
	// (no graph, one without filters, or one written before them): KeepGraph.
	unfiltered int
	graphSteps int64 // first parents taken from the graph, against a damaged file's cycle
	// newStore opens a second read-only store for a walk's read-ahead (prefetch.go); nil:
	// no read-ahead.
	newStore func() (Store, func())
}

// Open is a Source on the .git directory gitDir.
func Open(gitDir string) *Source {
	s := gitstore.NewStorage(gitDir, cache.NewObjectLRU(cache.MiByte), 1<<20)
	rr := s.NewRawReader(64 << 20)
	g := openGraph(gitDir)
	second := func() (Store, func()) {
		s2 := gitstore.NewStorage(gitDir, cache.NewObjectLRU(cache.MiByte), 1<<20)
		r2 := s2.NewRawReader(8 << 20) // commits are rarely deltas: a small base cache
		return r2, func() { r2.Close(); s2.Close() }
	}
	return &Source{store: rr, graph: g, gitDir: gitDir, newStore: second, close: func() error {
		if g != nil && g.release != nil { // once: a second unmap could hit a newer mapping
			g.release()
			g.release = nil
		}
		rr.Close()
		return s.Close()
	}}
}

// Close releases the store's files and mappings.
func (s *Source) Close() error { return s.close() }

// commit reads h from the commit-graph when it holds h, else from its object.
func (s *Source) commit(h plumbing.Hash) (*commit, error) {
	if pos, ok := s.graph.find(h); ok {
		if c, ok := s.graph.commit(pos); ok {
			return c, nil
		}
	}
	return readCommit(s.store, h)
}

// graphAfter is how many commits a walk steps through without a changed-path filter
// before KeepGraph has git write the commit-graph with them: about a second of walking,
// where git writes the graph and filters of 200,000 commits in about 30 s of background
// work once, and every later walk skips the commits that left its path alone unread.
const graphAfter = 20_000

// KeepGraph starts `git commit-graph write --reachable --changed-paths` in the background
// when the walks of this Source stepped through more than graphAfter commits without a
// filter, and does not wait for it: git writes the file under its lock and renames it into
// place, so a walk reads the old one or the new one, never a half. A repo without git
// installed keeps walking the trees.
func (s *Source) KeepGraph() {
	if s.unfiltered < graphAfter {
		return
	}
	s.unfiltered = 0
	git, err := exec.LookPath("git")
	if err != nil {
		return
	}
	c := exec.Command(git, "--git-dir=.", "commit-graph", "write", "--reachable", "--changed-paths")
	c.Dir = s.gitDir
	if err := c.Start(); err == nil {
		go func() { _ = c.Wait() }() // reaped if the process lives that long
	}
}

// firstParent reads c's first parent (nil for a root commit).
func (s *Source) firstParent(c *commit) (*commit, error) {
	if len(c.parents) == 0 {
		return nil, nil
	}
	// More steps through the graph than it has commits is a cycle only a damaged file makes:
	// the objects, which cannot cycle, answer from then on.
	if s.graphSteps++; s.graphSteps > int64(s.graph.count()) {
		return readCommit(s.store, c.parents[0])
	}
	if c.firstPos >= 0 {
		if p, ok := s.graph.commit(uint32(c.firstPos)); ok {
			return p, nil
		}
	}
	return s.commit(c.parents[0])
}

// message is c's message, reading its object when c came from the commit-graph.
func (s *Source) message(c *commit) (string, error) {
	if c.raw == nil {
		full, err := readCommit(s.store, c.id)
		if err != nil {
			return "", err
		}
		c.raw = full.raw
	}
	return c.message(), nil
}

// commit is what a walk needs of a commit object.
type commit struct {
	id      plumbing.Hash
	tree    plumbing.Hash
	parents []plumbing.Hash
	when    time.Time
	raw     []byte // the whole object: the message is read only for an entry
	pos     int64  // its position in the commit-graph, -1 when read from its object
	// firstPos is the first parent's position in the graph (-1: not known), so a walk
	// down the chain never searches the graph for it.
	firstPos int64
}

// message is the commit message (after the header's blank line).
func (c *commit) message() string {
	if i := bytes.Index(c.raw, []byte("\n\n")); i >= 0 {
		return string(c.raw[i+2:])
	}
	return ""
}

func readCommit(st Store, h plumbing.Hash) (*commit, error) {
	t, b, err := st.Read(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.CommitObject {
		return nil, fmt.Errorf("%s is a %s, not a commit: %w", h, t, ErrBadObject)
	}
	c := &commit{id: h, raw: b, pos: -1, firstPos: -1}
	defer func() { c.when = c.when.UTC() }()
	for len(b) > 0 && b[0] != '\n' {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		k, v, _ := bytes.Cut(line, []byte(" "))
		switch string(k) {
		case "tree":
			c.tree, err = parseHash(v)
		case "parent":
			var p plumbing.Hash
			p, err = parseHash(v)
			c.parents = append(c.parents, p)
		case "committer":
			c.when, err = parseSig(v)
		}
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", h, err)
		}
	}
	if c.tree.IsZero() {
		return nil, fmt.Errorf("commit %s: no tree: %w", h, ErrBadObject)
	}
	return c, nil
}

func parseHash(v []byte) (plumbing.Hash, error) {
	if len(v) != 40 {
		return plumbing.ZeroHash, fmt.Errorf("bad id %q: %w", v, ErrBadObject)
	}
	var h plumbing.Hash
	if _, err := hex.Decode(h[:], v); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("bad id %q: %w", v, ErrBadObject)
	}
	return h, nil
}

// parseSig reads the time of "Name <mail> 1700000000 +0100", in its own zone.
func parseSig(v []byte) (time.Time, error) {
	i := bytes.LastIndexByte(v, '>')
	if i < 0 {
		return time.Time{}, fmt.Errorf("bad signature %q: %w", v, ErrBadObject)
	}
	f := bytes.Fields(v[i+1:])
	if len(f) < 1 {
		return time.Time{}, fmt.Errorf("bad signature %q: %w", v, ErrBadObject)
	}
	sec, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad signature time %q: %w", f[0], ErrBadObject)
	}
	t := time.Unix(sec, 0)
	if len(f) > 1 && len(f[1]) == 5 {
		if z, err := strconv.Atoi(string(f[1][1:])); err == nil {
			off := (z/100*60 + z%100) * 60
			if f[1][0] == '-' {
				off = -off
			}
			t = t.In(time.FixedZone("", off))
		}
	}
	return t, nil
}

// entry is one tree entry.
type entry struct {
	mode filemode.FileMode
	id   plumbing.Hash
	ok   bool
}

// lookup finds name in the raw tree object b (git's format: "<mode> <name>\0<20 bytes>").
func lookup(b []byte, name string) (entry, error) {
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		nul := bytes.IndexByte(b, 0)
		if sp < 0 || nul < sp || len(b) < nul+21 {
			return entry{}, fmt.Errorf("tree entry: %w", ErrBadObject)
		}
		if string(b[sp+1:nul]) == name {
			m, err := filemode.New(string(b[:sp]))
			if err != nil {
				return entry{}, fmt.Errorf("tree entry %q: %w", name, ErrBadObject)
			}
			var h plumbing.Hash
			copy(h[:], b[nul+1:nul+21])
			return entry{mode: m, id: h, ok: true}, nil
		}
		b = b[nul+21:]
	}
	return entry{}, nil
}

// eachEntry calls fn for every entry of the raw tree b in order.
func eachEntry(b []byte, fn func(name string, e entry) error) error {
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		nul := bytes.IndexByte(b, 0)
		if sp < 0 || nul < sp || len(b) < nul+21 {
			return fmt.Errorf("tree entry: %w", ErrBadObject)
		}
		m, err := filemode.New(string(b[:sp]))
		if err != nil {
			return fmt.Errorf("tree entry %q: %w", b[sp+1:nul], ErrBadObject)
		}
		var h plumbing.Hash
		copy(h[:], b[nul+1:nul+21])
		if err := fn(string(b[sp+1:nul]), entry{mode: m, id: h, ok: true}); err != nil {
			return err
		}
		b = b[nul+21:]
	}
	return nil
}
