package gitrepo

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/klauspost/compress/flate"
)

// Big trees, compressed in pieces (docs/ARCHITECTURE.md §3, "big directories"). A commit
// in a directory of 24k files rewrites its whole tree object (2.1 MB in the 100k demo):
// git's format has no delta for loose objects. Hashing it is cheap (SHA-1 with the CPU's
// instructions, ~1 ms); compressing it is not (zlib at best speed, ~10 ms of CPU). So a
// tree of packMin bytes or more is compressed as a run of independent deflate pieces of
// ~treeChunk raw bytes each, every piece made by a fresh compressor and ended with a sync
// flush (byte-aligned, no back-reference into an earlier piece: the way pigz joins
// blocks). The result is one ordinary zlib stream (git, go-git and zlib read it like any
// other). memd keeps the pieces of the trees it wrote (Repo.hot), and the next commit in
// that directory reuses every piece whose raw bytes are unchanged, found from both ends,
// and compresses only what lies between: one piece for a one-file change. The adler-32
// trailer is combined from the pieces' sums. What stays O(directory) is SHA-1 over the
// tree, a compare of the old and new bytes, and writing the file.

const (
	packMin   = 128 << 10 // trees at least this big are written in pieces
	treeChunk = 32 << 10  // raw bytes per piece
)

// packedTree is the compressed pieces of a tree object's content, in order. The tree's
// entries (treeView) say what each piece holds, so no copy of the content is kept.
type packedTree struct {
	chunks []zchunk
}

// zchunk is one piece: ne entries of n raw bytes, their adler-32, and their deflate bytes
// (sync-flushed, not final). z is never modified once made, so trees share it.
type zchunk struct {
	ne, n int
	adler uint32
	z     []byte
}

var flatePool = sync.Pool{New: func() any {
	fw, _ := flate.NewWriter(nil, flate.BestSpeed)
	return fw
}}

// deflatePiece compresses raw (ne entries) on its own, ending in a sync flush.
func deflatePiece(raw []byte, ne int) zchunk {
	var buf bytes.Buffer
	buf.Grow(len(raw)*5/8 + 64)
	fw := flatePool.Get().(*flate.Writer)
	fw.Reset(&buf)
	_, _ = fw.Write(raw) // a bytes.Buffer does not fail
	_ = fw.Flush()
	flatePool.Put(fw)
	z := buf.Bytes()
	if cap(z) > len(z)+len(z)/4 {
		z = bytes.Clone(z) // kept: no slack
	}
	return zchunk{ne: ne, n: len(raw), adler: adler32.Checksum(raw), z: z}
}

// entrySize is the length of e in a tree object: octal mode, space, name, NUL, id.
func entrySize(e object.TreeEntry) int {
	n := 1
	for m := uint32(e.Mode) >> 3; m > 0; m >>= 3 {
		n++
	}
	return n + 1 + len(e.Name) + 1 + len(e.Hash)
}

// packPieces compresses es (encoded as raw) as pieces of about treeChunk bytes each, cut
// between entries.
func packPieces(out []zchunk, es []object.TreeEntry, raw []byte) []zchunk {
	if len(es) == 0 {
		return out
	}
	k := max(1, (len(raw)+treeChunk/2)/treeChunk)
	target := (len(raw) + k - 1) / k
	start, off, n := 0, 0, 0
	for i, e := range es {
		n += entrySize(e)
		if n >= target || i == len(es)-1 {
			out = append(out, deflatePiece(raw[off:off+n], i+1-start))
			start, off, n = i+1, off+n, 0
		}
	}
	return out
}

// packTree splits es (encoded as raw) into pieces, reusing the pieces of base (nil: none)
// whose entries are unchanged at the start and at the end of es.
func packTree(es []object.TreeEntry, raw []byte, base *treeView) *packedTree {
	pt := &packedTree{}
	if base == nil || base.z == nil {
		pt.chunks = packPieces(nil, es, raw)
		return pt
	}
	old, chunks := base.entries, base.z.chunks
	i, ei, off := 0, 0, 0 // the unchanged head: chunks[:i], es[:ei], raw[:off]
	for i < len(chunks) {
		c := chunks[i]
		if ei+c.ne > len(es) || !slices.Equal(old[ei:ei+c.ne], es[ei:ei+c.ne]) {
			break
		}
		ei, off = ei+c.ne, off+c.n
		i++
	}
	j, eo, en, end := len(chunks), len(old), len(es), len(raw) // the unchanged tail: chunks[j:]
	for j > i {
		c := chunks[j-1]
		if en-c.ne < ei || !slices.Equal(old[eo-c.ne:eo], es[en-c.ne:en]) {
			break
		}
		eo, en, end = eo-c.ne, en-c.ne, end-c.n
		j--
	}
	pt.chunks = make([]zchunk, 0, len(chunks)+2)
	pt.chunks = append(pt.chunks, chunks[:i]...)
	pt.chunks = packPieces(pt.chunks, es[ei:en], raw[off:end])
	pt.chunks = append(pt.chunks, chunks[j:]...)
	return pt
}

