package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// Storage is go-git's filesystem storage with its object reads taken over: loose objects
// are read as go-git reads them, packed ones through a PackIndex per pack, so the heap does
// not grow with the objects a repository gains (go-git keeps every pack's whole index on
// the heap; see PackIndex). References, the index, config and object writes stay go-git's.
//
// Every method of go-git's ObjectStorage that would load its own indexes is overridden
// here; the one exception is a repository with alternates, whose objects EncodedObject
// looks up through go-git's when they are not here (memd never creates one; `git clone
// --shared` does), as HasEncodedObject does on a miss (whether there are alternates is read
// once per Reindex, so a commit's existence checks cost no read of objects/info/alternates).
// EncodedObjectSize looks only here. In a partial clone a blob EncodedObject misses is
// fetched first (SetLazyFetch). Safe for concurrent use, as go-git's storage is.
type Storage struct {
	*filesystem.Storage
	gitDir      string
	dot         *dotgit.DotGit
	cache       cache.Object
	largeObject int64

	mu    sync.Mutex
	packs []*PackIndex // nil until a packed object is wanted and after a Reindex
	// open keeps each pack's index across a Reindex: a pack's files never change under
	// its name, so only new packs are mapped (a fetch reindexes, and remapping every pack
	// each time left one mapping per fetch until the GC released them).
	open map[plumbing.Hash]*PackIndex
	// idle holds each pack's open files between reads (at most maxIdlePacks each): opening
	// the pack file for every read was a sixth of a fetch copied from a file remote
	// (filefetch.go in sync/gitrepo). Each read still builds its own go-git Packfile, whose
	// offset map grows with the objects read through it (TestStorageHeapDoesNotGrowWithObjects).
	idle   map[plumbing.Hash][]billy.File
	closed bool // Close ran: files are closed after each read again

	// lazy fetches a blob missing from a partial clone through its promisor remote, as git
	// does on a read (SetLazyFetch); nil: a miss is ErrObjectNotFound.
	lazy func(h plumbing.Hash) error
	alt  atomic.Int32 // hasAlternates: 0 not read since the last Reindex, 1 none, 2 some
}

// SetLazyFetch makes a read of a blob that is not here in a partial clone ask fetch for it
// first, as git's reads ask the promisor remote. Call before any reader runs.
func (s *Storage) SetLazyFetch(fetch func(h plumbing.Hash) error) { s.lazy = fetch }

// maxIdlePacks bounds the files kept open per pack (parallel checkout reads use a few).
const maxIdlePacks = 4

// NewStorage opens the storage of the .git directory gitDir with the object cache c and
// go-git's large-object threshold (objects above it are streamed from disk, not held).
func NewStorage(gitDir string, c cache.Object, largeObject int64) *Storage {
	return NewWorktreeStorage(gitDir, gitDir, c, largeObject)
}

// NewWorktreeStorage is NewStorage of a linked worktree's git dir gitDir (HEAD, index)
// over the common dir commonDir that holds objects, refs, packed-refs and config (go-git's
// RepositoryFilesystem picks the dir per path as git does; internal/gitlayout is memd's
// own rule for the paths it builds). With commonDir == gitDir it is NewStorage.
func NewWorktreeStorage(gitDir, commonDir string, c cache.Object, largeObject int64) *Storage {
	var fs billy.Filesystem = osfs.New(gitDir)
	if commonDir != gitDir {
		fs = newWorktreeFS(fs, osfs.New(commonDir))
	}
	gitDir = commonDir // what this type reads itself (packs, index-pack) is the common dir's
	// objects/info/alternates names object dirs anywhere (git clone --shared writes absolute
	// paths); go-git looks for them in AlternatesFS, by default inside the git dir only.
	altFS := osfs.New("/")
	dot := dotgit.NewWithOptions(fs, dotgit.Options{AlternatesFS: altFS})
	// DotGit looks for a receive-pack's incoming objects directory on its first loose miss
	// and keeps the answer in a field without a lock; asking once here, before any reader
	// runs, keeps concurrent reads (the checkout's parallel blob reads) from racing on it.
	if f, err := dot.Object(plumbing.ZeroHash); err == nil {
		f.Close()
	}
	return &Storage{
		Storage:     filesystem.NewStorageWithOptions(fs, c, filesystem.Options{LargeObjectThreshold: largeObject, AlternatesFS: altFS}),
		gitDir:      gitDir,
		dot:         dot,
		cache:       c,
		largeObject: largeObject,
	}
}

