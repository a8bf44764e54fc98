package gitstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"runtime"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// ErrBadPackIndex is returned for a .idx or .rev file that is not what git writes. The
// error names the file.
var ErrBadPackIndex = errors.New("malformed pack index")

// PackIndex is one pack's .idx (version 2) read in place from a read-only memory map, the
// way git reads it: the names are binary-searched in the file, so nothing per object lives
// on the Go heap. go-git's MemoryIndex copies every name, offset and CRC onto the heap and,
// on the first read from the pack, adds a map from offset to name (~75 bytes an object in
// all); a daemon whose repository gains objects all day grew its heap with it (issue 17's
// soak). The one thing a PackIndex may build is the offset order (4 bytes an object) for
// FindHash, and only when the pack has no .rev file, which git writes with
// pack.writeReverseIndex.
//
// A PackIndex is safe for concurrent use. Its mapping is released when it becomes
// unreachable (runtime.AddCleanup), never while a reader (go-git's Packfile, an FSObject)
// still holds it; every method that touches the mapping keeps the index alive to its end.
type PackIndex struct {
	name   string // the .idx path, for errors
	n      int
	fanout []byte // 256 big-endian uint32s
	names  []byte // n × 20, sorted
	crc    []byte // n × 4
	off32  []byte // n × 4; the top bit set means an index into off64
	off64  []byte // m × 8
	pack   plumbing.Hash

	rev    []byte // the .rev file's positions in pack order (n × 4), when there is one
	order  sync.Once
	byOff  []uint32 // positions in pack order when there is no .rev
	errOff error
}

const (
	idxHeaderLen = 8
	fanoutLen    = 256 * 4
	hashLen      = 20
	trailerLen   = 2 * hashLen
)

var idxMagic = []byte{0xff, 't', 'O', 'c'}

// OpenPackIndex maps the .idx file at path and, when it exists beside it, the pack's .rev.
// It checks the layout (magic, version, a non-decreasing fanout, the sizes the count
// implies) so that every later lookup stays inside the mapping; a bad .rev is reported
// rather than trusted.
func OpenPackIndex(path string) (*PackIndex, error) {
	data, release, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("pack index %s: %w", path, err)
	}
	idx := &PackIndex{name: path}
	if err := idx.parse(data); err != nil {
		release()
		return nil, err
	}
	runtime.AddCleanup(idx, func(f func()) { f() }, release)
	if rev := strings.TrimSuffix(path, ".idx") + ".rev"; rev != path {
		if data, release, err := mapFile(rev); err == nil {
			if err := idx.parseRev(rev, data); err != nil {
				release()
				return nil, err
			}
			runtime.AddCleanup(idx, func(f func()) { f() }, release)
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("pack reverse index %s: %w", rev, err)
		}
	}
	return idx, nil
}

func (idx *PackIndex) bad(format string, args ...any) error {
	return fmt.Errorf("%w %s: %s", ErrBadPackIndex, idx.name, fmt.Sprintf(format, args...))
}

func (idx *PackIndex) parse(data []byte) error {
	if len(data) < idxHeaderLen+fanoutLen+trailerLen {
		return idx.bad("%d bytes is shorter than an empty index", len(data))
	}
	if !bytes.Equal(data[:4], idxMagic) {
		return idx.bad("not a version 2 index (no \\377tOc magic)")
	}
	if v := binary.BigEndian.Uint32(data[4:8]); v != 2 {
		return idx.bad("version %d, want 2", v)
	}
	idx.fanout = data[idxHeaderLen : idxHeaderLen+fanoutLen]
	prev := uint32(0)
	for i := range 256 {
		v := binary.BigEndian.Uint32(idx.fanout[4*i:])
		if v < prev {
			return idx.bad("fanout entry %d (%d) is below the one before (%d)", i, v, prev)
		}
		prev = v
	}
	n := int(prev)
	body := len(data) - idxHeaderLen - fanoutLen - trailerLen
	if n > body/28 {
		return idx.bad("%d objects do not fit in %d bytes", n, len(data))
	}
	rest := data[idxHeaderLen+fanoutLen:]
	idx.n = n
	idx.names, rest = rest[:n*hashLen], rest[n*hashLen:]
	idx.crc, rest = rest[:n*4], rest[n*4:]
	idx.off32, rest = rest[:n*4], rest[n*4:]
	big := len(rest) - trailerLen
	if big%8 != 0 {
		return idx.bad("%d bytes of large offsets is not a whole number of 8-byte entries", big)
	}
	idx.off64 = rest[:big]
	copy(idx.pack[:], rest[big:big+hashLen])
	return nil
}

