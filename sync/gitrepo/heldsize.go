package gitrepo

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// A local file larger than sync.max_file_size is held (docs/ARCHITECTURE.md §11): not committed, left
// untouched on disk, listed in the document's `held` with reason `size`. HEAD keeps what it
// had at the path (nothing, or the last version under the limit). It stays held until a
// commit finds it under the limit again, or gone.

// HeldFile is a local file not committed for its size.
type HeldFile struct {
	Path string // repo-relative, slash-separated
	Size int64
}

type oversizeSet struct {
	mu sync.Mutex
	m  map[string]int64
}

// holdOversize records rel at size: held (true) when over the limit, else no longer held.
func (r *Repo) holdOversize(rel string, size int64) bool {
	max := r.maxFileSize()
	over := max > 0 && size > max
	o := &r.oversize
	o.mu.Lock()
	defer o.mu.Unlock()
	if over {
		if o.m == nil {
			o.m = map[string]int64{}
		}
		if _, was := o.m[rel]; !was {
			r.log.Warn("file larger than sync.max_file_size: held, not committed", "path", rel, "size", size, "max_file_size", max)
		}
		o.m[rel] = size
	} else {
		delete(o.m, rel)
	}
	return over
}

// HeldFiles lists the files held for their size, by path; one removed since is dropped.
func (r *Repo) HeldFiles() []HeldFile {
	o := &r.oversize
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]HeldFile, 0, len(o.m))
	for p, n := range o.m {
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); os.IsNotExist(err) {
			delete(o.m, p)
			continue
		}
		out = append(out, HeldFile{Path: p, Size: n})
	}
	slices.SortFunc(out, func(a, b HeldFile) int {
		if a.Path < b.Path {
			return -1
		}
		if a.Path > b.Path {
			return 1
		}
		return 0
	})
	return out
}
