package gitstore

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// The index file, written the way go-git's encoder writes it (version 2, no extensions,
// entries sorted by name, SHA-1 trailer) but without its reflection-based per-field
// binary.Write, which costs ~90 ms of CPU and ~40 MB of garbage per write at 100k files.
// SpliceIndex rewrites a file memd wrote itself with only the changed paths' entries
// re-encoded, streaming: the rest is copied through, so a refresh after a one-file commit
// reads and writes the file once each and allocates nothing that grows with the repo.
// (git's format has no way to patch a file in place: the header counts the entries and the
// trailer hashes all of them.)

const (
	indexHeaderLen   = 12
	indexEntryFixed  = 62 // ctime..flags
	indexNameMask    = 0xfff
	indexFlagExtend  = 0x4000
	indexSignature   = "DIRC"
	indexTrailerSize = sha1.Size
)

// ErrNotSpliceable: the index file is not one SpliceIndex can copy from (a name of 4095
// bytes or more, a short or foreign file); do a full refresh instead.
var ErrNotSpliceable = errors.New("index file cannot be spliced")

// IndexEdit is one path's new entry; Entry nil removes the path.
type IndexEdit struct {
	Name  string
	Entry *index.Entry
}

// indexWriter hashes what it writes and appends the trailer in finish. In version 4 each
// name is written against the one before it (prev).
type indexWriter struct {
	w       *bufio.Writer
	h       hash.Hash
	buf     []byte
	version uint32
	prev    []byte
}

func newIndexWriter(w io.Writer) *indexWriter {
	h := sha1.New()
	return &indexWriter{w: bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10), h: h}
}

func (iw *indexWriter) header(version uint32, n int) error {
	var b [indexHeaderLen]byte
	copy(b[:4], indexSignature)
	binary.BigEndian.PutUint32(b[4:], version)
	binary.BigEndian.PutUint32(b[8:], uint32(n))
	iw.version = version
	_, err := iw.w.Write(b[:])
	return err
}

func (iw *indexWriter) entry(e *index.Entry) error {
	iw.buf = appendIndexEntry(iw.buf[:0], e)
	if iw.version == 4 {
		fixed := len(iw.buf) - indexPadded(len(e.Name))
		return iw.rawV4(iw.buf[:fixed], []byte(e.Name))
	}
	_, err := iw.w.Write(iw.buf)
	return err
}

// raw copies an entry read by rawEntries.next: its bytes as they were in version 2 or
// 3; in version 4 its fixed part and its name compressed against the entry written before.
func (iw *indexWriter) raw(b, fixed, name []byte) error {
	if iw.version == 4 {
		return iw.rawV4(fixed, name)
	}
	_, err := iw.w.Write(b)
	return err
}

// rawV4 writes a version-4 entry (read-cache.c's ce_write_entry): the fixed part, the
// number of bytes to drop from the end of the previous name (an offset varint), the rest
// of the name and a NUL; no padding.
func (iw *indexWriter) rawV4(fixed, name []byte) error {
	common := 0
	for common < len(name) && common < len(iw.prev) && name[common] == iw.prev[common] {
		common++
	}
	if _, err := iw.w.Write(fixed); err != nil {
		return err
	}
	var v [16]byte
	if _, err := iw.w.Write(appendVarint(v[:0], uint64(len(iw.prev)-common))); err != nil {
		return err
	}
	if _, err := iw.w.Write(name[common:]); err != nil {
		return err
	}
	iw.prev = append(iw.prev[:0], name...)
	return iw.w.WriteByte(0)
}

// appendVarint is git's encode_varint (varint.c): 7 bits a byte, most significant first,
// each continued byte one less, so every value has one encoding.
func appendVarint(b []byte, v uint64) []byte {
	var tmp [16]byte
	pos := len(tmp) - 1
	tmp[pos] = byte(v & 127)
	for v >>= 7; v != 0; v >>= 7 {
		v--
		pos--
		tmp[pos] = 128 | byte(v&127)
	}
	return append(b, tmp[pos:]...)
}

// readVarint is git's decode_varint.
func readVarint(r *bufio.Reader) (uint64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	v := uint64(c & 127)
	for c&128 != 0 {
		if c, err = r.ReadByte(); err != nil {
			return 0, err
		}
		if v+1 > 1<<56 {
			return 0, ErrNotSpliceable
		}
		v = (v+1)<<7 + uint64(c&127)
	}
	return v, nil
}

