package sleep

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	gosync "sync"
	"time"

	"github.com/memd-dev/memd"
)

// snapshot is the tree as sleep sees it: read once per run (one walk, every memory file
// parsed once), then kept up to date from the applied plans so later phases plan on what
// earlier ones left, without walking again.
type snapshot struct {
	root  string
	files map[string]bool         // every regular file, repo-relative
	mems  map[string]*memd.Memory // parsed memory files (valid memory paths ending .html)
	// virtual (dry run): written bytes live only here, so later phases read what earlier
	// plans would have written.
	virtual bool
	overlay map[string][]byte
	// stats are the memory files' size and mtime, for the parse cache.
	stats      map[string]fileStat
	cacheDirty bool
	parsed     int      // memory files parsed (not from the cache)
	sorted     []string // memPaths, until the next apply
}

// loadSnapshot walks root (skipping .git and symlinks) and parses the memory files. With a
// cache dir, a file whose size and mtime match the parse cache is not read again, so a run
// with nothing to do costs about what `git status` costs: a walk and an lstat per file.
func loadSnapshot(root string, progressW io.Writer) (*snapshot, error) {
	return loadSnapshotCached(root, "", progressW)
}

func loadSnapshotCached(root, cacheDir string, progressW io.Writer) (*snapshot, error) {
	s := &snapshot{root: root, files: map[string]bool{}, mems: map[string]*memd.Memory{}, overlay: map[string][]byte{},
		stats: map[string]fileStat{}}
	var htmls []string
	stats := s.stats
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("walk %s: %w", p, err)
		}
		if d.IsDir() {
			if p != root && d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks are committed as links, never followed or rewritten
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		s.files[rel] = true
		if isMemoryPath(rel) {
			htmls = append(htmls, rel)
			if cacheDir != "" {
				if fi, err := d.Info(); err == nil {
					stats[rel] = fileStat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, err)
	}
	sort.Strings(htmls)
	if cacheDir == "" {
		if err := s.parseAll(htmls, progressW); err != nil {
			return nil, err
		}
		return s, nil
	}
	pc := readParseCache(cacheDir)
	var misses []string
	for _, p := range htmls {
		e, ok := pc.Entries[p]
		st, have := stats[p]
		// Racy entries (mtime within 2 s of when the cache was written) are parsed again:
		// a write in the same timestamp tick would otherwise go unseen.
		if ok && have && e.Stat == st && st.Mtime < pc.Saved-int64(2*time.Second) {
			s.mems[p] = e.Mem.memory()
			continue
		}
		misses = append(misses, p)
	}
	if err := s.parseAll(misses, progressW); err != nil {
		return nil, err
	}
	s.cacheDirty = len(misses) > 0 || len(pc.Entries) != len(htmls)
	s.parsed = len(misses)
	return s, nil
}

// saveCache writes the parse cache for the tree as it is now (the run's own writes and
// moves included), when anything changed since it was read.
func (s *snapshot) saveCache(dir string) {
	if !s.cacheDirty || s.virtual {
		return
	}
	next := parseCache{Version: parseCacheVersion, Saved: time.Now().UnixNano(), Entries: make(map[string]cacheEntry, len(s.mems))}
	for p, m := range s.mems {
		if st, have := s.stats[p]; have {
			next.Entries[p] = cacheEntry{Stat: st, Mem: toCached(m)}
		}
	}
	writeParseCache(dir, next)
	s.cacheDirty = false
}

// fileStat is what decides whether a cached parse still holds.
type fileStat struct {
	Size, Mtime int64
}

type cacheEntry struct {
	Stat fileStat // a named field: gob skips embedded unexported ones
	Mem  cachedMem
}

// cachedMem is the part of a parsed memory file sleep plans from; the rest (violations,
// other metas) is not kept, which keeps the cache small and quick to decode.
type cachedMem struct {
	Type, Status, Title, Gist, TaskStatus string
	Updated, ValidUntil, Members          string
	CreatedAt, UpdatedAt, EventAt         time.Time
	ValidUntilAt                          time.Time
	Entities, Tags                        []string
	Links                                 []memd.Link
}

func toCached(m *memd.Memory) cachedMem {
	return cachedMem{Type: m.Type, Status: m.Status, Title: m.Title, Gist: m.Gist, TaskStatus: m.TaskStatus,
		Updated: m.Updated, ValidUntil: m.ValidUntil, Members: m.Meta(memd.MetaMembers),
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, EventAt: m.EventAt, ValidUntilAt: m.ValidUntilAt,
		Entities: m.Entities, Tags: m.Tags, Links: m.Links}
}

func (c cachedMem) memory() *memd.Memory {
	m := &memd.Memory{Type: c.Type, Status: c.Status, Title: c.Title, Gist: c.Gist, TaskStatus: c.TaskStatus,
		Updated: c.Updated, ValidUntil: c.ValidUntil, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt,
		EventAt: c.EventAt, ValidUntilAt: c.ValidUntilAt, Entities: c.Entities, Tags: c.Tags, Links: c.Links,
		Metas: map[string][]string{}}
	if c.Members != "" {
		m.Metas[memd.MetaMembers] = []string{c.Members}
	}
	return m
}

// parseCache is <state>/sleep-parse.gob: parsed memory heads by path. It is only a cache:
// unreadable, old-version or missing means parse everything.
type parseCache struct {
	Version int
	Saved   int64 // unix ns when written
	Entries map[string]cacheEntry
}

const (
	parseCacheVersion = 2
	parseCacheName    = "sleep-parse.gob"
)

func readParseCache(dir string) parseCache {
	f, err := os.Open(filepath.Join(dir, parseCacheName))
	if err != nil {
		return parseCache{}
	}
	defer f.Close()
	var pc parseCache
	if err := gob.NewDecoder(bufio.NewReader(f)).Decode(&pc); err != nil || pc.Version != parseCacheVersion {
		return parseCache{}
	}
	return pc
}

func writeParseCache(dir string, pc parseCache) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(pc); err != nil {
		return
	}
	_ = writeFileRename(filepath.Join(dir, parseCacheName), buf.Bytes(), 0o600, false)
}

