package sleep

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd/format/memfile"
)

// The parse cache, <state>/sleep-parse.bin: for every memory file, the stat it had when it
// was read, a hash of the bytes that were parsed, and the part of the parse the planners
// use. It is only a cache: unreadable, old-version or missing means parse everything.
//
// A compact hand-rolled format, not gob: at 100k files gob's decode (reflection, a map
// and an allocation per string) cost more than the walk. Entries are sorted by path, so a
// load is a merge with the sorted walk: no map, and entries whose file is gone or changed
// are skipped without being decoded. All strings of a load share the one copy of the file.
const (
	parseCacheName    = "sleep-parse.bin"
	oldParseCacheName = "sleep-parse.gob" // the gob cache of earlier versions; removed on save
	parseCacheMagic   = "memd sleep parse cache\n"
	parseCacheVersion = 5 // 5: the author meta and validity (arcs need both)
	// racyWindow: a file whose mtime or ctime is this close to (or after) the moment its
	// stat was taken may be written again within the same timestamp tick without its stat
	// changing, so its stat alone proves nothing (git's racy-clean rule, with margin for
	// coarse filesystem clocks).
	racyWindow = int64(2 * time.Second)
)

// retiredStateFiles are caches of earlier versions (the gob parse cache; the idle record and
// its walk, retired with the idle-run target): removed when the parse cache is saved.
var retiredStateFiles = []string{oldParseCacheName, "sleep-idle.json", "sleep-idle.walk"}

// contentHash identifies the bytes a cached parse came from.
type contentHash [16]byte

func hashContent(b []byte) contentHash {
	sum := sha256.Sum256(b)
	return contentHash(sum[:16])
}

// cacheKey is what the snapshot knows about where a parse came from.
type cacheKey struct {
	st      fileStat
	statted bool
	hash    contentHash
	hashed  bool // false: the parse came from ParseMemoryFile (oversize, odd file): stat only
}

// cacheEntry is one entry of a loaded cache, not yet decoded.
type cacheEntry struct {
	path    string
	st      fileStat
	hash    contentHash
	hashed  bool
	payload string
}

// cacheReader walks a cache file's entries in order.
type cacheReader struct {
	data  string
	pos   int
	left  int
	count int // entries in the file
	saved int64
	err   error
	cur   cacheEntry
	ok    bool // cur holds an entry
}

var errBadCache = errors.New("parse cache is corrupt")

// openParseCache reads the cache file; nil when there is none or it is unusable.
func openParseCache(dir string) *cacheReader {
	b, err := readFileString(filepath.Join(dir, parseCacheName))
	if err != nil || !strings.HasPrefix(b, parseCacheMagic) {
		return nil
	}
	r := &cacheReader{data: b, pos: len(parseCacheMagic)}
	if v := r.uvarint(); v != parseCacheVersion {
		return nil
	}
	r.saved = r.varint()
	r.count = int(min(r.uvarint(), uint64(len(r.data))))
	r.left = r.count
	if r.err != nil {
		return nil
	}
	r.next()
	return r
}

// next moves to the following entry (ok false at the end or on corruption).
func (r *cacheReader) next() {
	r.ok = false
	if r.left <= 0 || r.err != nil {
		return
	}
	r.left--
	var e cacheEntry
	e.path = r.str()
	e.st.Size = r.varint()
	e.st.Mtime = r.varint()
	e.st.Ctime = r.varint()
	e.st.Ino = r.uvarint()
	if r.byte() == 1 {
		e.hashed = true
		copy(e.hash[:], r.take(len(e.hash)))
	}
	e.payload = r.str()
	if r.err != nil {
		return
	}
	if r.cur.path != "" && e.path <= r.cur.path {
		r.err = errBadCache // not sorted: the merge would miss entries
		return
	}
	r.cur, r.ok = e, true
}

// seek advances to the entry for p, if there is one (p must not decrease between calls).
func (r *cacheReader) seek(p string) (cacheEntry, bool) {
	for r.ok && r.cur.path < p {
		r.next()
	}
	if r.ok && r.cur.path == p {
		return r.cur, true
	}
	return cacheEntry{}, false
}

func (r *cacheReader) fail() {
	if r.err == nil {
		r.err = errBadCache
	}
}

func (r *cacheReader) byte() byte {
	if r.err != nil || r.pos >= len(r.data) {
		r.fail()
		return 0
	}
	r.pos++
	return r.data[r.pos-1]
}

func (r *cacheReader) uvarint() uint64 {
	var x uint64
	for shift := 0; shift < 64; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
	r.fail()
	return 0
}

