package repofiles

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// Ignore rules never apply to a tracked path (git's rule, DESIGN §9): an edit to a file
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

// indexNames lists the paths of root's .git/index (stage 0 or not: a path in a merge's
// conflict is tracked too). An index that cannot be read is none: git treats a missing
// index as nothing tracked.
func indexNames(root string) []string {
	f, err := os.Open(filepath.Join(root, ".git", "index"))
	if err != nil {
		return nil
	}
	defer f.Close()
	var idx index.Index
	if err := index.NewDecoder(bufio.NewReaderSize(f, 1<<16)).Decode(&idx); err != nil {
		return nil
	}
	names := make([]string, 0, len(idx.Entries))
	for _, e := range idx.Entries {
		names = append(names, e.Name)
	}
	return names
}
