package gitstore

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/klauspost/compress/zlib"
	"github.com/memd-dev/memd/internal/workpool"
)

// Object writing. We write loose objects ourselves instead of through
// go-git's storer for one reason: durability order. A ref must never point
// at an object a crash (SIGKILL, power loss) can lose. go-git neither fsyncs
// loose objects nor lets us batch that. So each new object goes to a temp
// file next to its final place; at flush all temp files are fsynced (in
// parallel, so the filesystem can merge them into few journal commits), then
// renamed into place, then their directories fsynced — and only then does
// the caller move the ref. An object that already exists (loose or packed)
// is not written again.

// ObjectBatch collects the objects written for one commit (or one merge) into the
// repository whose git directory is gitDir; s is its object store, asked whether an
// object is already there (packed).
type ObjectBatch struct {
	gitDir  string
	s       storer.EncodedObjectStorer // nil: every object is written (NewObjectBatchAll)
	pending []pendingObject
	seen    map[plumbing.Hash]bool
}

type pendingObject struct {
	tmp, final string
}

// NewObjectBatch starts a batch of objects for the repository at gitDir with store s.
func NewObjectBatch(gitDir string, s storer.EncodedObjectStorer) *ObjectBatch {
	return &ObjectBatch{gitDir: gitDir, s: s, seen: make(map[plumbing.Hash]bool)}
}

// NewObjectBatchAll starts a batch that writes every object, also one the repository at
// gitDir holds already: a loose object written again has a new mtime, so the repository's
// gc does not prune it as an old unreachable one just as a ref comes to name it (git
// freshens an object it writes again for the same reason). For a repository others write
// to (a file remote's).
func NewObjectBatchAll(gitDir string) *ObjectBatch {
	return &ObjectBatch{gitDir: gitDir, seen: make(map[plumbing.Hash]bool)}
}

// zlibPool reuses compressors: a new flate writer allocates ~1 MB, which
// was a sixth of a small commit's CPU time.
var zlibPool = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return zw
}}

func getZlib(w io.Writer) *zlib.Writer {
	zw := zlibPool.Get().(*zlib.Writer)
	zw.Reset(w)
	return zw
}

// HashObject computes the git object id of content of type t.
func HashObject(t plumbing.ObjectType, content []byte) plumbing.Hash {
	h := sha1.New()
	h.Write(objectHeader(t, int64(len(content))))
	h.Write(content)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

func objectHeader(t plumbing.ObjectType, size int64) []byte {
	b := make([]byte, 0, 32)
	b = append(b, t.String()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, size, 10)
	return append(b, 0)
}

func (b *ObjectBatch) objectPath(h plumbing.Hash) string {
	s := h.String()
	return filepath.Join(b.gitDir, "objects", s[:2], s[2:])
}

// has reports whether the object store already holds h (loose or packed).
func (b *ObjectBatch) has(h plumbing.Hash) bool {
	if b.seen[h] {
		return true
	}
	if b.s == nil {
		return false
	}
	if _, err := os.Lstat(b.objectPath(h)); err == nil {
		return true
	}
	return b.s.HasEncodedObject(h) == nil
}

// Write stores content as an object of type t (if not present) and returns
// its id. The object is durable only after Flush.
func (b *ObjectBatch) Write(t plumbing.ObjectType, content []byte) (plumbing.Hash, error) {
	h := HashObject(t, content)
	if b.has(h) {
		return h, nil
	}
	final := b.objectPath(h)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return h, fmt.Errorf("write object %s: %w", h, err)
	}
	f, err := os.CreateTemp(filepath.Dir(final), "tmp_obj_memd_")
	if err != nil {
		return h, fmt.Errorf("write object %s: %w", h, err)
	}
	zw := getZlib(f)
	_, err = zw.Write(objectHeader(t, int64(len(content))))
	if err == nil {
		_, err = zw.Write(content)
	}
	if err == nil {
		err = zw.Close()
	}
	zlibPool.Put(zw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return h, fmt.Errorf("write object %s: %w", h, err)
	}
	b.seen[h] = true
	b.pending = append(b.pending, pendingObject{tmp: f.Name(), final: final})
	return h, nil
}

// WriteBlobStream stores a large file as a blob in one pass (hash and
// compress together), so it is never held in memory whole. want, when not
// zero, is the id the caller expects; a different result (the file changed
// under us) is still stored and returned.
func (b *ObjectBatch) WriteBlobStream(src io.Reader, size int64) (plumbing.Hash, error) {
	dir := filepath.Join(b.gitDir, "objects")
	f, err := os.CreateTemp(dir, "tmp_obj_memd_")
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	hs := sha1.New()
	zw := getZlib(f)
	defer zlibPool.Put(zw)
	// The header carries the size; a file that grows or shrinks while we
	// read makes a wrong object, so copy exactly size bytes and fail on
	// a short read.
	hdr := objectHeader(plumbing.BlobObject, size)
	hs.Write(hdr)
	_, err = zw.Write(hdr)
	if err == nil {
		var n int64
		n, err = io.Copy(io.MultiWriter(zw, hs), io.LimitReader(src, size))
		if err == nil && n != size {
			err = fmt.Errorf("file changed while reading (%d of %d bytes)", n, size)
		}
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	var h plumbing.Hash
	copy(h[:], hs.Sum(nil))
	if b.has(h) {
		_ = os.Remove(f.Name())
		return h, nil
	}
	final := b.objectPath(h)
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		_ = os.Remove(f.Name())
		return h, fmt.Errorf("write blob %s: %w", h, err)
	}
	b.seen[h] = true
	b.pending = append(b.pending, pendingObject{tmp: f.Name(), final: final})
	return h, nil
}