// Reindex makes the next packed read list objects/pack again: after git (a repack, a gc,
// the user's fetch) changed it behind memd's back, or after a fetch.
func (s *Storage) Reindex() {
	s.mu.Lock()
	s.packs = nil
	s.mu.Unlock()
	s.alt.Store(0)
	s.Storage.Reindex()
}

// packIndexes lists and opens the pack indexes once per Reindex. A pack whose .idx is not
// there yet (git renames the .pack into place first) is skipped until the next Reindex.
func (s *Storage) packIndexes() ([]*PackIndex, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.packs != nil {
		return s.packs, nil
	}
	hashes, err := s.dot.ObjectPacks()
	if err != nil {
		return nil, fmt.Errorf("list packs in %s: %w", s.gitDir, err)
	}
	packs := make([]*PackIndex, 0, len(hashes))
	open := make(map[plumbing.Hash]*PackIndex, len(hashes))
	for _, h := range hashes {
		idx := s.open[h]
		if idx == nil {
			idx, err = OpenPackIndex(filepath.Join(s.gitDir, "objects", "pack", "pack-"+h.String()+".idx"))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if idx.PackChecksum() != h {
				return nil, fmt.Errorf("%w %s: it describes pack %s", ErrBadPackIndex, idx.name, idx.PackChecksum())
			}
		}
		packs = append(packs, idx)
		open[h] = idx
	}
	for h, ps := range s.idle {
		if open[h] == nil { // gone (a repack): its files are closed, not kept
			for _, p := range ps {
				_ = p.Close()
			}
			delete(s.idle, h)
		}
	}
	s.open = open // a removed pack's index is released once no reader holds it
	// The biggest pack first: most lookups end there.
	slices.SortStableFunc(packs, func(a, b *PackIndex) int { return b.n - a.n })
	s.packs = packs
	return packs, nil
}

// findPacked is the pack holding h and its offset there, or ErrObjectNotFound.
func (s *Storage) findPacked(h plumbing.Hash) (*PackIndex, int64, error) {
	packs, err := s.packIndexes()
	if err != nil {
		return nil, 0, err
	}
	for _, idx := range packs {
		o, err := idx.FindOffset(h)
		if err == nil {
			return idx, o, nil
		}
		if !errors.Is(err, plumbing.ErrObjectNotFound) {
			return nil, 0, err
		}
	}
	return nil, 0, plumbing.ErrObjectNotFound
}

// withPack runs read on the open pack that holds h, at h's offset. A pack that went away
// (git repacked behind memd's back) makes it list the packs again and retry once, so a
// repack never fails a read.
func (s *Storage) withPack(h plumbing.Hash, read func(p *packfile.Packfile, idx *PackIndex, o int64) error) error {
	for attempt := 0; ; attempt++ {
		idx, o, err := s.findPacked(h)
		if err != nil {
			return err
		}
		ph := idx.PackChecksum()
		f := s.takeIdle(ph)
		if f == nil {
			var err error
			f, err = s.dot.ObjectPack(ph)
			if errors.Is(err, dotgit.ErrPackfileNotFound) && attempt == 0 {
				s.Reindex()
				continue
			}
			if err != nil {
				return fmt.Errorf("open the pack of %s: %w", idx.name, err)
			}
		}
		p := packfile.NewPackfileWithCache(idx, s.dot.Fs(), keptFile{f}, s.cache, s.largeObject)
		err = read(p, idx, o)
		_ = p.Close() // its own state; the file stays open (keptFile)
		if err != nil {
			_ = f.Close() // a file a read failed on is not kept
			return err
		}
		s.putIdle(ph, f)
		return nil
	}
}

