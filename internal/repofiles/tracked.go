package repofiles

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/memd-dev/memd/internal/gitlayout"
)

// Ignore rules never apply to a tracked path (git's rule, docs/ARCHITECTURE.md §11): an edit to a file
// the repo tracks is committed whatever .gitignore says, a .gitignore a remote delivered
// included. sync's committer and checkout decide that against HEAD itself. Skip is the
// same rule for the consumers that have no HEAD at hand (the watcher): "tracked" is what
// .git/index held when these rules were first asked about an ignored path. memd keeps
// the index in step with HEAD; a stale answer only makes the watcher report a path the
// committer then looks up, never a commit of an untracked ignored file.

// trackedSet is the index's paths that the rules ignore, and their directories. Read once
// per Ignorer (a .gitignore change builds a new one, which reads it again).
type trackedSet struct {
	once  sync.Once
	files map[string]bool
	dirs  map[string]bool
}

// Skip is Ignored with git's exception: a path .git/index tracks (for a directory: one
// that holds a tracked file) is not skipped unless it is private. A nil Ignorer skips
// only private paths.
func (ig *Ignorer) Skip(rel string, isDir bool) bool {
	if !ig.Ignored(rel, isDir) {
		return false
	}
	if ig == nil || ig.Private(rel) {
		return true
	}
	t := ig.trackedIgnored()
	rel = strings.Trim(filepath.ToSlash(rel), "/")
	if isDir {
		return !t.dirs[rel]
	}
	return !t.files[rel]
}

// trackedIgnored loads the set on first use.
func (ig *Ignorer) trackedIgnored() *trackedSet {
	t := ig.tracked
	t.once.Do(func() {
		t.files, t.dirs = map[string]bool{}, map[string]bool{}
		for _, name := range indexNames(ig.root) {
			if !ig.Ignored(name, false) || ig.Private(name) {
				continue
			}
			t.files[name] = true
			for i := len(name) - 1; i > 0; i-- {
				if name[i] == '/' {
					t.dirs[name[:i]] = true
				}
			}
		}
	})
	return t
}

// indexNames lists the paths of root's .git/index (any stage: a path in a merge's conflict
// is tracked too). An index that cannot be read is none: git treats a missing index as
// nothing tracked. Versions 2 and 3 (what git and memd write) are read for their names
// only, a tight loop over the file (a 100k-entry index decoded by go-git is ~10x slower);
// version 4's compressed names go through go-git's decoder.
func indexNames(root string) []string {
	data, err := os.ReadFile(gitlayout.File(root, "index"))
	if err != nil || len(data) < 12 || string(data[:4]) != "DIRC" {
		return nil
	}
	switch binary.BigEndian.Uint32(data[4:8]) {
	case 2, 3:
		if names, ok := indexNamesV2(data); ok {
			return names
		}
		return nil
	}
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(data)).Decode(&idx); err != nil {
		return nil
	}
	names := make([]string, 0, len(idx.Entries))
	for _, e := range idx.Entries {
		names = append(names, e.Name)
	}
	return names
}

// indexNamesV2 reads the entry names of a version 2 or 3 index (git's index-format.txt:
// 62 bytes of stat data, id and flags, 2 more with the extended flag, the name, then 1 to 8
// NULs to a multiple of 8). ok false: the file is not what it says.
func indexNamesV2(data []byte) (names []string, ok bool) {
	n := int(binary.BigEndian.Uint32(data[8:12]))
	if n > len(data)/62 {
		return nil, false
	}
	names = make([]string, 0, n)
	off := 12
	for range n {
		if off+62 > len(data) {
			return nil, false
		}
		flags := binary.BigEndian.Uint16(data[off+60 : off+62])
		fixed := 62
		if flags&0x4000 != 0 {
			fixed = 64
		}
		start := off + fixed
		if start > len(data) {
			return nil, false
		}
		l := int(flags & 0xfff)
		if l == 0xfff {
			l = bytes.IndexByte(data[start:], 0)
		}
		if l < 0 || start+l > len(data) {
			return nil, false
		}
		names = append(names, string(data[start:start+l]))
		off += (fixed + l + 8) &^ 7
	}
	return names, true
}
