package scaffold

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/safefs"
)

// SkeletonDirs are the folders `memd init` creates, each holding a .gitkeep so git keeps it.
var SkeletonDirs = []string{
	string(memd.BucketProjects), string(memd.BucketAreas), string(memd.BucketResources), string(memd.BucketArchive),
	memd.InboxDir, memd.TaskInboxDir, memd.ArcsDir, memd.PeopleDir,
}

// MemhtmlIgnoreLines are memhtml's own .gitignore lines (its store's GITIGNORE): its
// SQLite databases and their side files (-wal, -shm, -journal) are rebuilt or re-imported,
// never committed. The rest of .memhtml/ (state/ JSONL, sleep/ reports) is committed.
var MemhtmlIgnoreLines = []string{".memhtml/index.db", ".memhtml/state.db", ".memhtml/index.db-*", ".memhtml/state.db-*"}

// IgnoreLines are what `memd init` makes sure .gitignore holds: the writer lock is never
// committed, nor are the temp files of the atomic writes memd does itself (safefs's
// ".memd-<random>.tmp"; ".memd-tmp-*" is an older name kept for repos that have it), nor
// memhtml's databases. The watcher applies them too (watcher.DefaultIgnore), so a repo whose
// .gitignore predates `memd init` never commits them either.
var IgnoreLines = append([]string{memd.DefaultLockFile, ".memd-tmp-*", safefs.TempPrefix + "*" + safefs.TempSuffix}, MemhtmlIgnoreLines...)

// The layouts a memory repo can have. LayoutPARA is the four buckets memhtml writes
// (FORMATS §1). LayoutProjectMemory is the coding-agent memory of seed 003: one directory
// per project holding its MEMORY.md (FORMATS §3B) and topic files, and no buckets.
const (
	LayoutPARA          = "para"
	LayoutProjectMemory = "project-memory"
)

// DetectLayout tells the layout of an existing directory: LayoutProjectMemory when it holds a
// project-kind MEMORY.md (at its top or in a directory of its own, `<project>/MEMORY.md`)
// and none of the four PARA buckets, else LayoutPARA (an empty or new directory included).
func DetectLayout(dir string) (string, error) {
	for _, b := range memd.Buckets {
		if st, err := os.Stat(filepath.Join(dir, string(b))); err == nil && st.IsDir() {
			return LayoutPARA, nil
		}
	}
	isProjectMD := func(p string) bool {
		data, err := os.ReadFile(p)
		return err == nil && memorymd.Detect(data) == memorymd.KindProject
	}
	if isProjectMD(filepath.Join(dir, memd.MemoryMDName)) {
		return LayoutProjectMemory, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return LayoutPARA, nil
		}
		return "", fmt.Errorf("detect layout of %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != ".git" && isProjectMD(filepath.Join(dir, e.Name(), memd.MemoryMDName)) {
			return LayoutProjectMemory, nil
		}
	}
	return LayoutPARA, nil
}

// InitLayout is Init for a layout: the PARA skeleton for LayoutPARA, only the
// .gitignore lines for LayoutProjectMemory (whose projects are the writer's to make).
func InitLayout(dir, layout string) ([]string, error) {
	switch layout {
	case LayoutPARA:
		return Init(dir)
	case LayoutProjectMemory:
		t, err := safefs.Open(dir)
		if err != nil {
			return nil, fmt.Errorf("scaffold %s: %w", dir, err)
		}
		defer t.Close()
		return scaffoldIgnore(t, nil)
	}
	return nil, fmt.Errorf("unknown layout %q (want %s or %s)", layout, LayoutPARA, LayoutProjectMemory)
}

// Init creates what is missing of the PARA skeleton and .gitignore in dir and returns
// the repo-relative paths it created. Existing files are never changed, except that missing
// lines are appended to .gitignore. It runs on a tree a remote may have just written (`memd
// init --remote`), so it goes through internal/safefs: a skeleton folder or .gitignore that
// is a symlink is refused, naming it, never created or written through.
func Init(dir string) ([]string, error) {
	t, err := safefs.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("scaffold %s: %w", dir, err)
	}
	defer t.Close()
	var created []string
	for _, d := range SkeletonDirs {
		if err := t.MkdirAll(d, 0o755); err != nil {
			return created, fmt.Errorf("create %s: %w", d, err)
		}
		entries, err := t.ReadDirNames(d)
		if err != nil {
			return created, fmt.Errorf("read %s: %w", d, err)
		}
		if len(entries) == 0 {
			if err := t.WriteFileAtomic(d+"/.gitkeep", nil, 0o644); err != nil {
				return created, fmt.Errorf("create %s/.gitkeep: %w", d, err)
			}
			created = append(created, d+"/.gitkeep")
		}
	}
	return scaffoldIgnore(t, created)
}

// scaffoldIgnore appends the IgnoreLines .gitignore lacks (creating it) and adds
// ".gitignore" to created when it wrote it.
func scaffoldIgnore(t *safefs.Tree, created []string) ([]string, error) {
	data, err := t.ReadFile(".gitignore")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return created, fmt.Errorf("read .gitignore: %w", err)
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	var add []string
	for _, l := range IgnoreLines {
		if !have[l] {
			add = append(add, l)
		}
	}
	if len(add) > 0 {
		out := string(data)
		if out != "" && !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
		if out == "" {
			out = "# memd: never commit the writer lock, memd's temp files or memhtml's databases\n"
		}
		out += strings.Join(add, "\n") + "\n"
		if err := t.WriteFileAtomic(".gitignore", []byte(out), 0o644); err != nil {
			return created, fmt.Errorf("write .gitignore: %w", err)
		}
		created = append(created, ".gitignore")
	}
	return created, nil
}
