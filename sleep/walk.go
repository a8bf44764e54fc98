package sleep

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
)

// fileStat is what decides whether what sleep read from a file still holds: git's stat
// check (size, mtime, ctime, inode). ctime catches a content change whose writer put the
// old mtime back; the inode catches a file replaced by a rename.
type fileStat struct {
	Size, Mtime, Ctime int64 // mtime and ctime in unix ns
	Ino                uint64
}

// stamp is the later of mtime and ctime: the last time the file was touched at all.
func (st fileStat) stamp() int64 { return max(st.Mtime, st.Ctime) }

// treeFile is one regular file of the tree.
type treeFile struct {
	rel     string // repo-relative, '/'-separated
	mem     bool   // a memory file (the planners parse it)
	statted bool   // st holds its lstat (memory files and MEMORY.md only: the planners read those)
	st      fileStat
}

// tree is one walk of the repo: every regular file outside .git (symlinks and other
// non-regular files are never followed or read), in a deterministic order.
type tree struct {
	files []treeFile
	// complete is false when a file the planners read could not be lstat'ed (it went away
	// mid-walk): such a walk never vouches for an idle fingerprint.
	complete bool
	maxStamp int64 // the latest stamp of a stat'ed file
}

// walkTree lists the regular files among the repo's files (repofiles.Walk's set, decided
// per entry by repofiles.SkipDir and SkipFile, less the symlinks sleep never reads or
// rewrites), on GOMAXPROCS goroutines: at 100k files the walk is mostly
// getdents and lstat system calls, which run in parallel as git's preload-index does.
// Only memory files and MEMORY.md files are lstat'ed; for every other file the planners
// only ask whether it exists, which the directory listing answers. ignore is the committer's
// rule (.gitignore files, memd's list and watch.ignore): the walk never lists an ignored file
// or enters an ignored directory or a nested repository, so sleep never plans, writes or
// commits a path the committer would not; nil applies only the rules every walk applies.
func walkTree(root string, ignore repofiles.Rule) (*tree, error) {
	type dirNode struct {
		abs, rel string
		files    []treeFile
		subdirs  []int // indexes into nodes, in name order
	}
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		nodes    = []*dirNode{{abs: root}}
		queue    = []int{0}
		active   int
		firstErr error
	)
	worker := func() {
		mu.Lock()
		for {
			for len(queue) == 0 && active > 0 && firstErr == nil {
				cond.Wait()
			}
			if firstErr != nil || (len(queue) == 0 && active == 0) {
				mu.Unlock()
				cond.Broadcast()
				return
			}
			i := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			n := nodes[i]
			active++
			mu.Unlock()

			files, dirs, err := readTreeDir(n.abs, n.rel, ignore)

			mu.Lock()
			active--
			if err != nil && firstErr == nil {
				firstErr = err
			}
			n.files = files
			for _, d := range dirs {
				nodes = append(nodes, &dirNode{abs: filepath.Join(n.abs, d), rel: joinRel(n.rel, d)})
				n.subdirs = append(n.subdirs, len(nodes)-1)
				queue = append(queue, len(nodes)-1)
			}
			cond.Broadcast()
		}
	}
	var wg sync.WaitGroup
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(worker)
	}
	wg.Wait()
	if firstErr != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, firstErr)
	}
	total := 0
	for _, n := range nodes {
		total += len(n.files)
	}
	t := &tree{files: make([]treeFile, 0, total), complete: true}
	// Depth first in name order: the same tree always lists the same way.
	var visit func(i int)
	visit = func(i int) {
		n := nodes[i]
		for _, f := range n.files {
			if (f.mem || isMemoryMD(f.rel)) && !f.statted {
				t.complete = false
			}
			if f.statted {
				t.maxStamp = max(t.maxStamp, f.st.stamp())
			}
			t.files = append(t.files, f)
		}
		for _, c := range n.subdirs {
			visit(c)
		}
	}
	visit(0)
	return t, nil
}

// readTreeDir lists one directory: its regular files (memory files and MEMORY.md
// lstat'ed) and its subdirectories to walk, both in name order.
func readTreeDir(abs, rel string, ignore repofiles.Rule) (files []treeFile, dirs []string, err error) {
	d, err := openDir(abs)
	if err != nil {
		return nil, nil, fmt.Errorf("walk %s: %w", abs, err)
	}
	defer d.close()
	ents, err := d.f.ReadDir(-1)
	if err != nil {
		return nil, nil, fmt.Errorf("walk %s: %w", abs, err)
	}
	slices.SortFunc(ents, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, e := range ents {
		name := e.Name()
		typ := e.Type()
		if typ.IsDir() {
			if !repofiles.SkipDir(filepath.Join(abs, name), joinRel(rel, name), ignore) {
				dirs = append(dirs, name)
			}
			continue
		}
		f := treeFile{rel: joinRel(rel, name)}
		if !typ.IsRegular() || repofiles.SkipFile(f.rel, typ, ignore) {
			continue // symlinks are committed as links, never followed or rewritten
		}
		f.mem = isMemoryPath(f.rel)
		if f.mem || name == memd.MemoryMDName {
			// A file gone since the listing is left unstat'ed: parsed (and found missing)
			// like before, and the walk vouches for no fingerprint.
			if st, ok := d.lstat(name); ok {
				f.st, f.statted = st, true
			}
		}
		files = append(files, f)
	}
	return files, dirs, nil
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func isMemoryMD(rel string) bool {
	return memd.IsMemoryMD(rel)
}

// isMemoryPath reports whether rel is a memory file sleep parses. It is called for every
// file of every walk, and memd.ValidMemoryPath formats its verdict even for a valid path,
// so the common case (a plain ASCII path in a bucket) is decided here; anything else goes
// to memd.ValidMemoryPath, the rule.
//
// A conflict copy is not one: sleep never moves, archives or lists it (docs/ARCHITECTURE.md §11).
func isMemoryPath(rel string) bool {
	if !strings.HasSuffix(rel, memd.MemoryExt) || memd.IsNonMemory(rel) || memd.IsConflictCopy(rel) {
		return false
	}
	if plainMemoryPath(rel) {
		return true
	}
	return memd.ValidMemoryPath(rel)
}

// plainMemoryPath is true only for paths memd.ValidMemoryPath accepts: printable ASCII
// without a backslash, in a bucket, no empty, "." or ".." segment, a name before .html.
// false means "ask the rule", not "invalid".
func plainMemoryPath(p string) bool {
	if !strings.HasSuffix(p, memd.MemoryExt) || p == "" || p[0] == '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	first, rest, hasDir := strings.Cut(p, "/")
	if !hasDir {
		return false
	}
	switch memd.Bucket(first) {
	case memd.BucketProjects, memd.BucketAreas, memd.BucketResources, memd.BucketArchive:
	default:
		return false
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return p[strings.LastIndexByte(p, '/')+1:] != memd.MemoryExt
}