// adler32Combine is the adler-32 of A+B from adler-32 a of A, b of B and len(B) (zlib's
// adler32_combine).
func adler32Combine(a, b uint32, lenB int) uint32 {
	const base = 65521
	rem := uint64(lenB % base)
	s1 := uint64(a & 0xffff)
	s2 := rem * s1 % base
	s1 += uint64(b&0xffff) + base - 1
	s2 += uint64(a>>16) + uint64(b>>16) + base - rem
	if s1 >= base {
		s1 -= base
	}
	if s1 >= base {
		s1 -= base
	}
	if s2 >= 2*base {
		s2 -= 2 * base
	}
	if s2 >= base {
		s2 -= base
	}
	return uint32(s1 | s2<<16)
}

// appendZlibPieces appends the zlib stream of hdr and the pieces' content to b: the zlib header, hdr as
// a stored block, the pieces, an empty final block and the combined adler-32.
func appendZlibPieces(b, hdr []byte, pt *packedTree) []byte {
	b = append(b, 0x78, 0x01) // deflate, 32K window, fastest (as zlib level 1 writes it)
	n := len(hdr)
	b = append(b, 0x00, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8)) // stored, not final
	b = append(b, hdr...)
	sum := adler32.Checksum(hdr)
	for _, c := range pt.chunks {
		b = append(b, c.z...)
		sum = adler32Combine(sum, c.adler, c.n)
	}
	b = append(b, 0x03, 0x00) // an empty final block (fixed Huffman: just end-of-block)
	return binary.BigEndian.AppendUint32(b, sum)
}

// writeTreePacked stores the tree es (encoded as raw, packMin bytes or more) in pieces,
// reusing base's, and returns its id and pieces for the next commit. Durable only after
// flush.
func (b *objectBatch) writeTreePacked(es []object.TreeEntry, raw []byte, base *treeView) (plumbing.Hash, *packedTree, error) {
	h := hashObject(plumbing.TreeObject, raw)
	pt := packTree(es, raw, base)
	if b.has(h) {
		return h, pt, nil
	}
	final := b.objectPath(h)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return h, nil, fmt.Errorf("write object %s: %w", h, err)
	}
	f, err := os.CreateTemp(filepath.Dir(final), "tmp_obj_memd_")
	if err != nil {
		return h, nil, fmt.Errorf("write object %s: %w", h, err)
	}
	bp := treeBufPool.Get().(*[]byte) // garbage once written, as in rebuild
	*bp = appendZlibPieces((*bp)[:0], objectHeader(plumbing.TreeObject, int64(len(raw))), pt)
	_, err = f.Write(*bp)
	if cap(*bp) <= 8<<20 {
		treeBufPool.Put(bp)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return h, nil, fmt.Errorf("write object %s: %w", h, err)
	}
	b.seen[h] = true
	b.pending = append(b.pending, pendingObject{tmp: f.Name(), final: final})
	return h, pt, nil
}

// writeTree encodes and stores the tree es; base is the tree it was made from (nil: none),
// whose pieces a big tree reuses. Returns the pieces of a big tree (nil for a small one).
func (b *objectBatch) writeTree(es []object.TreeEntry, base *treeView) (plumbing.Hash, *packedTree, error) {
	// The encoding is garbage once written (hashed and compressed): pooled, so a commit in
	// a 24k-file directory does not leave a 2 MB buffer behind each time.
	bp := treeBufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 8<<20 {
			treeBufPool.Put(bp)
		}
	}()
	*bp = appendTree((*bp)[:0], es)
	if len(*bp) >= packMin {
		return b.writeTreePacked(es, *bp, base)
	}
	h, err := b.write(plumbing.TreeObject, *bp)
	return h, nil, err
}

// hotClock orders the hot trees by when a commit wrote them.
var hotClock atomic.Uint64

// evictHot drops the hot trees of directories that this commit (written) did not write,
// least recently written first, until at most maxHotEntries entries are kept (n: the
// entries kept now), and returns how many are kept. An agent writes into a few directories
// again and again: those stay, with their pieces, while one it touched once goes.
func (r *Repo) evictHot(written map[string]hotTree, n int) int {
	type dirGen struct {
		dir string
		gen uint64
	}
	keep := make(map[plumbing.Hash]bool, len(written)) // a tree this commit wrote stays
	for _, w := range written {
		keep[w.h] = true
	}
	var old []dirGen
	for dir, h := range r.hotDirs {
		if _, now := written[dir]; !now {
			old = append(old, dirGen{dir, r.hot[h].gen})
		}
	}
	slices.SortFunc(old, func(a, b dirGen) int { return cmp.Compare(a.gen, b.gen) })
	for _, d := range old {
		if n <= maxHotEntries {
			break
		}
		h := r.hotDirs[d.dir]
		if tv := r.hot[h]; tv != nil && !keep[h] {
			n -= len(tv.entries)
			delete(r.hot, h)
		}
		delete(r.hotDirs, d.dir)
	}
	return n
}