// parseRev checks a .rev file's header and trailer (magic RIDX, version 1, SHA-1, this
// pack's checksum) and keeps its positions.
func (idx *PackIndex) parseRev(path string, data []byte) error {
	bad := func(why string) error { return fmt.Errorf("%w %s: %s", ErrBadPackIndex, path, why) }
	if len(data) != 12+4*idx.n+trailerLen {
		return bad(fmt.Sprintf("%d bytes, want %d for %d objects", len(data), 12+4*idx.n+trailerLen, idx.n))
	}
	if string(data[:4]) != "RIDX" || binary.BigEndian.Uint32(data[4:]) != 1 || binary.BigEndian.Uint32(data[8:]) != 1 {
		return bad("not a version 1 SHA-1 reverse index")
	}
	if !bytes.Equal(data[12+4*idx.n:12+4*idx.n+hashLen], idx.pack[:]) {
		return bad("it belongs to another pack")
	}
	// Each position is checked as it is read (byOffset), not here: touching all of it cost
	// a one-shot command ~45 ms on a pack of 5 M objects, where a lookup reads a few pages.
	idx.rev = data[12 : 12+4*idx.n]
	return nil
}

// PackChecksum is the checksum of the pack the index describes (its file name).
func (idx *PackIndex) PackChecksum() plumbing.Hash { return idx.pack }

