package memd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SkeletonDirs are the folders `memd init` creates, each holding a .gitkeep so git keeps it.
var SkeletonDirs = []string{
	BucketProjects, BucketAreas, BucketResources, BucketArchive,
	InboxDir, TaskInboxDir, ArcsDir, PeopleDir,
}

// MemhtmlIgnoreLines are memhtml's own .gitignore lines (its store's GITIGNORE): its
// SQLite databases and their side files (-wal, -shm, -journal) are rebuilt or re-imported,
// never committed. The rest of .memhtml/ (state/ JSONL, sleep/ reports) is committed.
var MemhtmlIgnoreLines = []string{".memhtml/index.db", ".memhtml/state.db", ".memhtml/index.db-*", ".memhtml/state.db-*"}

// IgnoreLines are what `memd init` makes sure .gitignore holds: the writer lock is never
// committed, nor are the temp files of the atomic writes memd does itself, nor memhtml's
// databases.
var IgnoreLines = append([]string{".memory.lock", ".memd-tmp-*"}, MemhtmlIgnoreLines...)

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
	for _, b := range Buckets {
		if st, err := os.Stat(filepath.Join(dir, b)); err == nil && st.IsDir() {
			return LayoutPARA, nil
		}
	}
	isProjectMD := func(p string) bool {
		data, err := os.ReadFile(p)
		return err == nil && DetectMemoryMDKind(data) == MemoryMDProject
	}
	if isProjectMD(filepath.Join(dir, "MEMORY.md")) {
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
		if e.IsDir() && e.Name() != ".git" && isProjectMD(filepath.Join(dir, e.Name(), "MEMORY.md")) {
			return LayoutProjectMemory, nil
		}
	}
	return LayoutPARA, nil
}

// ScaffoldLayout is Scaffold for a layout: the PARA skeleton for LayoutPARA, only the
// .gitignore lines for LayoutProjectMemory (whose projects are the writer's to make).
func ScaffoldLayout(dir, layout string) ([]string, error) {
	switch layout {
	case LayoutPARA:
		return Scaffold(dir)
	case LayoutProjectMemory:
		return scaffoldIgnore(dir, nil)
	}
	return nil, fmt.Errorf("unknown layout %q (want %s or %s)", layout, LayoutPARA, LayoutProjectMemory)
}

// Scaffold creates what is missing of the PARA skeleton and .gitignore in dir and returns
// the repo-relative paths it created. Existing files are never changed, except that missing
// lines are appended to .gitignore.
func Scaffold(dir string) ([]string, error) {
	var created []string
	for _, d := range SkeletonDirs {
		abs := filepath.Join(dir, filepath.FromSlash(d))
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return created, fmt.Errorf("create %s: %w", d, err)
		}
		entries, err := os.ReadDir(abs)
		if err != nil {
			return created, fmt.Errorf("read %s: %w", d, err)
		}
		if len(entries) == 0 {
			if err := os.WriteFile(filepath.Join(abs, ".gitkeep"), nil, 0o644); err != nil {
				return created, fmt.Errorf("create %s/.gitkeep: %w", d, err)
			}
			created = append(created, d+"/.gitkeep")
		}
	}
	return scaffoldIgnore(dir, created)
}

// scaffoldIgnore appends the IgnoreLines .gitignore lacks (creating it) and adds
// ".gitignore" to created when it wrote it.
func scaffoldIgnore(dir string, created []string) ([]string, error) {
	gi := filepath.Join(dir, ".gitignore")
	data, err := os.ReadFile(gi)
	if err != nil && !os.IsNotExist(err) {
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
		if err := os.WriteFile(gi, []byte(out), 0o644); err != nil {
			return created, fmt.Errorf("write .gitignore: %w", err)
		}
		created = append(created, ".gitignore")
	}
	return created, nil
}
