package claudecode

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ConfigDir is Claude Code's config dir: configured (agents.claude_code.config_dir), else
// $CLAUDE_CONFIG_DIR, else ~/.claude.
func ConfigDir(configured, home string) string {
	if configured != "" {
		return configured
	}
	if d := os.Getenv("CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	return filepath.Join(home, ".claude")
}

// maxNameLen is where Claude Code cuts a project's folder name and appends a hash of the
// path; such a name is not computed here (the hash is Claude Code's): the project is found
// once Claude Code has made its folder.
const maxNameLen = 200

// DirName is the folder name Claude Code gives the project at path under projects/: every
// character but ASCII letters and digits becomes '-'. ok is false for a path so long
// Claude Code would cut it.
func DirName(path string) (string, bool) {
	b := []byte(path)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	// JavaScript replaces per UTF-16 unit, Go per byte: a non-ASCII path differs in length.
	if len(b) > maxNameLen || strings.ContainsFunc(path, func(r rune) bool { return r > 0x7f }) {
		return "", false
	}
	return string(b), true
}

// MemoryDir is Claude Code's default memory dir for the checkout at toplevel.
func MemoryDir(configDir, toplevel string) (string, bool) {
	name, ok := DirName(toplevel)
	if !ok {
		return "", false
	}
	return filepath.Join(configDir, "projects", name, "memory"), true
}

// Candidates lists the folders Claude Code has recorded sessions in (the cwd of its
// projects/<name>/ transcripts, the keys of .claude.json's projects map) and the git
// checkouts in roots (each root and its direct children). They are folders, not yet
// checkouts: Resolve tells.
func Candidates(configDir, home string, roots []string) []string {
	return newFinder().candidates(configDir, home, roots)
}

// finder remembers what it read, so a pass every second rereads only what changed: a
// projects/<name>/ folder's cwd once found, a .claude.json (which can be megabytes) while its
// time and size stand.
type finder struct {
	cwds  map[string]string // a folder's name is made from its cwd: found once, it stands
	jsons map[string]stamped[[]string]
}

// stamped is a value read from a file or folder as it was at (mod time, size).
type stamped[T any] struct {
	mod  time.Time
	size int64
	v    T
}

func newFinder() *finder {
	return &finder{cwds: map[string]string{}, jsons: map[string]stamped[[]string]{}}
}

func (f *finder) candidates(configDir, home string, roots []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p != "" && filepath.IsAbs(p) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range f.recordedCwds(filepath.Join(configDir, "projects")) {
		add(p)
	}
	for _, file := range []string{filepath.Join(configDir, ".claude.json"), filepath.Join(home, ".claude.json")} {
		for _, p := range f.claudeJSON(file) {
			add(p)
		}
	}
	for _, r := range roots {
		add(r)
		ents, err := os.ReadDir(r)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
				if _, err := os.Stat(filepath.Join(r, e.Name(), ".git")); err == nil {
					add(filepath.Join(r, e.Name()))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// claudeJSON is claudeJSONProjects of file, read again only when the file changed.
func (f *finder) claudeJSON(file string) []string {
	fi, err := os.Stat(file)
	if err != nil {
		delete(f.jsons, file)
		return nil
	}
	if c, ok := f.jsons[file]; ok && c.mod.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.v
	}
	v := claudeJSONProjects(file)
	f.jsons[file] = stamped[[]string]{mod: fi.ModTime(), size: fi.Size(), v: v}
	return v
}

// recordedCwds reads, for each projects/<name>/ folder, the cwd its transcripts name (the
// folder name alone loses the path). Only the first lines are read, and only here:
// transcripts never go anywhere.
func (f *finder) recordedCwds(projects string) []string {
	ents, err := os.ReadDir(projects)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(projects, e.Name())
		cwd, ok := f.cwds[dir]
		if !ok {
			// Not found yet is asked again next pass: a session's first lines may not
			// name its cwd yet, and appending to a transcript leaves the folder's time.
			if cwd = transcriptCwd(dir); cwd == "" {
				continue
			}
			f.cwds[dir] = cwd
		}
		out = append(out, cwd)
	}
	return out
}

// claudeJSONProjects reads the keys of the projects map of a .claude.json (absent or
// unreadable: none).
func claudeJSONProjects(file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var doc struct {
		Projects map[string]json.RawMessage `json:"projects"`
	}
	if json.NewDecoder(io.LimitReader(f, 64<<20)).Decode(&doc) != nil {
		return nil
	}
	var out []string
	for p := range doc.Projects {
		out = append(out, p)
	}
	return out
}

// transcriptCwd is the first "cwd" in the first 64 KiB of any transcript in dir.
func transcriptCwd(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(io.LimitReader(f, 64<<10))
		sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
		for sc.Scan() {
			var line struct {
				Cwd string `json:"cwd"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Cwd != "" {
				f.Close()
				return line.Cwd
			}
		}
		f.Close()
	}
	return ""
}