func isMemoryPath(rel string) bool {
	return strings.HasSuffix(rel, memd.MemoryExt) && memd.ValidMemoryPath(rel)
}

// parseAll parses the files on all cores; an unreadable file is left out (reported by doctor,
// never touched by sleep).
func (s *snapshot) parseAll(paths []string, progressW io.Writer) error {
	type res struct {
		p string
		m *memd.Memory
	}
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan string, 256)
	out := make(chan res, 256)
	var wg gosync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range jobs {
				m, err := memd.ParseMemoryFile(filepath.Join(s.root, filepath.FromSlash(p)))
				if err != nil {
					m = nil
				}
				out <- res{p, m}
			}
		}()
	}
	go func() {
		for _, p := range paths {
			jobs <- p
		}
		close(jobs)
		wg.Wait()
		close(out)
	}()
	n := 0
	for r := range out {
		if r.m != nil {
			s.mems[r.p] = r.m
		}
		n++
		if n%5000 == 0 {
			progress(progressW, "read", n, len(paths))
		}
	}
	if len(paths) >= 5000 {
		progressDone(progressW, len(paths))
	}
	return nil
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
	b, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(rel)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", rel, err)
	}
	return b, true, nil
}

// apply updates the snapshot with an applied (or, dry run, imagined) plan.
func (s *snapshot) apply(p *plan) {
	s.sorted = nil
	for _, o := range p.ops {
		switch o.kind {
		case opWrite:
			s.files[o.path] = true
			if s.virtual {
				s.overlay[o.path] = o.data
			}
			if isMemoryPath(o.path) {
				if m, err := memd.ParseMemory(strings.NewReader(string(o.data))); err == nil {
					s.mems[o.path] = m
				}
				delete(s.stats, o.path)
				if !s.virtual {
					if fi, err := os.Lstat(filepath.Join(s.root, filepath.FromSlash(o.path))); err == nil {
						s.stats[o.path] = fileStat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
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
				if b, err := os.ReadFile(filepath.Join(s.root, filepath.FromSlash(o.path))); err == nil {
					s.overlay[o.to] = b
				}
			}
			if m, ok := s.mems[o.path]; ok {
				delete(s.mems, o.path)
				if isMemoryPath(o.to) {
					s.mems[o.to] = m
				}
			}
			if st, ok := s.stats[o.path]; ok {
				delete(s.stats, o.path)
				s.stats[o.to] = st // a rename keeps size and mtime
			}
			s.cacheDirty = true
		}
	}
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
		if !strings.HasPrefix(p, memd.BucketArchive+"/") {
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
