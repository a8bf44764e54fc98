package sleep

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/internal/workpool"
)

// snapshot is the tree as sleep sees it: read once per run (one walk, every memory file
// parsed once), then kept up to date from the applied plans so later phases plan on what
// earlier ones left, without walking again.
type snapshot struct {
	root  string
	files map[string]bool            // every regular file, repo-relative
	mems  map[string]*memfile.Memory // parsed memory files (valid memory paths ending .html)
	// virtual (dry run): written bytes live only here, so later phases read what earlier
	// plans would have written.
	virtual bool
	overlay map[string][]byte
	// keys say where each parse came from (stat, content hash), for the parse cache.
	keys       map[string]cacheKey
	saved      int64 // wall clock (unix ns) just before the walk: the racy rule's reference
	cacheDirty bool
	parsed     int      // memory files parsed (not from the cache)
	checked    int      // memory files read to compare with the cache's content hash
	sorted     []string // memPaths, until the next apply
	// stale counts the files read past the cache (and entries for files gone); applied
	// says a plan was applied. Few stale and none applied: not worth rewriting the cache.
	stale   int
	applied bool
}

// loadSnapshot walks root (skipping .git and symlinks) and parses every memory file: the
// plain planner's read.
func loadSnapshot(root string, progressW io.Writer) (*snapshot, error) {
	return plainPlanner{dir: root, progress: progressW}.load()
}

// snapshotOf builds the snapshot of a walk taken at saved, parsing every memory file. With
// a cache dir, the parse cache there answers for the files it still vouches for (cache.go).
func snapshotOf(root string, t *tree, saved int64, cacheDir string, progressW io.Writer) (*snapshot, error) {
	nmem := 0
	for _, f := range t.files {
		if f.mem {
			nmem++
		}
	}
	s := &snapshot{root: root, files: make(map[string]bool, len(t.files)), mems: make(map[string]*memfile.Memory, nmem),
		overlay: map[string][]byte{}, keys: make(map[string]cacheKey, nmem), saved: saved}
	htmls := make([]treeFile, 0, nmem)
	for _, f := range t.files {
		s.files[f.rel] = true
		if f.mem {
			htmls = append(htmls, f)
		}
	}
	// The cache is sorted the same way: the lookup is a merge.
	slices.SortFunc(htmls, func(a, b treeFile) int { return strings.Compare(a.rel, b.rel) })
	var slab memSlab
	var pc *cacheReader
	if cacheDir != "" {
		pc = openParseCache(cacheDir)
	}
	work := s.fromCache(pc, htmls, &slab)
	if err := s.readAll(work, &slab, progressW); err != nil {
		return nil, err
	}
	// memPaths, already in order (sorting 100k paths again cost more than this).
	s.sorted = make([]string, 0, len(s.mems))
	for _, f := range htmls {
		if _, ok := s.mems[f.rel]; ok {
			s.sorted = append(s.sorted, f.rel)
		}
	}
	if cacheDir != "" {
		s.noteCacheUse(pc, len(work), len(htmls))
	}
	return s, nil
}

// readJob is one memory file to read: parsed, or, when the cache has an entry with a
// content hash, compared with it first.
type readJob struct {
	path    string
	st      fileStat // from the walk
	statted bool
	cached  bool
	hash    contentHash
	payload string
}

type readResult struct {
	path    string
	m       *memfile.Memory
	key     cacheKey
	fromHit bool   // bytes hashed as cached: payload is the cached parse to use
	payload string // the cache entry's payload, when fromHit
}

// readAll reads the files on all cores; an unreadable file is left out (reported by doctor,
// never touched by sleep).
func (s *snapshot) readAll(jobs []readJob, slab *memSlab, progressW io.Writer) error {
	out := make(chan readResult, 256)
	go func() {
		_ = workpool.Each(len(jobs), runtime.GOMAXPROCS(0), func(i int) error {
			out <- s.readOne(jobs[i])
			return nil
		})
		close(out)
	}()
	n := 0
	for r := range out {
		if r.fromHit {
			// Decoded here, on one goroutine: the slab is not shared.
			m, err := decodeMem(r.payload, slab)
			if err == nil {
				s.mems[r.path] = m
				s.keys[r.path] = r.key
				s.checked++
			} else {
				// A cache entry that does not decode: parse the file after all.
				rr := s.readOne(readJob{path: r.path, st: r.key.st, statted: r.key.statted})
				if rr.m != nil {
					s.mems[r.path] = rr.m
					s.keys[r.path] = rr.key
				}
				s.parsed++
			}
		} else {
			if r.m != nil {
				s.mems[r.path] = r.m
				s.keys[r.path] = r.key
			}
			s.parsed++
		}
		n++
		if n%5000 == 0 {
			progress(progressW, "read", n, len(jobs))
		}
	}
	if len(jobs) >= 5000 {
		progressDone(progressW, len(jobs))
	}
	return nil
}

// readOne reads one memory file the way memfile.ParseFile does (lstat, no symlink, the
// 1 MiB limit), hashing the bytes it parses.
func (s *snapshot) readOne(j readJob) (res readResult) {
	res.path = j.path
	res.key.st, res.key.statted = j.st, j.statted
	abs := filepath.Join(s.root, filepath.FromSlash(j.path))
	b, ok := readMemoryBytes(abs)
	if !ok {
		// Oversize, not a regular file, or gone: ParseMemoryFile decides (no hash kept).
		if m, err := memfile.ParseFile(abs); err == nil {
			res.m = m
		}
		return res
	}
	h := hashContent(b)
	res.key.hash, res.key.hashed = h, true
	if j.cached && h == j.hash {
		res.fromHit = true
		res.payload = j.payload
		return res
	}
	res.m = memfile.ParseBytes(b)
	return res
}