// Close closes the pack files kept between reads. The storage still reads after it,
// opening a pack for each read as it did before files were kept.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for h, ps := range s.idle {
		for _, p := range ps {
			_ = p.Close()
		}
		delete(s.idle, h)
	}
	return nil
}

// keptFile is a pack file a Packfile reads without closing it.
type keptFile struct{ billy.File }

func (keptFile) Close() error { return nil }

// takeIdle is an open file of pack h, or nil.
func (s *Storage) takeIdle(h plumbing.Hash) billy.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.idle[h]
	if len(ps) == 0 {
		return nil
	}
	p := ps[len(ps)-1]
	s.idle[h] = ps[:len(ps)-1]
	return p
}

// putIdle keeps p for the next read of pack h, or closes it: the pack is gone from the
// list, or enough of its files are kept.
func (s *Storage) putIdle(h plumbing.Hash, p billy.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.open[h] == nil || len(s.idle[h]) >= maxIdlePacks {
		_ = p.Close()
		return
	}
	if s.idle == nil {
		s.idle = map[plumbing.Hash][]billy.File{}
	}
	s.idle[h] = append(s.idle[h], p)
}

// hasAlternates says whether objects/info/alternates names other object stores: read once
// per Reindex, as a miss in HasEncodedObject (every new object a commit writes) asks.
func (s *Storage) hasAlternates() bool {
	switch s.alt.Load() {
	case 1:
		return false
	case 2:
		return true
	}
	alt, err := s.dot.Alternates()
	has := err == nil && len(alt) > 0
	s.alt.Store(map[bool]int32{false: 1, true: 2}[has])
	return has
}

// EncodedObject implements storer.EncodedObjectStorer.
func (s *Storage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	obj, err := s.object(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) && s.hasAlternates() {
		obj, err = s.Storage.EncodedObject(t, h)
	}
	if errors.Is(err, plumbing.ErrObjectNotFound) && t == plumbing.BlobObject && s.lazy != nil {
		if ferr := s.lazy(h); ferr != nil {
			return nil, fmt.Errorf("%w (partial clone: %w)", plumbing.ErrObjectNotFound, ferr)
		}
		s.Reindex() // the fetch added a pack
		obj, err = s.object(h)
	}
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && obj.Type() != t {
		return nil, plumbing.ErrObjectNotFound
	}
	return obj, nil
}

// DeltaObject implements storer.DeltaObjectStorer with whole objects: a pack encoder then
// computes its own deltas, which go-git's reads would otherwise pull through its indexes.
func (s *Storage) DeltaObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.EncodedObject(t, h)
}

func (s *Storage) object(h plumbing.Hash) (plumbing.EncodedObject, error) {
	if obj, ok := s.cache.Get(h); ok {
		return obj, nil
	}
	// The packs' indexes first, as git looks: they are mapped, and most of a history is
	// packed, where trying the loose file first cost a failed open (a path walk through
	// the chroot) per object read, 4% of the swarm's daemons (perf, bench/RESULTS.md).
	var obj plumbing.EncodedObject
	err := s.withPack(h, func(p *packfile.Packfile, idx *PackIndex, o int64) error {
		// GetByOffset would ask the index for h's name by offset; we know it.
		var err error
		if obj, err = p.Get(h); err != nil {
			return fmt.Errorf("read object %s at %d in %s: %w", h, o, idx.name, err)
		}
		return nil
	})
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return s.loose(h)
	}
	return obj, err
}

