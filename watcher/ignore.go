package watcher

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// DefaultIgnore is memd's own ignore list: editor swap, backup and temp files that are
// never memories (vim writes "4913" to probe a directory, emacs ".#name" lock links).
// These apply above .gitignore, so a .gitignore cannot re-include them.
var DefaultIgnore = []string{"*.swp", "*~", "4913", ".#*", "*.tmp"}

// lockName is the writer lock (FORMATS §5). It is never committed.
const lockName = ".memory.lock"

// ErrBadPattern is returned for an ignore pattern that cannot be matched.
var ErrBadPattern = errors.New("bad ignore pattern")

// Ignorer answers "is this path outside memd's concern": .git, the writer lock, paths
// ignored by .gitignore files (root and nested, plus .git/info/exclude) through go-git's
// matcher, memd's DefaultIgnore and the configured extra patterns.
//
// An Ignorer is immutable once built and safe for concurrent use; a reload builds a new one.
type Ignorer struct {
	base  []gitignore.Pattern            // .git/info/exclude: lowest priority
	byDir map[string][]gitignore.Pattern // dir rel ("" = root) → its .gitignore
	top   []gitignore.Pattern            // DefaultIgnore + extra: highest priority
	m     gitignore.Matcher
	files int // .gitignore files read
}

// CheckPatterns validates gitignore-style patterns (config watch.ignore) and names the
// first bad one.
func CheckPatterns(patterns []string) error {
	for _, p := range patterns {
		if err := checkPattern(p); err != nil {
			return err
		}
	}
	return nil
}

func checkPattern(p string) error {
	q := strings.TrimPrefix(strings.TrimSpace(p), "!")
	if strings.Trim(q, "/") == "" {
		return fmt.Errorf("%w %q: empty", ErrBadPattern, p)
	}
	for _, seg := range strings.Split(q, "/") {
		if seg == "" || seg == "**" {
			continue
		}
		if _, err := filepath.Match(seg, ""); err != nil {
			return fmt.Errorf("%w %q: %v", ErrBadPattern, p, err)
		}
	}
	return nil
}

// NewIgnorer reads every .gitignore under root (not inside ignored directories, as git
// does) and combines them with DefaultIgnore and extra.
func NewIgnorer(root string, extra []string) (*Ignorer, error) {
	abs, err := absRoot(root)
	if err != nil {
		return nil, err
	}
	ig, err := newIgnorerBase(abs, extra)
	if err != nil {
		return nil, err
	}
	err = walkTree(abs, "", ig, walkFuncs{
		dir: func(rel string) { ig.readGitignore(abs, rel) },
	})
	if err != nil {
		return nil, fmt.Errorf("ignore rules for %s: %w", abs, err)
	}
	return ig, nil
}

// newIgnorerBase builds an Ignorer without any .gitignore; the caller's walk adds them
// directory by directory (readGitignore) so ignored directories are never entered.
func newIgnorerBase(root string, extra []string) (*Ignorer, error) {
	ig := &Ignorer{byDir: map[string][]gitignore.Pattern{}}
	for _, p := range DefaultIgnore {
		ig.top = append(ig.top, gitignore.ParsePattern(p, nil))
	}
	for _, p := range extra {
		if err := checkPattern(p); err != nil {
			return nil, fmt.Errorf("watch.ignore: %w", err)
		}
		ig.top = append(ig.top, gitignore.ParsePattern(strings.TrimSpace(p), nil))
	}
	if data, err := os.ReadFile(filepath.Join(root, ".git", "info", "exclude")); err == nil {
		ig.base = parseIgnoreFile(data, nil)
	}
	ig.rebuild()
	return ig, nil
}

// readGitignore adds dir's .gitignore, if any, and rebuilds the matcher so the walk can
// use it for dir's entries.
func (ig *Ignorer) readGitignore(root, dir string) {
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), ".gitignore"))
	if err != nil {
		return // none, or unreadable: git treats both as no rules
	}
	var domain []string
	if dir != "" {
		domain = strings.Split(dir, "/")
	}
	ps := parseIgnoreFile(data, domain)
	ig.files++
	if len(ps) == 0 {
		return
	}
	ig.byDir[dir] = ps
	ig.rebuild()
}

