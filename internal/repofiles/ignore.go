package repofiles

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/internal/gitlayout"
)

// DefaultIgnore is memd's own ignore list: editor swap, backup and temp files that are
// never memories (vim writes "4913" to probe a directory, emacs ".#name" lock links), and
// scaffold.IgnoreLines, what `memd init` writes into .gitignore (the writer lock, the temp
// names of memd's atomic writes, memhtml's databases), so a repo whose .gitignore predates
// `memd init` never commits them either. These apply above .gitignore, so a .gitignore
// cannot re-include them.
var DefaultIgnore = append([]string{"*.swp", "*~", "4913", ".#*", "*.tmp"}, scaffold.IgnoreLines...)

// ErrBadPattern is returned for an ignore pattern that cannot be matched.
var ErrBadPattern = errors.New("bad ignore pattern")

// Ignorer answers "is this path outside memd's concern": .git, the writer lock, paths
// ignored by .gitignore files (root and nested, plus .git/info/exclude and git's
// core.excludesFile, ExcludesFile) through go-git's
// matcher, memd's DefaultIgnore and the configured extra patterns (watch.ignore).
//
// An Ignorer is immutable once built and safe for concurrent use; a reload builds a new one
// (Reload) and every consumer is handed that one.
type Ignorer struct {
	root    string             // absolute repo root
	extra   []string           // watch.ignore, as given
	lock    string             // lock.file ("" = the default name): private, see PrivateFor
	base    []entry            // core.excludesFile, then .git/info/exclude: lowest priority
	byDir   map[string][]entry // dir rel ("" = root) → its .gitignore
	top     []entry            // DefaultIgnore + extra: highest priority
	m       matcher
	files   int         // .gitignore files read
	tracked *trackedSet // the index's paths these rules ignore (Skip), read on first use
	dirs    sync.Map    // dir rel → ignored (itself or an ancestor); valid for these rules only
	global  excludes    // the core.excludesFile read (excludes.go)
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

// New reads every .gitignore under root (not inside ignored directories or nested
// repositories, as git does) and combines them with DefaultIgnore and extra (watch.ignore).
// The error names the root or the bad pattern.
func New(root string, extra []string) (*Ignorer, error) {
	return Build(root, extra, Funcs{})
}

// Build is New with a walk's callbacks: one walk of the repo both reads the rules and
// visits the files (the watcher adds its watches on it).
func Build(root string, extra []string, fn Funcs) (*Ignorer, error) {
	abs, err := AbsRoot(root)
	if err != nil {
		return nil, err
	}
	ig, err := newBase(abs, extra)
	if err != nil {
		return nil, err
	}
	if err := ig.walkReading("", fn); err != nil {
		return nil, fmt.Errorf("ignore rules for %s: %w", abs, err)
	}
	return ig, nil
}

// Reload builds the rules again from the files on disk, with the same root and extra
// patterns (a .gitignore changed).
func (ig *Ignorer) Reload() (*Ignorer, error) {
	n, err := New(ig.root, ig.extra)
	if err == nil {
		n.lock = ig.lock
	}
	return n, err
}

// Extend walks start (a tree that appeared) like Walk and returns ig extended with the
// .gitignore files found on the way down; ig itself is not changed. A .gitignore that
// comes with a moved-in tree produces no event of its own: this is how it is read.
func (ig *Ignorer) Extend(start string, fn Funcs) (*Ignorer, error) {
	c := ig.clone()
	err := c.walkReading(start, fn)
	return c, err
}

// Gitignores is how many .gitignore files the rules were read from.
func (ig *Ignorer) Gitignores() int { return ig.files }

// walkReading walks start, reading each directory's .gitignore before its entries are
// matched, so ignored directories are never entered and their rules never read.
func (ig *Ignorer) walkReading(start string, fn Funcs) error {
	dir := fn.Dir
	fn.Dir = func(rel string) {
		ig.readGitignore(rel)
		if dir != nil {
			dir(rel)
		}
	}
	return walk(ig.root, start, ig.ignoredLeaf, fn)
}

// newBase builds an Ignorer without any .gitignore; the caller's walk adds them
// directory by directory (readGitignore).
func newBase(root string, extra []string) (*Ignorer, error) {
	ig := &Ignorer{root: root, extra: append([]string(nil), extra...), byDir: map[string][]entry{}, tracked: &trackedSet{}}
	for _, p := range DefaultIgnore {
		ig.top = append(ig.top, newEntry(p, nil))
	}
	for _, p := range extra {
		if err := checkPattern(p); err != nil {
			return nil, fmt.Errorf("watch.ignore: %w", err)
		}
		ig.top = append(ig.top, newEntry(strings.TrimSpace(p), nil))
	}
	// git's order, lowest first: core.excludesFile, then .git/info/exclude, then the
	// .gitignore files (byDir).
	ig.global = readGlobal(root)
	ig.base = append([]entry(nil), ig.global.entries...)
	if data, err := os.ReadFile(gitlayout.File(root, "info/exclude")); err == nil {
		ig.base = append(ig.base, parseIgnoreFile(data, nil)...)
	}
	ig.rebuild()
	return ig, nil
}

// readGitignore adds dir's .gitignore, if any, and rebuilds the matcher so the walk can
// use it for dir's entries.
func (ig *Ignorer) readGitignore(dir string) {
	data, err := os.ReadFile(filepath.Join(ig.root, filepath.FromSlash(dir), ".gitignore"))
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
	c := &Ignorer{root: ig.root, extra: ig.extra, lock: ig.lock, base: ig.base, global: ig.global, top: ig.top, files: ig.files, byDir: make(map[string][]entry, len(ig.byDir)), tracked: &trackedSet{}}
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
	ps := append([]entry(nil), ig.base...)
	for _, d := range dirs {
		ps = append(ps, ig.byDir[d]...)
	}
	ig.m = append(ps, ig.top...)
	ig.dirs.Clear()
}

func parseIgnoreFile(data []byte, domain []string) []entry {
	var ps []entry
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
		ps = append(ps, newEntry(line, domain))
	}
	return ps
}