// openLoose opens h's loose object and reads its header; the caller closes r, then f.
// ErrObjectNotFound when h is not loose.
func (s *Storage) openLoose(h plumbing.Hash) (f io.Closer, r *objfile.Reader, t plumbing.ObjectType, size int64, err error) {
	file, err := s.dot.Object(h)
	if err != nil {
		if os.IsNotExist(err) {
			err = plumbing.ErrObjectNotFound
		}
		return nil, nil, 0, 0, err
	}
	if r, err = objfile.NewReader(file); err == nil {
		if t, size, err = r.Header(); err != nil {
			r.Close()
		}
	}
	if err != nil {
		file.Close()
		return nil, nil, 0, 0, fmt.Errorf("loose object %s: %w", h, err)
	}
	return file, r, t, size, nil
}

// loose reads a loose object as go-git's ObjectStorage does, or ErrObjectNotFound.
func (s *Storage) loose(h plumbing.Hash) (obj plumbing.EncodedObject, err error) {
	f, r, t, size, err := s.openLoose(h)
	if err != nil {
		return nil, err
	}
	defer closeInto(f, &err)
	defer closeInto(r, &err)
	if s.largeObject > 0 && size > s.largeObject {
		return dotgit.NewEncodedObject(s.dot, h, t, size), nil
	}
	mo := &plumbing.MemoryObject{}
	mo.SetType(t)
	mo.SetSize(size)
	w, err := mo.Writer()
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(w, r); err != nil {
		return nil, fmt.Errorf("loose object %s: %w", h, err)
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	s.cache.Put(mo)
	return mo, nil
}

func closeInto(c io.Closer, err *error) {
	if cerr := c.Close(); *err == nil {
		*err = cerr
	}
}

// HasEncodedObject implements storer.EncodedObjectStorer.
func (s *Storage) HasEncodedObject(h plumbing.Hash) error {
	if _, _, err := s.findPacked(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
		return err
	}
	f, err := s.dot.Object(h)
	if os.IsNotExist(err) && s.hasAlternates() {
		// objects/info/alternates (git clone --shared/--reference): objects are there too.
		_, err = s.Storage.EncodedObject(plumbing.AnyObject, h)
		return err
	}
	if os.IsNotExist(err) {
		return plumbing.ErrObjectNotFound
	}
	if err != nil {
		return err
	}
	return f.Close()
}

// EncodedObjectSize implements storer.EncodedObjectSizeQuerier.
func (s *Storage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if obj, ok := s.cache.Get(h); ok {
		return obj.Size(), nil
	}
	var size int64
	err := s.withPack(h, func(p *packfile.Packfile, _ *PackIndex, o int64) error {
		var err error
		size, err = p.GetSizeByOffset(o)
		return err
	})
	if !errors.Is(err, plumbing.ErrObjectNotFound) {
		return size, err
	}
	f, r, _, size, err := s.openLoose(h)
	if err != nil {
		return 0, err
	}
	r.Close()
	return size, f.Close()
}

// IterEncodedObjects implements storer.EncodedObjectStorer: every loose and packed object
// of type t, each read when the iterator reaches it.
func (s *Storage) IterEncodedObjects(t plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	hashes, err := s.dot.Objects()
	if err != nil {
		return nil, err
	}
	seen := make(map[plumbing.Hash]bool, len(hashes))
	for _, h := range hashes {
		seen[h] = true
	}
	packs, err := s.packIndexes()
	if err != nil {
		return nil, err
	}
	for _, idx := range packs {
		it, _ := idx.Entries()
		for {
			e, err := it.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			if !seen[e.Hash] {
				seen[e.Hash] = true
				hashes = append(hashes, e.Hash)
			}
		}
	}
	return storer.NewEncodedObjectLookupIter(s, t, hashes), nil
}

// HashesWithPrefix implements go-git's short-hash lookup over loose and packed objects.
func (s *Storage) HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error) {
	out, err := s.dot.ObjectsWithPrefix(prefix)
	if err != nil {
		return nil, err
	}
	packs, err := s.packIndexes()
	if err != nil {
		return nil, err
	}
	for _, idx := range packs {
		out = idx.HashesWithPrefix(out, prefix)
	}
	slices.SortFunc(out, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(out), nil
}

// PackfileWriter implements storer.PackfileWriter (a fetch writes its pack through it). The
// new pack is seen by the next read; go-git's own would load every index first.
//
// With git installed the pack goes to `git index-pack --stdin` (indexPack.go): go-git's
// parser reads every object of a fetched pack whole onto the heap to index it, so a 2 GiB
// blob took 3 GB of memory, while index-pack streams a blob over core.bigFileThreshold
// through its hash. Without git, go-git's writer.
func (s *Storage) PackfileWriter() (io.WriteCloser, error) {
	if git := gitBinary(); git != "" {
		return s.indexPackWriter(git)
	}
	w, err := s.dot.NewObjectPack()
	if err != nil {
		return nil, err
	}
	w.Notify = func(plumbing.Hash, *idxfile.Writer) { s.Reindex() }
	return w, nil
}

// ErrObjectTooBig: ReadBounded's object is larger than asked for.
var ErrObjectTooBig = errors.New("object over the size asked for")

// ErrNotItsName: ReadBounded's object does not hash to the name it is stored under.
var ErrNotItsName = errors.New("object content does not match its name")

// ReadBounded reads h whole when its size is at most max, and checks that its content
// hashes to h: for objects read from a store memd did not write (a file remote's), whose
// loose files could claim any name or size. The read never holds more than max bytes of a
// loose object, whatever its zlib stream inflates to. ErrObjectTooBig over max;
// ErrObjectNotFound when h is not here (alternates are not followed).
func (s *Storage) ReadBounded(h plumbing.Hash, max int64) (plumbing.ObjectType, []byte, error) {
	var t plumbing.ObjectType
	var b []byte
	// An object the caller's walk just read is in the cache (decoded from this store, not
	// checked: the hash below checks it).
	if obj, ok := s.cache.Get(h); ok && obj.Size() <= max {
		if b, err := readAllBounded(obj, max); err == nil && HashObject(obj.Type(), b) == h {
			return obj.Type(), b, nil
		}
	}
	err := s.withPack(h, func(p *packfile.Packfile, idx *PackIndex, o int64) error {
		size, err := p.GetSizeByOffset(o)
		if err != nil {
			return fmt.Errorf("read object %s in %s: %w", h, idx.name, err)
		}
		if size > max {
			return fmt.Errorf("%s: %d bytes: %w", h, size, ErrObjectTooBig)
		}
		obj, err := p.Get(h)
		if err != nil {
			return fmt.Errorf("read object %s in %s: %w", h, idx.name, err)
		}
		t = obj.Type()
		b, err = readAllBounded(obj, max)
		return err
	})
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		f, r, lt, size, lerr := s.openLoose(h)
		if lerr != nil {
			return 0, nil, lerr
		}
		defer f.Close()
		defer r.Close()
		if size > max {
			return 0, nil, fmt.Errorf("%s: %d bytes: %w", h, size, ErrObjectTooBig)
		}
		t = lt
		b = make([]byte, size)
		if _, err = io.ReadFull(r, b); err != nil {
			return 0, nil, fmt.Errorf("loose object %s: %w", h, err)
		}
	}
	if err != nil {
		return 0, nil, err
	}
	if got := HashObject(t, b); got != h {
		return 0, nil, fmt.Errorf("object %s: %w (its content is %s)", h, ErrNotItsName, got)
	}
	return t, b, nil
}

func readAllBounded(obj plumbing.EncodedObject, max int64) ([]byte, error) {
	rd, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	b, err := io.ReadAll(io.LimitReader(rd, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s: %w", obj.Hash(), ErrObjectTooBig)
	}
	return b, err
}
