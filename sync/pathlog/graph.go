package pathlog

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/sync/gitstore"
)

// graph is git's commit-graph file (objects/info/commit-graph, written by `git gc` or
// `git commit-graph write`): each commit's tree, parents and committer time without
// inflating the commit. Only the single-file form is read; a split chain, a file that does
// not parse, or a commit it does not hold (made after it was written) means the commit is
// read from the object store. The file names commits by their ids, so a rewritten history
// never makes it wrong, only less complete.
type graph struct {
	n      uint32
	fanout []byte // 256 × 4
	oids   []byte // n × 20
	cdat   []byte // n × 36: tree, parent 1, parent 2, generation and time
	edges  []byte // octopus parents
	// The changed-path Bloom filters (bloom.go), when the graph has them: bidx the n end
	// offsets into bdat, bdat the filters after its 12-byte header; hashes per path.
	bidx, bdat []byte
	hashes     uint32
	release    func() // unmaps the file: Source.Close
}

const (
	graphNoParent = 0x70000000
	graphOctopus  = 0x80000000
	graphDataLen  = 36
)

// openGraph maps gitDir's commit-graph, nil when there is none that parses. Mapped, not
// read: a restore touches a few of its pages, and the file grows with the history (13 MB
// for 200,000 commits, 10 ms to read whole: issue 48).
func openGraph(gitDir string) *graph {
	b, release, err := gitstore.MapFile(filepath.Join(gitDir, "objects", "info", "commit-graph"))
	if err != nil {
		return nil
	}
	if g := parseGraph(b); g != nil {
		g.release = release
		return g
	}
	release()
	return nil
}

// parseGraph finds the chunks of a commit-graph file b, nil when it does not parse.
func parseGraph(b []byte) *graph {
	if len(b) < 8 || !bytes.Equal(b[:4], []byte("CGPH")) || b[4] != 1 || b[5] != 1 || b[7] != 0 {
		return nil
	}
	g := &graph{}
	nch := int(b[6])
	if len(b) < 8+12*(nch+1) {
		return nil
	}
	for i := 0; i < nch; i++ {
		t := b[8+12*i:]
		start, end := binary.BigEndian.Uint64(t[4:]), binary.BigEndian.Uint64(t[16:])
		if start > end || end > uint64(len(b)) {
			return nil
		}
		chunk := b[start:end]
		switch string(t[:4]) {
		case "OIDF":
			g.fanout = chunk
		case "OIDL":
			g.oids = chunk
		case "CDAT":
			g.cdat = chunk
		case "EDGE":
			g.edges = chunk
		case "BIDX":
			g.bidx = chunk
		case "BDAT":
			g.bdat = chunk
		}
	}
	if len(g.fanout) != 1024 {
		return nil
	}
	g.n = binary.BigEndian.Uint32(g.fanout[1020:])
	if uint64(len(g.oids)) != uint64(g.n)*20 || uint64(len(g.cdat)) != uint64(g.n)*graphDataLen {
		return nil
	}
	// Filters of hash version 1 or 2 (the same hash for ASCII paths), else none are used.
	if uint64(len(g.bidx)) != uint64(g.n)*4 || len(g.bdat) < 12 || binary.BigEndian.Uint32(g.bdat) > 2 {
		g.bidx, g.bdat = nil, nil
	} else {
		g.hashes, g.bdat = binary.BigEndian.Uint32(g.bdat[4:]), g.bdat[12:]
		if g.hashes == 0 || g.hashes > 64 {
			g.bidx, g.bdat = nil, nil
		}
	}
	return g
}

// count is the commits in the graph (0 for none).
func (g *graph) count() uint32 {
	if g == nil {
		return 0
	}
	return g.n
}

// find is h's position in the graph.
func (g *graph) find(h plumbing.Hash) (uint32, bool) {
	if g == nil {
		return 0, false
	}
	var lo uint32
	if h[0] > 0 {
		lo = binary.BigEndian.Uint32(g.fanout[4*(int(h[0])-1):])
	}
	hi := binary.BigEndian.Uint32(g.fanout[4*int(h[0]):])
	for lo < hi && hi <= g.n {
		m := (lo + hi) / 2
		switch c := bytes.Compare(g.oids[20*m:20*m+20], h[:]); {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return 0, false
}

// commit is the commit at position pos (ok false: the graph is inconsistent there).
func (g *graph) commit(pos uint32) (*commit, bool) {
	d := g.cdat[graphDataLen*pos:]
	c := &commit{pos: int64(pos)}
	copy(c.id[:], g.oids[20*pos:])
	copy(c.tree[:], d[:20])
	p1, p2 := binary.BigEndian.Uint32(d[20:]), binary.BigEndian.Uint32(d[24:])
	c.when = time.Unix(int64(binary.BigEndian.Uint64(d[28:])&0x3FFFFFFFF), 0).UTC()
	add := func(p uint32) bool {
		if p >= g.n {
			return false
		}
		var h plumbing.Hash
		copy(h[:], g.oids[20*p:])
		c.parents = append(c.parents, h)
		return true
	}
	c.firstPos = -1
	if p1 != graphNoParent {
		if !add(p1) {
			return nil, false
		}
		c.firstPos = int64(p1)
	}
	switch {
	case p2 == graphNoParent:
	case p2&graphOctopus == 0:
		if !add(p2) {
			return nil, false
		}
	default:
		for i := uint64(p2 &^ graphOctopus); ; i++ {
			if 4*i+4 > uint64(len(g.edges)) {
				return nil, false
			}
			e := binary.BigEndian.Uint32(g.edges[4*i:])
			if !add(e &^ graphOctopus) {
				return nil, false
			}
			if e&graphOctopus != 0 {
				break
			}
		}
	}
	return c, true
}