// readMemoryBytes returns a regular file's bytes when they are within the memory file size
// limit, read as ParseMemoryFile reads them (never through a symlink); ok false otherwise.
func readMemoryBytes(abs string) ([]byte, bool) {
	f, size, ok := openRegular(abs)
	if !ok {
		return nil, false
	}
	defer f.Close()
	if size > memfile.MaxFileBytes {
		return nil, false
	}
	// Sized from the stat (plus one byte to see a file that grew): no regrowing.
	b := make([]byte, 0, size+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil || len(b) > memfile.MaxFileBytes {
			return nil, false
		}
		if len(b) == cap(b) {
			b = slices.Grow(b, 4096)
		}
	}
	return b, true
}

// read returns a file's current bytes (the dry-run overlay first). exists is false for a
// missing file.
func (s *snapshot) read(rel string) (data []byte, exists bool, err error) {
	if b, ok := s.overlay[rel]; ok {
		return b, true, nil
	}
	if s.virtual && !s.files[rel] {
		return nil, false, nil
	}
	b, err := readTracked(s.root, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, err)
	}
	return b, true, nil
}

// readTracked reads a tracked file by the rule sleep writes it by (internal/safefs): never
// through a symlink at the name or in its parent chain, only a regular file. A read that
// followed a link the write would then refuse had already shown what the link's target
// holds (a note id from a file outside the repo, in the dry-run items).
func readTracked(root, rel string) ([]byte, error) {
	t, err := safefs.Open(root)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	return t.ReadFile(rel)
}

// apply updates the snapshot with an applied (or, dry run, imagined) plan.
func (s *snapshot) apply(p *plan) {
	s.sorted = nil
	s.applied = true
	written := map[string][]byte{} // memory files this plan wrote, by where they are now
	for _, o := range p.ops {
		switch o.kind {
		case opWrite:
			if isMemoryPath(o.path) {
				written[o.path] = o.data
			}
			s.files[o.path] = true
			if s.virtual {
				s.overlay[o.path] = o.data
			}
			if isMemoryPath(o.path) {
				if m, err := memfile.Parse(strings.NewReader(string(o.data))); err == nil {
					s.mems[o.path] = m
				}
				delete(s.keys, o.path)
				if len(o.data) <= memfile.MaxFileBytes {
					// The stat is taken after the write, so it is racy: the next load
					// reads the file and trusts this parse only if the bytes still hash
					// as what was written.
					if st, ok := s.lstatReal(o.path); ok {
						s.keys[o.path] = cacheKey{st: st, statted: true, hash: hashContent(o.data), hashed: true}
					}
				}
				s.cacheDirty = true
			}
		case opMove:
			delete(s.files, o.path)
			s.files[o.to] = true
			if b, ok := s.overlay[o.path]; ok {
				delete(s.overlay, o.path)
				s.overlay[o.to] = b
			} else if s.virtual {
				// Keep reading the moved file's bytes from its old place on disk.
				if b, err := readTracked(s.root, o.path); err == nil {
					s.overlay[o.to] = b
				}
			}
			if m, ok := s.mems[o.path]; ok {
				delete(s.mems, o.path)
				if isMemoryPath(o.to) {
					s.mems[o.to] = m
				}
			}
			if d, ok := written[o.path]; ok {
				// Stamped just before the move (archive): the stat of the old path was gone
				// when the write was noted; key the destination by what was written.
				delete(s.keys, o.path)
				if st, ok := s.lstatReal(o.to); ok && len(d) <= memfile.MaxFileBytes {
					s.keys[o.to] = cacheKey{st: st, statted: true, hash: hashContent(d), hashed: true}
				}
				delete(written, o.path)
				written[o.to] = d
			} else if k, ok := s.keys[o.path]; ok {
				delete(s.keys, o.path)
				// A rename keeps size, mtime and inode but not ctime; the content hash
				// carries over (a pure rename).
				if st, ok := s.lstatReal(o.to); ok && st.Size == k.st.Size && st.Mtime == k.st.Mtime && st.Ino == k.st.Ino {
					k.st = st
					s.keys[o.to] = k
				}
			}
			s.cacheDirty = true
		}
	}
}

// lstatReal is the stat of a file on disk; none in a dry run.
func (s *snapshot) lstatReal(rel string) (fileStat, bool) {
	if s.virtual {
		return fileStat{}, false
	}
	return lstatFile(filepath.Join(s.root, filepath.FromSlash(rel)))
}

// memPaths returns the parsed memory paths, sorted (plans must be deterministic). The slice
// is shared until the next apply; callers must not change it.
func (s *snapshot) memPaths() []string {
	if s.sorted != nil {
		return s.sorted
	}
	out := make([]string, 0, len(s.mems))
	for p := range s.mems {
		out = append(out, p)
	}
	sort.Strings(out)
	s.sorted = out
	return out
}

// filesNamed returns the sorted paths whose base name is name.
func (s *snapshot) filesNamed(name string) []string {
	var out []string
	for p := range s.files {
		if path.Base(p) == name {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// archivedAt maps an original path to where it now lives in the archive (the latest year
// when archived more than once).
func (s *snapshot) archivedAt() map[string]string {
	out := map[string]string{}
	years := map[string]int{}
	for p := range s.files {
		if !strings.HasPrefix(p, string(memd.BucketArchive)+"/") {
			continue
		}
		orig, year, ok := memd.UnarchivePath(p)
		if !ok {
			continue
		}
		if y, seen := years[orig]; !seen || year > y {
			years[orig] = year
			out[orig] = p
		}
	}
	return out
}
