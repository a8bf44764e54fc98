// Package gitlayout is where a work tree's git files are, as git resolves them
// (setup.c's read_gitfile and get_common_dir, path.c's common_list): the git dir
// (`.git` itself, or what a `.git` file's "gitdir: <path>" names, relative to
// the file's directory: a submodule, `--separate-git-dir`, a linked worktree)
// and the common dir (`<git dir>/commondir` of a linked worktree), and which of
// the two holds a given file. Every path memd builds into a repo's git files
// goes through here, so a submodule or a `git worktree add` checkout is a repo
// like any other.
//
// It imports only the standard library: the root package's StateDir calls it.
package gitlayout

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Reasons Resolve fails; its errors wrap one and name the path.
var (
	// ErrNoGitDir: the work tree has no `.git`.
	ErrNoGitDir = errors.New("not a git work tree (no .git)")
	// ErrBadGitFile: a `.git` file that is not one line "gitdir: <path>" naming a
	// directory, or a commondir file naming none.
	ErrBadGitFile = errors.New("not a git dir link")
)

// Layout is one work tree's git files. Paths are absolute and clean when the work
// tree given was.
type Layout struct {
	WorkTree string // the checkout
	// GitDir holds what is the work tree's own: HEAD, index, logs/HEAD,
	// MERGE_HEAD, ORIG_HEAD, config.worktree, memd's state dir (git rev-parse --git-dir).
	GitDir string
	// CommonDir holds what all work trees of the repo share: objects, refs,
	// packed-refs, config, hooks, info, shallow (git rev-parse --git-common-dir).
	// It is GitDir except in a linked worktree.
	CommonDir string
	// GitFile: the work tree's .git is a file naming GitDir.
	GitFile bool
}

// Resolve finds workTree's git dir and common dir as git does. A work tree without
// `.git` is ErrNoGitDir; a `.git` file or commondir that names no directory is
// ErrBadGitFile, naming the file.
func Resolve(workTree string) (Layout, error) {
	l := Layout{WorkTree: workTree, GitDir: path.Join(workTree, ".git")}
	fi, err := os.Stat(l.GitDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return l, &os.PathError{Op: "open", Path: l.GitDir, Err: ErrNoGitDir}
		}
		return l, err
	}
	if !fi.IsDir() {
		dir, err := readLink(l.GitDir, "gitdir: ", workTree)
		if err != nil {
			return l, err
		}
		l.GitDir, l.GitFile = dir, true
	}
	l.CommonDir = l.GitDir
	name := path.Join(l.GitDir, "commondir")
	if _, err := os.Lstat(name); err == nil {
		dir, err := readLink(name, "", l.GitDir)
		if err != nil {
			return l, err
		}
		l.CommonDir = dir
	}
	return l, nil
}

// readLink reads the one-line file name (`.git` with prefix "gitdir: ", or
// commondir) naming a directory, relative to base unless absolute.
func readLink(name, prefix, base string) (string, error) {
	bad := func(why string) error {
		return &os.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %s", ErrBadGitFile, why)}
	}
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	f.Close()
	if err != nil {
		return "", &os.PathError{Op: "read", Path: name, Err: err}
	}
	s := strings.TrimRight(string(b), " \t\r\n")
	if !strings.HasPrefix(s, prefix) {
		return "", bad("no " + strings.TrimSpace(prefix) + " line")
	}
	s = s[len(prefix):]
	if s == "" || strings.ContainsAny(s, "\n\x00") {
		return "", bad("not one path")
	}
	if !path.IsAbs(s) {
		// git joins to the directory's real path: "../.git/modules/m" from a checkout
		// reached through a symlink is next to where it really is.
		if real, err := filepath.EvalSymlinks(base); err == nil {
			base = real
		}
		s = path.Join(base, s)
	}
	s = path.Clean(s)
	if fi, err := os.Stat(s); err != nil || !fi.IsDir() {
		return "", bad(s + " is not a directory")
	}
	return s, nil
}