func (r *cacheReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (r *cacheReader) take(n int) string {
	if r.err != nil || n < 0 || n > len(r.data)-r.pos {
		r.fail()
		return ""
	}
	s := r.data[r.pos : r.pos+n]
	r.pos += n
	return s
}

func (r *cacheReader) str() string { return r.take(int(min(r.uvarint(), uint64(len(r.data))))) }

// memSlab hands out Memory structs and their slices from a few large allocations: one
// allocation per file was most of a cached load's time.
type memSlab struct {
	mems  []memfile.Memory
	strs  []string
	links []memfile.Link
}

func (a *memSlab) mem() *memfile.Memory {
	if len(a.mems) == 0 {
		a.mems = make([]memfile.Memory, 1024)
	}
	m := &a.mems[0]
	a.mems = a.mems[1:]
	return m
}

func (a *memSlab) strings(n int) []string {
	if n == 0 {
		return nil
	}
	if len(a.strs) < n {
		a.strs = make([]string, max(n, 4096))
	}
	s := a.strs[:n:n]
	a.strs = a.strs[n:]
	return s
}

func (a *memSlab) linkSlice(n int) []memfile.Link {
	if n == 0 {
		return nil
	}
	if len(a.links) < n {
		a.links = make([]memfile.Link, max(n, 4096))
	}
	s := a.links[:n:n]
	a.links = a.links[n:]
	return s
}

// cachedInvalid stands for the violations of a file the cache says is invalid.
const cachedInvalid = "invalid (its violations are not cached: memd doctor names them)"

// decodeMem rebuilds the planners' part of a parse from an entry's payload.
func decodeMem(payload string, slab *memSlab) (*memfile.Memory, error) {
	r := &cacheReader{data: payload}
	m := slab.mem()
	m.Type, m.Status, m.Title, m.Gist = r.str(), r.str(), r.str(), r.str()
	m.TaskStatus, m.Updated, m.ValidUntil = r.str(), r.str(), r.str()
	if members := r.str(); members != "" {
		m.Metas = map[string][]string{memfile.MetaMembers: {members}}
	}
	if author := r.str(); author != "" {
		if m.Metas == nil {
			m.Metas = map[string][]string{}
		}
		m.Metas[memfile.MetaAuthor] = []string{author}
	}
	if r.str() != "" {
		// Only whether the file is valid is kept: arcs list only members memhtml indexes.
		m.Violations = []string{cachedInvalid}
	}
	for _, t := range []*time.Time{&m.CreatedAt, &m.UpdatedAt, &m.EventAt, &m.ValidUntilAt} {
		if b := r.str(); b != "" && r.err == nil {
			if err := t.UnmarshalBinary([]byte(b)); err != nil {
				return nil, fmt.Errorf("%w: %v", errBadCache, err)
			}
		}
	}
	list := func() []string {
		n := int(min(r.uvarint(), uint64(len(payload))))
		out := slab.strings(n)
		for i := range out {
			out[i] = r.str()
		}
		return out
	}
	m.Entities = list()
	m.Tags = list()
	m.Refs = list()
	n := int(min(r.uvarint(), uint64(len(payload))))
	m.Links = slab.linkSlice(n)
	for i := range m.Links {
		m.Links[i] = memfile.Link{Rel: r.str(), Href: r.str()}
	}
	if r.err != nil || r.pos != len(payload) {
		return nil, errBadCache
	}
	return m, nil
}

// appendMem encodes what decodeMem reads back.
func appendMem(b []byte, m *memfile.Memory) ([]byte, error) {
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	str(m.Type)
	str(m.Status)
	str(m.Title)
	str(m.Gist)
	str(m.TaskStatus)
	str(m.Updated)
	str(m.ValidUntil)
	str(m.Meta(memfile.MetaMembers))
	str(m.Meta(memfile.MetaAuthor))
	if m.Valid() {
		str("")
	} else {
		str("x")
	}
	for _, t := range []time.Time{m.CreatedAt, m.UpdatedAt, m.EventAt, m.ValidUntilAt} {
		if t == (time.Time{}) {
			str("")
			continue
		}
		// MarshalBinary keeps the zone offset: Year() of a time written with an offset
		// must come back the same.
		tb, err := t.MarshalBinary()
		if err != nil {
			return nil, err
		}
		str(string(tb))
	}
	for _, l := range [][]string{m.Entities, m.Tags, m.Refs} {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, s := range l {
			str(s)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Links)))
	for _, l := range m.Links {
		str(l.Rel)
		str(l.Href)
	}
	return b, nil
}

