package pathlog

import (
	"encoding/binary"
	"math/bits"
	"strings"
)

// git's changed-path Bloom filters (`git commit-graph write --changed-paths`; the BIDX and
// BDAT chunks): for each commit, the paths that differ from its first parent, with every
// directory above them. A path the filter does not hold did not change, so the walk skips
// the commit without reading a tree; git's own pathspec walks use them the same way.

// bloomSeeds are git's murmur3 seeds for the two base hashes (bloom.c).
const bloomSeed0, bloomSeed1 = 0x293ae76f, 0x7e646e2c

// bloomKey is a path's bit positions' base hashes.
type bloomKey struct{ h0, h1 uint32 }

// newBloomKey hashes p, or ok false when p has a byte over 0x7f: git's version-1 filters
// hash those bytes as signed chars (a bug fixed by version 2), so such a path is never
// looked up and its commits are read.
func newBloomKey(p string) (bloomKey, bool) {
	for i := 0; i < len(p); i++ {
		if p[i] >= 0x80 {
			return bloomKey{}, false
		}
	}
	return bloomKey{murmur3([]byte(p), bloomSeed0), murmur3([]byte(p), bloomSeed1)}, true
}

// bloomKeys are the keys of p and of each directory above it, nil when p is not ASCII.
func bloomKeys(p string) []bloomKey {
	var ks []bloomKey
	for {
		k, ok := newBloomKey(p)
		if !ok {
			return nil
		}
		ks = append(ks, k)
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return ks
		}
		p = p[:i]
	}
}

// mayHold says whether filter f (num hashes k) may hold the key; an empty filter (none was
// computed) may hold anything.
func (k bloomKey) mayHold(f []byte, n uint32) bool {
	if len(f) == 0 {
		return true
	}
	mod := uint64(len(f)) * 8
	for i := uint32(0); i < n; i++ {
		pos := uint64(k.h0+i*k.h1) % mod
		if f[pos/8]&(1<<(pos%8)) == 0 {
			return false
		}
	}
	return true
}

// murmur3 is the 32-bit MurmurHash3 of data with seed, as git's murmur3_seeded.
func murmur3(data []byte, seed uint32) uint32 {
	const c1, c2 = 0xcc9e2d51, 0x1b873593
	h := seed
	n := len(data) / 4
	for i := 0; i < n; i++ {
		k := binary.LittleEndian.Uint32(data[4*i:])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
		h = bits.RotateLeft32(h, 13)
		h = h*5 + 0xe6546b64
	}
	var k uint32
	switch tail := data[4*n:]; len(tail) {
	case 3:
		k ^= uint32(tail[2]) << 16
		fallthrough
	case 2:
		k ^= uint32(tail[1]) << 8
		fallthrough
	case 1:
		k ^= uint32(tail[0])
		k *= c1
		k = bits.RotateLeft32(k, 15)
		k *= c2
		h ^= k
	}
	h ^= uint32(len(data))
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// filter is the changed-path filter of the commit at pos, nil when the graph has none.
func (g *graph) filter(pos uint32) []byte {
	if g == nil || g.bidx == nil || pos >= g.n {
		return nil
	}
	end := binary.BigEndian.Uint32(g.bidx[4*pos:])
	start := uint32(0)
	if pos > 0 {
		start = binary.BigEndian.Uint32(g.bidx[4*(pos-1):])
	}
	if start > end || uint64(end) > uint64(len(g.bdat)) {
		return nil
	}
	return g.bdat[start:end]
}