// find is the position of h, or -1.
func (idx *PackIndex) find(h plumbing.Hash) int {
	lo := 0
	if h[0] > 0 {
		lo = int(binary.BigEndian.Uint32(idx.fanout[4*(int(h[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(idx.fanout[4*int(h[0]):]))
	// The first 8 bytes as a number decide nearly every probe without a call to Compare.
	key := binary.BigEndian.Uint64(h[:8])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		name := idx.names[m*hashLen : (m+1)*hashLen]
		c := 1
		if k := binary.BigEndian.Uint64(name); k < key {
			c = -1
		} else if k == key {
			c = bytes.Compare(name[8:], h[8:])
		}
		switch {
		case c == 0:
			return m
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return -1
}

// offset is the pack offset of the object at position i.
func (idx *PackIndex) offset(i int) (int64, error) {
	v := binary.BigEndian.Uint32(idx.off32[4*i:])
	if v&0x80000000 == 0 {
		return int64(v), nil
	}
	j := int(v & 0x7fffffff)
	if j >= len(idx.off64)/8 {
		return 0, idx.bad("large offset %d of object %d is out of range", j, i)
	}
	o := binary.BigEndian.Uint64(idx.off64[8*j:])
	if o > 1<<62 {
		return 0, idx.bad("offset %d of object %d is out of range", o, i)
	}
	return int64(o), nil
}

func (idx *PackIndex) hashAt(i int) plumbing.Hash {
	var h plumbing.Hash
	copy(h[:], idx.names[i*hashLen:])
	return h
}

// Contains implements idxfile.Index.
func (idx *PackIndex) Contains(h plumbing.Hash) (bool, error) {
	ok := idx.find(h) >= 0
	runtime.KeepAlive(idx)
	return ok, nil
}

// FindOffset implements idxfile.Index.
func (idx *PackIndex) FindOffset(h plumbing.Hash) (int64, error) {
	defer runtime.KeepAlive(idx)
	i := idx.find(h)
	if i < 0 {
		return 0, plumbing.ErrObjectNotFound
	}
	return idx.offset(i)
}

// FindCRC32 implements idxfile.Index.
func (idx *PackIndex) FindCRC32(h plumbing.Hash) (uint32, error) {
	defer runtime.KeepAlive(idx)
	i := idx.find(h)
	if i < 0 {
		return 0, plumbing.ErrObjectNotFound
	}
	return binary.BigEndian.Uint32(idx.crc[4*i:]), nil
}

// Count implements idxfile.Index.
func (idx *PackIndex) Count() (int64, error) { return int64(idx.n), nil }

// byOffset returns the position of the k-th object in pack order. Without a .rev the order
// is built once, 4 bytes an object, and written as the pack's .rev when the pack is big
// (writeRev); an offset the index cannot give fails it.
func (idx *PackIndex) byOffset(k int) (int, error) {
	if idx.rev != nil {
		if p := int(binary.BigEndian.Uint32(idx.rev[4*k:])); p < idx.n {
			return p, nil
		}
		return 0, fmt.Errorf("%w %s: reverse index position %d is out of range", ErrBadPackIndex, strings.TrimSuffix(idx.name, ".idx")+".rev", k)
	}
	idx.order.Do(func() {
		offs := make([]uint64, idx.n) // transient: only the positions are kept
		for i := range offs {
			o, err := idx.offset(i)
			if err != nil {
				idx.errOff = err
				return
			}
			offs[i] = uint64(o)
		}
		idx.byOff = packOrder(offs)
		if idx.n >= revWriteMin {
			_ = idx.writeRev(idx.byOff) // best effort: a read-only pack dir sorts again next time
		}
	})
	if idx.errOff != nil {
		return 0, idx.errOff
	}
	return int(idx.byOff[k]), nil
}

// radixBits is the digit packOrder sorts by in each pass: 2,048 counters stay in cache.
const radixBits = 11

// packOrder is the positions 0..len(offs)-1 ordered by their offsets: a least significant
// digit radix sort, as many passes as the largest offset has digits (3 for a pack under
// 8 GiB), each key carried beside its position so that every pass reads in sequence. Every
// process's first OFS-delta read through go-git asks FindHash, so this order is built once
// per process per pack; a comparison sort of the million objects of a 200,000-commit
// history took 0.4 s of each `memd restore` (issue 48). offs is the sort's scratch after.
func packOrder(offs []uint64) []uint32 {
	pos := make([]uint32, len(offs))
	for i := range pos {
		pos[i] = uint32(i)
	}
	var top uint64
	for _, o := range offs {
		top = max(top, o)
	}
	passes := (bits.Len64(top) + radixBits - 1) / radixBits
	if passes == 0 {
		return pos
	}
	tmp, keys, tmpKeys := make([]uint32, len(offs)), offs, make([]uint64, len(offs))
	const mask = 1<<radixBits - 1
	var next [1 << radixBits]int
	for p := range passes {
		shift := uint(p * radixBits)
		clear(next[:])
		for _, k := range keys {
			next[(k>>shift)&mask]++
		}
		sum := 0
		for d, c := range next {
			next[d], sum = sum, sum+c
		}
		for j, k := range keys { // stable: equal digits keep the previous passes' order
			d := (k >> shift) & mask
			tmp[next[d]], tmpKeys[next[d]] = pos[j], k
			next[d]++
		}
		pos, tmp, keys, tmpKeys = tmp, pos, tmpKeys, keys
	}
	return pos
}

// FindHash implements idxfile.Index: a binary search over the pack order.
func (idx *PackIndex) FindHash(o int64) (plumbing.Hash, error) {
	defer runtime.KeepAlive(idx)
	lo, hi := 0, idx.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		i, err := idx.byOffset(m)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mo, err := idx.offset(i)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		switch {
		case mo == o:
			return idx.hashAt(i), nil
		case mo < o:
			lo = m + 1
		default:
			hi = m
		}
	}
	return plumbing.ZeroHash, plumbing.ErrObjectNotFound
}

// Entries implements idxfile.Index, in name order.
func (idx *PackIndex) Entries() (idxfile.EntryIter, error) {
	return &packIndexIter{idx: idx}, nil
}

// EntriesByOffset implements idxfile.Index, in pack order.
func (idx *PackIndex) EntriesByOffset() (idxfile.EntryIter, error) {
	if idx.n > 0 {
		if _, err := idx.byOffset(0); err != nil { // builds the order, or says why it cannot
			return nil, err
		}
	}
	return &packIndexIter{idx: idx, packOrder: true}, nil
}

// HashesWithPrefix appends the names that start with prefix.
func (idx *PackIndex) HashesWithPrefix(out []plumbing.Hash, prefix []byte) []plumbing.Hash {
	defer runtime.KeepAlive(idx)
	if len(prefix) == 0 {
		return out
	}
	lo := 0
	if prefix[0] > 0 {
		lo = int(binary.BigEndian.Uint32(idx.fanout[4*(int(prefix[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(idx.fanout[4*int(prefix[0]):]))
	for i := lo; i < hi; i++ {
		if bytes.HasPrefix(idx.names[i*hashLen:(i+1)*hashLen], prefix) {
			out = append(out, idx.hashAt(i))
		}
	}
	return out
}

type packIndexIter struct {
	idx       *PackIndex
	k         int
	packOrder bool
}

func (it *packIndexIter) Next() (*idxfile.Entry, error) {
	idx := it.idx
	defer runtime.KeepAlive(idx)
	if it.k >= idx.n {
		return nil, io.EOF
	}
	i := it.k
	if it.packOrder {
		var err error
		if i, err = idx.byOffset(it.k); err != nil {
			return nil, err
		}
	}
	o, err := idx.offset(i)
	if err != nil {
		return nil, err
	}
	it.k++
	return &idxfile.Entry{Hash: idx.hashAt(i), CRC32: binary.BigEndian.Uint32(idx.crc[4*i:]), Offset: uint64(o)}, nil
}

func (it *packIndexIter) Close() error { it.k = it.idx.n; return nil }

var _ idxfile.Index = (*PackIndex)(nil)
