package claudecode

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p != "" && filepath.IsAbs(p) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, p := range recordedCwds(filepath.Join(configDir, "projects")) {
		add(p)
	}
	for _, f := range []string{filepath.Join(configDir, ".claude.json"), filepath.Join(home, ".claude.json")} {
		for _, p := range claudeJSONProjects(f) {
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

// recordedCwds reads, for each projects/<name>/ folder, the cwd its newest transcript names
// (the folder name alone loses the path). Only the first lines are read, and only here:
// transcripts never go anywhere.
func recordedCwds(projects string) []string {
	ents, err := os.ReadDir(projects)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if cwd := transcriptCwd(filepath.Join(projects, e.Name())); cwd != "" {
			out = append(out, cwd)
		}
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