// Ignored reports whether the repo-relative, '/'-separated path rel is ignored. A nil
// Ignorer ignores only what every walk skips (.git, the writer lock). It is
// also true for .git, anything under a .git directory and the writer lock. A path under
// an ignored directory is ignored (git cannot re-include inside an excluded directory).
// Directory answers are cached, so a walk pays one match per file.
func (ig *Ignorer) Ignored(rel string, isDir bool) bool {
	rel = strings.Trim(filepath.ToSlash(rel), "/")
	if rel == "" || rel == "." {
		return false
	}
	if ig.Private(rel) {
		return true
	}
	if ig == nil {
		return false
	}
	parts := strings.Split(rel, "/")
	if n := len(parts); n > 1 && ig.dirIgnored(rel[:strings.LastIndexByte(rel, '/')], parts[:n-1]) {
		return true
	}
	return ig.m.Match(parts, isDir)
}

// dirIgnored: is directory dir (split into parts) or one of its ancestors ignored.
func (ig *Ignorer) dirIgnored(dir string, parts []string) bool {
	if v, ok := ig.dirs.Load(dir); ok {
		return v.(bool)
	}
	r := false
	if n := len(parts); n > 1 {
		r = ig.dirIgnored(dir[:strings.LastIndexByte(dir, '/')], parts[:n-1])
	}
	if !r {
		r = ig.m.Match(parts, true)
	}
	ig.dirs.Store(dir, r)
	return r
}

// ignoredLeaf is Ignored for a walk that only reaches rel through non-ignored parents,
// so only rel itself needs matching.
func (ig *Ignorer) ignoredLeaf(rel string, isDir bool) bool {
	return ig.Private(rel) || ig.m.Match(strings.Split(rel, "/"), isDir)
}

// entry is one go-git pattern plus a cheap necessary condition on a path component. Most
// patterns are "*.ext", "name" or "prefix*"; go-git matches them with filepath.Match
// against every component, which dominates a reconcile walk. The quick test only skips a
// pattern that cannot match; go-git still decides every match.
type entry struct {
	p     gitignore.Pattern
	quick func(component string) bool // nil: no shortcut
}

func newEntry(line string, domain []string) entry {
	e := entry{p: gitignore.ParsePattern(line, domain)}
	// Mirror go-git's parsing just far enough to know the name pattern.
	q := strings.TrimPrefix(line, "!")
	if !strings.HasSuffix(q, `\ `) {
		q = strings.TrimRight(q, " ")
	}
	q = strings.TrimSuffix(q, "/")
	if q == "" || strings.Contains(q, "/") || strings.ContainsAny(q, `?[\`) {
		return e
	}
	switch star := strings.Count(q, "*"); {
	case star == 0:
		e.quick = func(c string) bool { return c == q }
	case star == 1 && q[0] == '*':
		suffix := q[1:]
		e.quick = func(c string) bool { return strings.HasSuffix(c, suffix) }
	case star == 1 && q[len(q)-1] == '*':
		prefix := q[:len(q)-1]
		e.quick = func(c string) bool { return strings.HasPrefix(c, prefix) }
	}
	return e
}

// matcher is go-git's gitignore.Matcher loop (last pattern that matches decides) over
// entries, so the quick tests can skip patterns.
type matcher []entry

func (m matcher) Match(path []string, isDir bool) bool {
	for i := len(m) - 1; i >= 0; i-- {
		e := m[i]
		if e.quick != nil && !anyComponent(path, e.quick) {
			continue
		}
		switch e.p.Match(path, isDir) {
		case gitignore.Exclude:
			return true
		case gitignore.Include:
			return false
		}
	}
	return false
}

func anyComponent(path []string, f func(string) bool) bool {
	for _, c := range path {
		if f(c) {
			return true
		}
	}
	return false
}
