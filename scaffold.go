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