// GitDir is workTree's git dir, or workTree/.git when there is none to resolve
// (not made yet, or a bad link that the opening of the repo reports).
func GitDir(workTree string) string {
	l, err := Resolve(workTree)
	if err != nil {
		return path.Join(workTree, ".git")
	}
	return l.GitDir
}

// Linked reports a linked worktree: its own git dir apart from the shared one.
func (l Layout) Linked() bool { return l.GitDir != l.CommonDir }

// Path is the file at rel (slash-separated, relative to a git dir: "HEAD",
// "refs/heads/main", "objects/pack", "index.lock") in the dir git keeps it in.
func (l Layout) Path(rel string) string {
	if Common(rel) {
		return path.Join(l.CommonDir, rel)
	}
	return path.Join(l.GitDir, rel)
}

// Common reports whether rel lives in the common dir of a linked worktree, by
// git's common_list (path.c): objects, refs (but refs/bisect, refs/rewritten,
// refs/worktree), logs (but logs/HEAD), packed-refs, config, hooks, info (but
// info/sparse-checkout), shallow, remotes, branches, worktrees, rr-cache, svn,
// common, gc.pid. Everything else (HEAD, index, MERGE_HEAD, ORIG_HEAD, FETCH_HEAD,
// config.worktree, memd) is per worktree. A lock file "<name>.lock" goes where
// name does.
func Common(rel string) bool {
	rel = strings.TrimPrefix(path.Clean(rel), "./")
	rel = strings.TrimSuffix(rel, ".lock")
	first, rest, _ := strings.Cut(rel, "/")
	switch first {
	case "objects", "hooks", "remotes", "branches", "worktrees", "rr-cache", "svn", "common",
		"config", "packed-refs", "shallow", "gc.pid":
		return true
	case "info":
		return rest != "sparse-checkout"
	case "logs":
		return rest != "HEAD"
	case "refs":
		sub, _, _ := strings.Cut(rest, "/")
		return sub != "bisect" && sub != "rewritten" && sub != "worktree"
	}
	return false
}

// File is workTree's git file rel where git keeps it (Layout.Path), or under
// workTree/.git when there is no layout to resolve.
func File(workTree, rel string) string {
	l, err := Resolve(workTree)
	if err != nil {
		return path.Join(workTree, ".git", rel)
	}
	return l.Path(rel)
}

// ErrUnsupported: a layout memd refuses to work in (named in the error); memd run
// exits 2 on it.
var ErrUnsupported = errors.New("repo layout memd cannot work in")

// CheckedOutElsewhere is the work tree, other than l's, that has branch ref
// ("refs/heads/<name>") checked out, as `git worktree list` knows them: the main
// one (a common dir with an index: a bare repo's HEAD is no checkout) and each
// linked one under <common dir>/worktrees. "" when none: memd may move ref.
func (l Layout) CheckedOutElsewhere(ref string) string {
	want := "ref: " + ref
	headIs := func(gitDir string) bool {
		b, err := os.ReadFile(path.Join(gitDir, "HEAD"))
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	if l.Linked() && headIs(l.CommonDir) {
		if _, err := os.Stat(path.Join(l.CommonDir, "index")); err == nil {
			if path.Base(l.CommonDir) == ".git" {
				return path.Dir(l.CommonDir)
			}
			return l.CommonDir
		}
	}
	ents, _ := os.ReadDir(path.Join(l.CommonDir, "worktrees"))
	for _, e := range ents {
		dir := path.Join(l.CommonDir, "worktrees", e.Name())
		if dir == l.GitDir || !headIs(dir) {
			continue
		}
		where := dir
		if b, err := os.ReadFile(path.Join(dir, "gitdir")); err == nil { // <work tree>/.git
			where = path.Dir(strings.TrimSpace(string(b)))
		}
		return where
	}
	return ""
}