// writeParseCache writes the entries for paths (sorted) from mems and keys. saved is the
// wall-clock time the stats were taken at (the racy rule's reference). Streamed through a
// temp file renamed into place: at 100k files the cache is tens of MB (arcs list every
// member's link), and building it in one growing slice copied it several times.
func writeParseCache(dir string, saved int64, paths []string, mems map[string]*memfile.Memory, keys map[string]cacheKey) error {
	err := writeStateStream(dir, parseCacheName, 0o600, func(w *bufio.Writer) error {
		return encodeParseCache(w, saved, paths, mems, keys)
	})
	if err != nil {
		return fmt.Errorf("parse cache: %w", err)
	}
	_ = removeStateFiles(dir, retiredStateFiles...)
	return nil
}

func encodeParseCache(w *bufio.Writer, saved int64, paths []string, mems map[string]*memfile.Memory, keys map[string]cacheKey) (err error) {
	var b []byte
	b = append(b, parseCacheMagic...)
	b = binary.AppendUvarint(b, parseCacheVersion)
	b = binary.AppendVarint(b, saved)
	type entry struct {
		path string
		key  cacheKey
	}
	entries := make([]entry, 0, len(paths))
	for _, p := range paths {
		if k := keys[p]; k.statted {
			entries = append(entries, entry{p, k})
		}
	}
	b = binary.AppendUvarint(b, uint64(len(entries)))
	var payload []byte
	for _, e := range entries {
		p, k := e.path, e.key
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("parse cache: %w", err)
		}
		b = b[:0]
		if payload, err = appendMem(payload[:0], mems[p]); err != nil {
			return fmt.Errorf("parse cache: %s: %w", p, err)
		}
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		b = binary.AppendVarint(b, k.st.Size)
		b = binary.AppendVarint(b, k.st.Mtime)
		b = binary.AppendVarint(b, k.st.Ctime)
		b = binary.AppendUvarint(b, k.st.Ino)
		if k.hashed {
			b = append(b, 1)
			b = append(b, k.hash[:]...)
		} else {
			b = append(b, 0)
		}
		b = binary.AppendUvarint(b, uint64(len(payload)))
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("parse cache: %w", err)
		}
		if _, err := w.Write(payload); err != nil {
			return fmt.Errorf("parse cache: %w", err)
		}
		b = b[:0]
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("parse cache: %w", err)
	}
	return nil
}

// fromCache takes from the parse cache (nil: none) the parses of the memory files (sorted)
// whose stat matches and is not racy, and returns the files left to read: those whose stat
// changed (or is racy) are read and, when their bytes hash as cached, not parsed again (a
// rename or a touch costs a read, not a parse).
func (s *snapshot) fromCache(pc *cacheReader, files []treeFile, slab *memSlab) []readJob {
	var work []readJob
	for _, f := range files {
		p, st, have := f.rel, f.st, f.statted
		var e cacheEntry
		var cached bool
		if pc != nil {
			e, cached = pc.seek(p)
		}
		if cached && have && e.st == st && st.stamp() < pc.saved-racyWindow {
			if m, err := decodeMem(e.payload, slab); err == nil {
				s.mems[p] = m
				s.keys[p] = cacheKey{st: st, statted: true, hash: e.hash, hashed: e.hashed}
				continue
			}
		}
		j := readJob{path: p, st: st, statted: have}
		if cached && e.hashed {
			j.cached, j.hash, j.payload = true, e.hash, e.payload
		}
		work = append(work, j)
	}
	return work
}

// noteCacheUse records how far the cache (nil: none) lags the walk: read of its files
// (memory files of the walk) were read past it.
func (s *snapshot) noteCacheUse(pc *cacheReader, read, files int) {
	// Every file a stat hit and as many entries as files: the cache is exactly current.
	s.cacheDirty = pc == nil || read > 0 || pc.count != files
	if pc == nil {
		s.stale = math.MaxInt // no cache at all: always write one
	} else {
		s.stale = read + max(pc.count-files, 0)
	}
}

// minCacheRewrite is how many stale entries always justify rewriting the parse cache; above
// it, a hundredth of the files does.
const minCacheRewrite = 256

// saveCacheIfWorth saves the cache unless the run applied nothing and only a few files
// were read past it (a day's writes): reading those again next time costs less than
// rewriting every entry (tens of MB at 100k files). The cache is only a cache: every entry
// is checked by stat (and content hash) when used, so a stale one costs a read, never a
// wrong parse.
func (s *snapshot) saveCacheIfWorth(dir string) error {
	if !s.applied && s.stale > 0 && s.stale <= max(minCacheRewrite, len(s.mems)/100) {
		return nil
	}
	return s.saveCache(dir)
}

// saveCache writes the parse cache for the tree as it is now (the run's own writes and
// moves included), when anything changed since it was read.
func (s *snapshot) saveCache(dir string) error {
	if !s.cacheDirty || s.virtual {
		return nil
	}
	if err := writeParseCache(dir, s.saved, s.memPaths(), s.mems, s.keys); err != nil {
		return err
	}
	s.cacheDirty = false
	return nil
}
