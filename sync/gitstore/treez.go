package gitstore

import (
	"bytes"
	stdzlib "compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

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
// other). memd keeps the pieces of the trees it wrote (gitrepo's Repo.hot), and the next commit in
// that directory reuses every piece whose raw bytes are unchanged, found from both ends,
// and compresses only what lies between: one piece for a one-file change. The adler-32
// trailer is combined from the pieces' sums. What stays O(directory) is SHA-1 over the
// tree, a compare of the old and new bytes, and writing the file.

const (
	PackMin   = 128 << 10 // trees at least this big are written in pieces
	treeChunk = 32 << 10  // raw bytes per piece
)

// PackedTree is the compressed pieces of a tree object's content, in order. The tree's
// entries (kept beside it) say what each piece holds, so no copy of the content is kept.
type PackedTree struct {
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

// EntrySize is the length of e in a tree object: octal mode, space, name, NUL, id.
func EntrySize(e object.TreeEntry) int {
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
		n += EntrySize(e)
		if n >= target || i == len(es)-1 {
			out = append(out, deflatePiece(raw[off:off+n], i+1-start))
			start, off, n = i+1, off+n, 0
		}
	}
	return out
}

// PackTree splits es (encoded as raw) into pieces, reusing the pieces of base (nil: none),
// the pieces of the tree of entries old, whose entries are unchanged at the start and at
// the end of es.
func PackTree(es []object.TreeEntry, raw []byte, old []object.TreeEntry, base *PackedTree) *PackedTree {
	pt := &PackedTree{}
	if base == nil {
		pt.chunks = packPieces(nil, es, raw)
		return pt
	}
	chunks := base.chunks
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
func appendZlibPieces(b, hdr []byte, pt *PackedTree) []byte {
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

// writeTreePacked stores the tree es (encoded as raw, PackMin bytes or more) in pieces,
// reusing base's (the pieces of the tree of entries old), and returns its id and pieces
// for the next commit. Durable only after Flush.
func (b *ObjectBatch) writeTreePacked(es []object.TreeEntry, raw []byte, old []object.TreeEntry, base *PackedTree) (plumbing.Hash, *PackedTree, error) {
	h := HashObject(plumbing.TreeObject, raw)
	pt := PackTree(es, raw, old, base)
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

// WriteTree encodes and stores the tree es; old and base are the entries and the pieces
// of the tree it was made from (nil: none), whose pieces a big tree reuses. Returns the
// pieces of a big tree (nil for a small one). Durable only after Flush.
func (b *ObjectBatch) WriteTree(es []object.TreeEntry, old []object.TreeEntry, base *PackedTree) (plumbing.Hash, *PackedTree, error) {
	// The encoding is garbage once written (hashed and compressed): pooled, so a commit in
	// a 24k-file directory does not leave a 2 MB buffer behind each time.
	bp := treeBufPool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 8<<20 {
			treeBufPool.Put(bp)
		}
	}()
	*bp = AppendTree((*bp)[:0], es)
	if len(*bp) >= PackMin {
		return b.writeTreePacked(es, *bp, old, base)
	}
	h, err := b.Write(plumbing.TreeObject, *bp)
	return h, nil, err
}

// Pieces is the number of pieces.
func (pt *PackedTree) Pieces() int { return len(pt.chunks) }

// SharedWith counts the pieces of pt that are a's own (reused, not compressed again).
func (pt *PackedTree) SharedWith(a *PackedTree) int {
	shared := map[*byte]bool{}
	for _, c := range a.chunks {
		shared[&c.z[0]] = true
	}
	same := 0
	for _, c := range pt.chunks {
		if shared[&c.z[0]] {
			same++
		}
	}
	return same
}

// Verify checks that the pieces are the tree object of es: their zlib stream, read with
// Go's own reader (which checks the adler-32), is es's object, and they hold len(es)
// entries. The tests check kept pieces with it.
func (pt *PackedTree) Verify(es []object.TreeEntry) error {
	raw := AppendTree(nil, es)
	hdr := objectHeader(plumbing.TreeObject, int64(len(raw)))
	zr, err := stdzlib.NewReader(bytes.NewReader(appendZlibPieces(nil, hdr, pt)))
	if err != nil {
		return err
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("inflate: %w", err)
	}
	if !bytes.Equal(got, append(hdr, raw...)) {
		return fmt.Errorf("inflated %d bytes, not the %d of the tree", len(got), len(hdr)+len(raw))
	}
	ne := 0
	for _, c := range pt.chunks {
		ne += c.ne
	}
	if ne != len(es) {
		return fmt.Errorf("pieces hold %d entries, the tree %d", ne, len(es))
	}
	return nil
}