// clone copies the rules so a walk can extend them without touching the published ones.
func (ig *Ignorer) clone() *Ignorer {
	c := &Ignorer{base: ig.base, top: ig.top, files: ig.files, byDir: make(map[string][]gitignore.Pattern, len(ig.byDir))}
	for d, ps := range ig.byDir {
		c.byDir[d] = ps
	}
	c.rebuild()
	return c
}

func (ig *Ignorer) rebuild() {
	dirs := make([]string, 0, len(ig.byDir))
	for d := range ig.byDir {
		dirs = append(dirs, d)
	}
	// Lexical order puts every directory after its ancestors: deeper files win, as in git.
	sort.Strings(dirs)
	ps := append([]gitignore.Pattern(nil), ig.base...)
	for _, d := range dirs {
		ps = append(ps, ig.byDir[d]...)
	}
	ps = append(ps, ig.top...)
	ig.m = gitignore.NewMatcher(ps)
}

func parseIgnoreFile(data []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if checkPattern(line) != nil {
			continue // git skips what it cannot parse; so do we
		}
		ps = append(ps, gitignore.ParsePattern(line, domain))
	}
	return ps
}

// Ignored reports whether the repo-relative, '/'-separated path rel is ignored. It is
// also true for .git, anything under a .git directory and the writer lock. A path under
// an ignored directory is ignored (git cannot re-include inside an excluded directory).
func (ig *Ignorer) Ignored(rel string, isDir bool) bool {
	rel = strings.Trim(filepath.ToSlash(rel), "/")
	if rel == "" || rel == "." {
		return false
	}
	parts := strings.Split(rel, "/")
	if special(parts) {
		return true
	}
	for n := 1; n < len(parts); n++ {
		if ig.m.Match(parts[:n], true) {
			return true
		}
	}
	return ig.m.Match(parts, isDir)
}

// ignoredLeaf is Ignored for a walk that only reaches rel through non-ignored parents,
// so only rel itself needs matching.
func (ig *Ignorer) ignoredLeaf(rel string, isDir bool) bool {
	parts := strings.Split(rel, "/")
	return special(parts) || ig.m.Match(parts, isDir)
}

func special(parts []string) bool {
	for _, p := range parts {
		if p == ".git" {
			return true
		}
	}
	return parts[len(parts)-1] == lockName
}

// absRoot resolves root to a clean absolute path of an existing directory.
func absRoot(root string) (string, error) {
	if root == "" {
		return "", errors.New("repo root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", fmt.Errorf("repo root %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("repo root %q: %w", root, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("repo root %q: not a directory", root)
	}
	return abs, nil
}

// walkFuncs are the callbacks of walkTree. dir runs before the directory is listed (so a
// watch added there sees everything created after the listing); file runs for every
// non-ignored non-directory entry (symlinks included, never followed); fail for a
// directory that cannot be listed.
type walkFuncs struct {
	dir  func(rel string)
	file func(rel string, d fs.DirEntry)
	fail func(rel string, err error)
}

// walkTree walks start (repo-relative, "" = root) and below, skipping ignored paths.
// Directories that vanish during the walk are skipped silently; it fails only when start
// itself cannot be listed.
func walkTree(root, start string, ig *Ignorer, fn walkFuncs) error {
	var firstErr error
	var rec func(rel string)
	rec = func(rel string) {
		if fn.dir != nil {
			fn.dir(rel)
		}
		ents, err := readDir(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			if rel == start {
				firstErr = err
			} else if fn.fail != nil && !errors.Is(err, fs.ErrNotExist) {
				fn.fail(rel, err)
			}
			return
		}
		for _, e := range ents {
			child := e.Name()
			if rel != "" {
				child = rel + "/" + child
			}
			if e.IsDir() {
				if !ig.ignoredLeaf(child, true) {
					rec(child)
				}
				continue
			}
			if fn.file != nil && !ig.ignoredLeaf(child, false) {
				fn.file(child, e)
			}
		}
	}
	rec(start)
	return firstErr
}

// readDir lists a directory without sorting (directory order is fine for us and cheaper).
func readDir(dir string) ([]fs.DirEntry, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}
