package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/klauspost/compress/zlib"
)

// RawReader reads whole objects as git does, for a walk over many of them (pathlog): a
// pack is mapped read-only and read in place (no seek and read per byte, as go-git's
// scanner does), one zlib reader is reset for every object, and resolved delta bases are
// kept by pack offset up to a byte budget. Loose objects are read from their files. Not
// safe for concurrent use: each walk opens its own.
type RawReader struct {
	s      *Storage
	packs  map[plumbing.Hash][]byte // mapped .pack files by checksum
	unmap  []func()
	zr     io.ReadCloser
	br     bytes.Reader
	bases  map[baseKey]rawObject
	used   int
	budget int
}

type baseKey struct {
	pack *PackIndex
	off  int64
}

type rawObject struct {
	t plumbing.ObjectType
	b []byte
}

// ErrBadPack: a pack's object header or delta is not what git writes.
var ErrBadPack = errors.New("malformed pack object")

// NewRawReader reads the objects of s, keeping up to cacheBytes of delta bases.
func (s *Storage) NewRawReader(cacheBytes int) *RawReader {
	return &RawReader{s: s, packs: map[plumbing.Hash][]byte{}, bases: map[baseKey]rawObject{}, budget: cacheBytes}
}

// Close unmaps the packs.
func (r *RawReader) Close() error {
	for _, f := range r.unmap {
		f()
	}
	r.unmap, r.packs, r.bases = nil, nil, nil
	return nil
}

// Read is h's type and content; plumbing.ErrObjectNotFound when it is in no pack and not
// loose (after one fresh listing of the packs).
func (r *RawReader) Read(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	for attempt := 0; ; attempt++ {
		idx, off, err := r.s.findPacked(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			t, b, lerr := r.loose(h)
			if errors.Is(lerr, plumbing.ErrObjectNotFound) && attempt == 0 {
				r.s.Reindex() // a pack written since the list was read
				continue
			}
			return t, b, lerr
		}
		if err != nil {
			return 0, nil, err
		}
		data, err := r.pack(idx)
		if errors.Is(err, os.ErrNotExist) && attempt == 0 {
			r.s.Reindex() // repacked away since the list was read
			continue
		}
		if err != nil {
			return 0, nil, err
		}
		o, err := r.at(idx, data, off, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("read %s in %s: %w", h, idx.name, err)
		}
		return o.t, o.b, nil
	}
}

func (r *RawReader) pack(idx *PackIndex) ([]byte, error) {
	ph := idx.PackChecksum()
	if data, ok := r.packs[ph]; ok {
		return data, nil
	}
	path := filepath.Join(r.s.gitDir, "objects", "pack", "pack-"+ph.String()+".pack")
	data, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	r.packs[ph], r.unmap = data, append(r.unmap, unmap)
	return data, nil
}

// maxDeltaDepth bounds a chain (git's default --depth is 50; a cycle would never end).
const maxDeltaDepth = 10_000

// at is the object at off in the pack data, its delta chain resolved.
func (r *RawReader) at(idx *PackIndex, data []byte, off int64, depth int) (rawObject, error) {
	key := baseKey{idx, off}
	if o, ok := r.bases[key]; ok {
		return o, nil
	}
	if depth > maxDeltaDepth || off < 12 || off >= int64(len(data)) {
		return rawObject{}, fmt.Errorf("offset %d: %w", off, ErrBadPack)
	}
	p := data[off:]
	c := p[0]
	t, size, i := plumbing.ObjectType((c>>4)&7), int64(c&15), 1
	for shift := 4; c&0x80 != 0; shift += 7 {
		if i >= len(p) || shift > 56 {
			return rawObject{}, fmt.Errorf("header at %d: %w", off, ErrBadPack)
		}
		c = p[i]
		size |= int64(c&0x7f) << shift
		i++
	}
	var base rawObject
	var err error
	switch t {
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	case plumbing.OFSDeltaObject:
		var rel int64
		if rel, i, err = ofsDelta(p, i); err == nil {
			base, err = r.at(idx, data, off-rel, depth+1)
		}
	case plumbing.REFDeltaObject:
		if i+20 > len(p) {
			return rawObject{}, fmt.Errorf("ref delta at %d: %w", off, ErrBadPack)
		}
		var bh plumbing.Hash
		copy(bh[:], p[i:i+20])
		i += 20
		base.t, base.b, err = r.Read(bh)
	default:
		return rawObject{}, fmt.Errorf("type %d at %d: %w", t, off, ErrBadPack)
	}
	if err != nil {
		return rawObject{}, err
	}
	body, err := r.inflate(p[i:], size)
	if err != nil {
		return rawObject{}, fmt.Errorf("object at %d: %w", off, err)
	}
	o := rawObject{t: t, b: body}
	if t == plumbing.OFSDeltaObject || t == plumbing.REFDeltaObject {
		if o.b, err = packfile.PatchDelta(base.b, body); err != nil {
			return rawObject{}, fmt.Errorf("delta at %d: %w", off, err)
		}
		o.t = base.t
	}
	if depth > 0 { // only bases are kept: most are asked for again by the next delta
		r.keep(key, o)
	}
	return o, nil
}

// ofsDelta reads an OFS_DELTA's base distance at p[i:].
func ofsDelta(p []byte, i int) (int64, int, error) {
	if i >= len(p) {
		return 0, i, ErrBadPack
	}
	c := p[i]
	rel := int64(c & 0x7f)
	for i++; c&0x80 != 0; i++ {
		if i >= len(p) || rel > 1<<55 {
			return 0, i, ErrBadPack
		}
		c = p[i]
		rel = (rel+1)<<7 | int64(c&0x7f)
	}
	return rel, i, nil
}

func (r *RawReader) inflate(z []byte, size int64) ([]byte, error) {
	if size > 1<<31 {
		return nil, fmt.Errorf("%d bytes: %w", size, ErrObjectTooBig)
	}
	r.br.Reset(z)
	var err error
	if r.zr == nil {
		r.zr, err = zlib.NewReader(&r.br)
	} else {
		err = r.zr.(zlib.Resetter).Reset(&r.br, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	out := make([]byte, size)
	if _, err := io.ReadFull(r.zr, out); err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	return out, nil
}

// keep caches a base; when the budget is spent the cache starts over (a walk moves on
// down the history, so old bases are rarely asked for again).
func (r *RawReader) keep(k baseKey, o rawObject) {
	if len(o.b) > r.budget/4 {
		return
	}
	if r.used+len(o.b) > r.budget {
		clear(r.bases)
		r.used = 0
	}
	r.bases[k] = o
	r.used += len(o.b)
}

func (r *RawReader) loose(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	f, rd, t, size, err := r.s.openLoose(h)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	defer rd.Close()
	if size > 1<<31 {
		return 0, nil, fmt.Errorf("%s: %d bytes: %w", h, size, ErrObjectTooBig)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(rd, b); err != nil {
		return 0, nil, fmt.Errorf("loose object %s: %w", h, err)
	}
	return t, b, nil
}
