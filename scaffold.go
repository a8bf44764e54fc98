package memd

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/memd-dev/memd/internal/safefs"
)

// SkeletonDirs are the folders `memd init` creates, each holding a .gitkeep so git keeps it.
var SkeletonDirs = []string{
	BucketProjects, BucketAreas, BucketResources, BucketArchive,
	InboxDir, TaskInboxDir, ArcsDir, PeopleDir,
}

// IgnoreLines are what `memd init` makes sure .gitignore holds: the writer lock is never
// committed, nor are the temp files of the atomic writes memd does itself (safefs's
// ".memd-<random>.tmp"; ".memd-tmp-*" is an older name kept for repos that have it).
var IgnoreLines = []string{".memory.lock", ".memd-tmp-*", safefs.TempPrefix + "*" + safefs.TempSuffix}

// Scaffold creates what is missing of the PARA skeleton and .gitignore in dir and returns
// the repo-relative paths it created. Existing files are never changed, except that missing
// lines are appended to .gitignore. It runs on a tree a remote may have just written (`memd
// init --remote`), so it goes through internal/safefs: a skeleton folder or .gitignore that
// is a symlink is refused, naming it, never created or written through.
func Scaffold(dir string) ([]string, error) {
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
			out = "# memd: never commit the writer lock or memd's temp files\n"
		}
		out += strings.Join(add, "\n") + "\n"
		if err := t.WriteFileAtomic(".gitignore", []byte(out), 0o644); err != nil {
			return created, fmt.Errorf("write .gitignore: %w", err)
		}
		created = append(created, ".gitignore")
	}
	return created, nil
}