// Flush makes every written object durable and visible: fsync the temp
// files, rename them into place, fsync their directories. The fsyncs run in
// parallel: the filesystem folds concurrent fsyncs into few journal commits
// (measured here: 25 sequential fsyncs 55 ms, 25 parallel 1-3 ms).
func (b *ObjectBatch) Flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	tmps := make([]string, len(b.pending))
	for i, p := range b.pending {
		tmps[i] = p.tmp
	}
	if err := parallelFsync(tmps); err != nil {
		b.Discard()
		return fmt.Errorf("fsync objects: %w", err)
	}
	seenDir := make(map[string]bool)
	dirs := []string{filepath.Join(b.gitDir, "objects")} // new fan-out dirs
	for _, p := range b.pending {
		if err := os.Rename(p.tmp, p.final); err != nil {
			// Another writer may have created the same object (a
			// content-addressed name): that is fine.
			if _, serr := os.Lstat(p.final); serr != nil {
				b.Discard()
				return fmt.Errorf("install object %s: %w", p.final, err)
			}
			_ = os.Remove(p.tmp)
		}
		for _, d := range []string{filepath.Dir(p.final), filepath.Dir(p.tmp)} {
			if !seenDir[d] {
				seenDir[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	b.pending = nil
	if err := parallelFsync(dirs); err != nil {
		return fmt.Errorf("fsync object dirs: %w", err)
	}
	return nil
}

// FsyncWorkers is how many fsyncs run at once: the filesystem folds concurrent fsyncs into
// few journal commits.
const FsyncWorkers = 16

// parallelFsync fsyncs files or directories with a few workers.
func parallelFsync(names []string) error {
	return workpool.Each(len(names), FsyncWorkers, func(i int) error { return FsyncPath(names[i]) })
}

// Discard removes temp files that were not installed.
func (b *ObjectBatch) Discard() {
	for _, p := range b.pending {
		_ = os.Remove(p.tmp)
	}
	b.pending = nil
}

// FsyncPath fsyncs a file or a directory (the one helper: sync/gitrepair uses it too).
// Filesystems that cannot fsync a
// directory (EINVAL) are tolerated.
func FsyncPath(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil && !errors.Is(err, os.ErrInvalid) && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// BlobHasher streams content of a known size into a blob id.
type BlobHasher struct{ h hash.Hash }

// NewBlobHasher starts the id of a blob of size bytes.
func NewBlobHasher(size int64) *BlobHasher {
	h := sha1.New()
	h.Write(objectHeader(plumbing.BlobObject, size))
	return &BlobHasher{h: h}
}

func (b *BlobHasher) Write(p []byte) (int, error) { return b.h.Write(p) }

// Sum is the blob id of what was written.
func (b *BlobHasher) Sum() plumbing.Hash {
	var out plumbing.Hash
	copy(out[:], b.h.Sum(nil))
	return out
}

var treeBufPool = sync.Pool{New: func() any { return new([]byte) }}

// AppendTree appends the tree object encoding of es to b.
func AppendTree(b []byte, es []object.TreeEntry) []byte {
	n := 0
	for _, e := range es {
		n += len(e.Name) + 28
	}
	b = slices.Grow(b, n)
	for _, e := range es {
		b = strconv.AppendUint(b, uint64(e.Mode), 8)
		b = append(b, ' ')
		b = append(b, e.Name...)
		b = append(b, 0)
		b = append(b, e.Hash[:]...)
	}
	return b
}

// RawObject is one whole object for WritePack.
type RawObject struct {
	Hash    plumbing.Hash
	Type    plumbing.ObjectType
	Content []byte
}

// WritePack stores objs as one pack with its index in gitDir's objects/pack, as git's
// index-pack would keep a fetch: one file and one fsync for the lot, where loose objects
// cost a file, a rename and an fsync each (hundreds per fetch when ten machines write at
// once). Each object is whole (no deltas) and its Hash is taken as given: the caller has
// checked it (Storage.ReadBounded). The pack is renamed into place before its index, which
// is what makes a reader see it (Storage.packIndexes), and both are durable, with the
// directory, before WritePack returns: a ref may then name what they hold. The caller
// makes its Storage list packs again (Reindex).
func WritePack(gitDir string, objs []RawObject) error {
	if len(objs) == 0 {
		return nil
	}
	dir := filepath.Join(gitDir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	pack, entries, sum, err := encodePack(objs)
	if err != nil {
		return err
	}
	idx := encodePackIndex(entries, sum)

	name := filepath.Join(dir, "pack-"+plumbing.Hash(sum).String())
	if _, err := os.Lstat(name + ".idx"); err == nil {
		return nil // the same objects in the same order: already here
	}
	return installPack(dir, name, pack, idx)
}

// packEntry is where WritePack put one object in its pack, for the index.
type packEntry struct {
	h   plumbing.Hash
	off uint64
	crc uint32
}

// encodePack encodes objs, whole and in order, as a version 2 pack with its trailing
// checksum, and returns the entries the index needs. Its errors are WritePack's: a pack
// too big for a 4-byte offset index is one.
func encodePack(objs []RawObject) ([]byte, []packEntry, [sha1.Size]byte, error) {
	var pack bytes.Buffer
	pack.WriteString("PACK")
	pack.Write(binary.BigEndian.AppendUint32(nil, 2))
	pack.Write(binary.BigEndian.AppendUint32(nil, uint32(len(objs))))
	entries := make([]packEntry, 0, len(objs))
	for _, o := range objs {
		start := pack.Len()
		writePackEntryHeader(&pack, o.Type, uint64(len(o.Content)))
		zw := getZlib(&pack)
		_, err := zw.Write(o.Content)
		if err == nil {
			err = zw.Close()
		}
		zlibPool.Put(zw)
		if err != nil {
			return nil, nil, [sha1.Size]byte{}, fmt.Errorf("write pack: %w", err)
		}
		entries = append(entries, packEntry{h: o.Hash, off: uint64(start), crc: crc32.ChecksumIEEE(pack.Bytes()[start:])})
	}
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	if pack.Len() >= 1<<31 {
		return nil, nil, [sha1.Size]byte{}, fmt.Errorf("write pack: %d bytes: over what a 4-byte offset index holds", pack.Len())
	}
	return pack.Bytes(), entries, sum, nil
}

// writePackEntryHeader writes a pack entry's header to pack.
func writePackEntryHeader(pack *bytes.Buffer, typ plumbing.ObjectType, size uint64) {
	// The entry header: type and size, 4 bits then 7 at a time, low bits first.
	c := byte(typ)<<4 | byte(size&0x0f)
	for size >>= 4; size > 0; size >>= 7 {
		pack.WriteByte(c | 0x80)
		c = byte(size & 0x7f)
	}
	pack.WriteByte(c)
}

// encodePackIndex encodes the index of the pack whose checksum is sum and whose objects
// are entries (which it sorts by name).
func encodePackIndex(entries []packEntry, sum [sha1.Size]byte) []byte {
	// The index, version 2: fan-out, names in order, CRCs, offsets, the pack's checksum.
	slices.SortFunc(entries, func(a, b packEntry) int { return bytes.Compare(a.h[:], b.h[:]) })
	var idx bytes.Buffer
	idx.Write([]byte{0xff, 't', 'O', 'c'})
	idx.Write(binary.BigEndian.AppendUint32(nil, 2))
	var fan [256]uint32
	for _, e := range entries {
		fan[e.h[0]]++
	}
	n := uint32(0)
	for i := range fan {
		n += fan[i]
		idx.Write(binary.BigEndian.AppendUint32(nil, n))
	}
	for _, e := range entries {
		idx.Write(e.h[:])
	}
	for _, e := range entries {
		idx.Write(binary.BigEndian.AppendUint32(nil, e.crc))
	}
	for _, e := range entries {
		idx.Write(binary.BigEndian.AppendUint32(nil, uint32(e.off)))
	}
	idx.Write(sum[:])
	isum := sha1.Sum(idx.Bytes())
	idx.Write(isum[:])
	return idx.Bytes()
}

// installPack makes pack and idx durable as name.pack and name.idx in dir: both written
// to temporary files and fsynced, then renamed into place, the pack before its index (a
// reader sees a pack by its index), then dir fsynced. A temporary file left by an error
// is removed.
func installPack(dir, name string, pack, idx []byte) error {
	var tmps []string
	defer func() {
		for _, t := range tmps {
			_ = os.Remove(t)
		}
	}()
	write := func(b []byte, suffix string) (string, error) {
		f, err := os.CreateTemp(dir, "tmp_pack_memd_*"+suffix)
		if err != nil {
			return "", err
		}
		tmps = append(tmps, f.Name())
		_, err = f.Write(b)
		if err == nil {
			err = f.Chmod(0o444)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return f.Name(), err
	}
	tp, err := write(pack, ".pack")
	if err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	ti, err := write(idx, ".idx")
	if err != nil {
		return fmt.Errorf("write pack index: %w", err)
	}
	// Both at once: the filesystem folds them into one journal commit.
	if err := parallelFsync([]string{tp, ti}); err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	if err := os.Rename(tp, name+".pack"); err != nil {
		return fmt.Errorf("install pack: %w", err)
	}
	if err := os.Rename(ti, name+".idx"); err != nil {
		return fmt.Errorf("install pack index: %w", err)
	}
	tmps = nil
	return FsyncPath(dir)
}