// indexPadded is the name and padding of a version 2/3 entry: 1–8 NULs to a multiple of 8.
func indexPadded(nameLen int) int { return nameLen + 8 - (indexEntryFixed+nameLen)%8 }

// finish flushes and writes the trailer (the hash of everything before it).
func (iw *indexWriter) finish() error {
	if err := iw.w.Flush(); err != nil {
		return err
	}
	// The trailer hashes everything before it (it passes through the hash too, unused).
	sum := iw.h.Sum(nil)
	_, err := iw.w.Write(sum)
	if err == nil {
		err = iw.w.Flush()
	}
	return err
}

// WriteIndex writes a complete version-2 index of entries (sorted here by name).
func WriteIndex(w io.Writer, entries []*index.Entry) error {
	return WriteIndexVersion(w, 2, entries)
}

// WriteIndexVersion writes a complete index of entries in version 2, 3 or 4 (4: path
// prefix compression, as git writes with index.version 4 or feature.manyFiles).
func WriteIndexVersion(w io.Writer, version uint32, entries []*index.Entry) error {
	if version < 2 || version > 4 {
		return fmt.Errorf("write index: version %d", version)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	iw := newIndexWriter(w)
	if err := iw.header(version, len(entries)); err != nil {
		return err
	}
	for _, e := range entries {
		if err := iw.entry(e); err != nil {
			return err
		}
	}
	return iw.finish()
}

// appendIndexEntry encodes e as go-git's encoder does for versions 2 and 3 (stat data,
// mode, hash, flags, name, 1–8 NULs of padding to a multiple of 8).
func appendIndexEntry(b []byte, e *index.Entry) []byte {
	u32 := func(v uint32) { b = binary.BigEndian.AppendUint32(b, v) }
	t := func(sec, nsec int64) {
		if sec < 0 || nsec < 0 {
			sec, nsec = 0, 0 // go-git refuses these; zero stat data makes git re-check
		}
		u32(uint32(sec))
		u32(uint32(nsec))
	}
	if e.CreatedAt.IsZero() {
		t(0, 0)
	} else {
		t(e.CreatedAt.Unix(), int64(e.CreatedAt.Nanosecond()))
	}
	if e.ModifiedAt.IsZero() {
		t(0, 0)
	} else {
		t(e.ModifiedAt.Unix(), int64(e.ModifiedAt.Nanosecond()))
	}
	u32(e.Dev)
	u32(e.Inode)
	u32(uint32(e.Mode))
	u32(e.UID)
	u32(e.GID)
	u32(e.Size)
	b = append(b, e.Hash[:]...)
	flags := uint16(e.Stage&0x3) << 12
	flags |= uint16(min(len(e.Name), indexNameMask))
	b = binary.BigEndian.AppendUint16(b, flags)
	b = append(b, e.Name...)
	pad := 8 - (indexEntryFixed+len(e.Name))%8
	return append(b, make([]byte, pad)...)
}

// rawEntries reads the entries of an index file one by one, as bytes.
type rawEntries struct {
	r       *bufio.Reader
	version uint32
	count   int
	buf     []byte
	name    []byte // version 4: the entry's whole name (its bytes hold only a suffix)
	fixed   []byte // the entry's fixed part (stat data to flags), valid until the next call
}

func readRawHeader(r *bufio.Reader) (*rawEntries, error) {
	var h [indexHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, ErrNotSpliceable
	}
	v := binary.BigEndian.Uint32(h[4:])
	if string(h[:4]) != indexSignature || v < 2 || v > 4 {
		return nil, ErrNotSpliceable
	}
	return &rawEntries{r: r, version: v, count: int(binary.BigEndian.Uint32(h[8:])), buf: make([]byte, 0, 512)}, nil
}

// next returns the next entry's bytes (padding included) and its name; both are valid
// until the next call.
func (x *rawEntries) next() (raw, name []byte, err error) {
	b := x.buf[:indexEntryFixed]
	if _, err := io.ReadFull(x.r, b); err != nil {
		return nil, nil, ErrNotSpliceable
	}
	flags := binary.BigEndian.Uint16(b[60:])
	hdr := indexEntryFixed
	if flags&indexFlagExtend != 0 {
		if x.version < 3 {
			return nil, nil, ErrNotSpliceable
		}
		hdr += 2
	}
	n := int(flags & indexNameMask)
	if n == indexNameMask {
		return nil, nil, ErrNotSpliceable
	}
	if x.version == 4 {
		return x.nextV4(hdr, n)
	}
	total := hdr + n
	total += 8 - total%8
	if cap(x.buf) < total {
		nb := make([]byte, total)
		copy(nb, b)
		x.buf = nb[:0]
	}
	b = x.buf[:total]
	if _, err := io.ReadFull(x.r, b[indexEntryFixed:]); err != nil {
		return nil, nil, ErrNotSpliceable
	}
	x.fixed = b[:hdr]
	return b, b[hdr : hdr+n], nil
}

// nextV4 reads the rest of a version-4 entry whose fixed part (hdr bytes, read up to the
// flags) is in x.buf: the extended flags, then the name as a count of bytes dropped from
// the previous name and a NUL-terminated suffix. raw is the fixed part only; the name is
// the whole one, of n bytes as the flags say.
func (x *rawEntries) nextV4(hdr, n int) (raw, name []byte, err error) {
	if hdr > indexEntryFixed {
		b := x.buf[:hdr]
		if _, err := io.ReadFull(x.r, b[indexEntryFixed:]); err != nil {
			return nil, nil, ErrNotSpliceable
		}
	}
	x.fixed = x.buf[:hdr]
	drop, err := readVarint(x.r)
	if err != nil || drop > uint64(len(x.name)) {
		return nil, nil, ErrNotSpliceable
	}
	suffix, err := x.r.ReadSlice(0)
	if err != nil {
		return nil, nil, ErrNotSpliceable
	}
	x.name = append(x.name[:len(x.name)-int(drop)], suffix[:len(suffix)-1]...)
	if len(x.name) != n {
		return nil, nil, ErrNotSpliceable
	}
	return x.fixed, x.name, nil
}

// SpliceIndex copies the index file src to w with edits (sorted by name, one per name)
// applied, in two streaming passes over src: the first finds which edited names src has,
// for the entry count in the header; the second copies. Extensions in src are dropped (a
// file memd wrote has none). It returns the number of entries written.
func SpliceIndex(src io.ReadSeeker, w io.Writer, edits []IndexEdit) (int, error) {
	if !sort.SliceIsSorted(edits, func(i, j int) bool { return edits[i].Name < edits[j].Name }) {
		return 0, fmt.Errorf("splice index: edits not sorted")
	}
	br := bufio.NewReaderSize(src, 256<<10)
	// pass walks src merging the edits in; emit gets each output entry (raw bytes or an
	// edit's entry).
	pass := func(emit func(x *rawEntries, raw []byte, e *index.Entry) error) (*rawEntries, error) {
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		br.Reset(src)
		x, err := readRawHeader(br)
		if err != nil {
			return nil, err
		}
		i := 0
		for k := 0; k < x.count; k++ {
			raw, name, err := x.next()
			if err != nil {
				return nil, err
			}
			for i < len(edits) && edits[i].Name < string(name) {
				if edits[i].Entry != nil {
					if err := emit(x, nil, edits[i].Entry); err != nil {
						return nil, err
					}
				}
				i++
			}
			if i < len(edits) && edits[i].Name == string(name) {
				if edits[i].Entry != nil {
					if err := emit(x, nil, edits[i].Entry); err != nil {
						return nil, err
					}
				}
				i++
				continue
			}
			if err := emit(x, raw, nil); err != nil {
				return nil, err
			}
		}
		for ; i < len(edits); i++ {
			if edits[i].Entry != nil {
				if err := emit(x, nil, edits[i].Entry); err != nil {
					return nil, err
				}
			}
		}
		return x, nil
	}
	n := 0
	x, err := pass(func(*rawEntries, []byte, *index.Entry) error { n++; return nil })
	if err != nil {
		return 0, err
	}
	iw := newIndexWriter(w)
	if err := iw.header(x.version, n); err != nil {
		return 0, err
	}
	if _, err := pass(func(x *rawEntries, raw []byte, e *index.Entry) error {
		if e != nil {
			return iw.entry(e)
		}
		return iw.raw(raw, x.fixed, x.name)
	}); err != nil {
		return 0, err
	}
	return n, iw.finish()
}

// PlainIndexFile reports whether the index file at path holds entries SpliceIndex can copy
// and nothing else (no extensions), i.e. it can be kept as HEAD's index and spliced later.
func PlainIndexFile(path string) bool {
	return scanIndexFile(path, func([]byte) bool { return true }, func(ext []byte) bool { return len(ext) == 0 })
}

// SpliceableIndexFile reports whether SpliceIndex can copy the index file at path, which a
// git may have written: its entries are ones SpliceIndex copies, and every extension after
// them is optional (a signature starting with 'A'..'Z': git's format lets a reader ignore
// it, as SpliceIndex drops it). A required one (the split index's "link", the sparse
// index's "sdir") means entries live elsewhere, and an entry of a conflict's stage 1–3 has
// others of its name: no.
func SpliceableIndexFile(path string) bool {
	stage0 := func(raw []byte) bool {
		return binary.BigEndian.Uint16(raw[60:])>>12&3 == 0 // a conflict's stages (a `git stash pop` that stopped): SpliceIndex keys on names
	}
	return scanIndexFile(path, stage0, func(ext []byte) bool { return optionalExtensions(ext, nil) })
}

// optionalExtensions walks the extensions between an index's entries and its trailer,
// calling each (if not nil) with a signature and body; false if one is required (a
// signature not starting with 'A'..'Z') or does not decode.
func optionalExtensions(ext []byte, each func(sig string, body []byte)) bool {
	for len(ext) > 0 {
		if len(ext) < 8 || ext[0] < 'A' || ext[0] > 'Z' {
			return false
		}
		n := binary.BigEndian.Uint32(ext[4:8])
		if uint64(n) > uint64(len(ext)-8) {
			return false
		}
		if each != nil {
			each(string(ext[:4]), ext[8:8+n])
		}
		ext = ext[8+n:]
	}
	return true
}

// scanIndexFile reads the index file at path as SpliceIndex would: every entry must decode
// and pass entryOK, and extOK judges the extensions between the entries and the trailer.
func scanIndexFile(path string, entryOK func(raw []byte) bool, extOK func(ext []byte) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	x, err := readRawHeader(br)
	if err != nil {
		return false
	}
	for k := 0; k < x.count; k++ {
		raw, _, err := x.next()
		if err != nil || !entryOK(raw) {
			return false
		}
	}
	rest, err := io.ReadAll(br)
	if err != nil || len(rest) < indexTrailerSize {
		return false
	}
	return extOK(rest[:len(rest)-indexTrailerSize])
}

// IndexFileIsTree reports whether the index file at path is exactly tree's index, as its
// own cache-tree extension ("TREE", which git keeps in step with every change to the
// entries, invalidating the nodes along a changed path) says: the root node is valid,
// counts every entry of the file, and names tree. It must also be a file SpliceIndex can
// copy (SpliceableIndexFile). A checkout that does not know the index (a fresh process,
// a `git clone`'s or a `git pull`'s file) then splices the paths it changed into it, as
// git's checkout does, instead of walking the whole tree. A file without the extension
// (memd's own) or with an invalidated root: false.
func IndexFileIsTree(path string, tree [sha1.Size]byte) bool {
	entries := 0
	ok := scanIndexFile(path, func(raw []byte) bool {
		entries++
		return binary.BigEndian.Uint16(raw[60:])>>12&3 == 0
	}, func(ext []byte) bool {
		found := false
		return optionalExtensions(ext, func(sig string, body []byte) {
			if sig == "TREE" {
				found = rootTreeIs(body, entries, tree)
			}
		}) && found
	})
	return ok
}

// rootTreeIs parses the root node of a cache-tree extension: "" NUL, entry count (-1:
// invalid) SP subtree count LF, and for a valid node its tree id.
func rootTreeIs(b []byte, entries int, tree [sha1.Size]byte) bool {
	if len(b) < 1 || b[0] != 0 {
		return false // the root's path is empty
	}
	b = b[1:]
	sp := bytes.IndexByte(b, ' ')
	lf := bytes.IndexByte(b, '\n')
	if sp <= 0 || lf <= sp {
		return false
	}
	n, err := strconv.Atoi(string(b[:sp]))
	if err != nil || n != entries || n < 0 {
		return false
	}
	b = b[lf+1:]
	return len(b) >= sha1.Size && bytes.Equal(b[:sha1.Size], tree[:])
}

// IndexFileVersion is the version (2, 3 or 4) in the header of the index file at path; 0
// when there is no such file or it is not an index git writes.
func IndexFileVersion(path string) uint32 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var h [8]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:4]) != indexSignature {
		return 0
	}
	if v := binary.BigEndian.Uint32(h[4:]); v >= 2 && v <= 4 {
		return v
	}
	return 0
}
