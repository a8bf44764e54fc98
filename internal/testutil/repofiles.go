package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// MixedRepo is a git work tree full of what is not a file of the repo, beside what is:
// ignored files (root and nested .gitignore, .git/info/exclude, memd's own list and
// watch.ignore's MixedRepoIgnore), symlinks (to a file, to a directory, a loop, outside
// the repo, dangling), nested repositories (a real one and a .git file), a FIFO named like
// a memory, and memhtml's non-memories. The tests of every consumer of
// internal/repofiles check what they see against Files.
//
// It writes with plain os calls on purpose: it builds what internal/safefs refuses to
// (links out of the repo, a FIFO).
type MixedRepo struct {
	Root     string
	Files    []string // the files of the repo, sorted: what a commit holds
	Links    []string // those of Files that are symlinks
	Regular  []string // those of Files that are regular files
	Memories []string // those of Regular that are memories (.html, not memd.IsNonMemory)
	Dirs     []string // the directories a walk enters, root ("") included, sorted
	// Decoys are regular files that are not files of the repo (ignored, or in a nested
	// repository): a consumer that lists one has its own idea of the repo.
	Decoys []string
}

// MixedRepoIgnore is the watch.ignore MixedRepo is built for.
var MixedRepoIgnore = []string{"*.bak"}

// NewMixedRepo builds a MixedRepo in a temp dir with the real git binary.
func NewMixedRepo(t testing.TB) MixedRepo {
	t.Helper()
	root := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
		}
	}
	git(root, "init", "-q", "-b", "main")
	put := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(rel, target string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	const mem = "<!doctype html><html><head><title>t</title></head><body><p>x</p></body></html>\n"
	m := MixedRepo{Root: root}
	file := func(rel, data string) { put(rel, data); m.Regular = append(m.Regular, rel) }
	decoy := func(rel string) { put(rel, "not ours\n"); m.Decoys = append(m.Decoys, rel) }

	file(".gitignore", "*.log\n!keep.log\nbuild/\n/private/\n")
	put(".git/info/exclude", "mine-*\n")
	file("memory.jsonl", "")
	file("areas/ops/20260101-kept.html", mem)
	file("areas/ops/.gitignore", "secret-*.html\n")
	file("areas/ops/keep.log", "re-included\n")
	file("projects/p/private/20260102-y.html", mem) // /private/ is anchored at the root
	file("projects/p/MEMORY.md", "# p\n")
	// memhtml's non-memories: files of the repo, never memories.
	file("index.html", "<html></html>\n")
	file("README.html", "<html></html>\n")
	file("areas/index.html", "<html></html>\n")
	file("areas/ops/sitemap.xml", "<urlset/>\n")
	file(".memhtml/state/access.jsonl", "{}\n")
	file(".memhtml/sleep/run.html", "<html></html>\n")

	for _, rel := range []string{
		"areas/ops/secret-1.html", "areas/ops/debug.log", "build/out.html", "private/x.html",
		"mine-notes.html", "areas/ops/x.bak",
		// memd's list: editor and memd temp files, memhtml's databases, the writer lock.
		"areas/ops/20260101-kept.html.swp", "areas/ops/20260101-kept.html~", "areas/ops/4913",
		"x.tmp", ".memd-tmp-1", "areas/.memd-ABCD.tmp", ".memhtml/index.db",
		".memhtml/state.db-wal", ".memory.lock",
		// a .gitignore inside an ignored directory is never read
		"build/.gitignore",
	} {
		decoy(rel)
	}
	link("areas/ops/.#20260101-kept.html", "user@host.1234") // emacs' lock link: ignored
	// Nested repositories: a real one and a worktree-style .git file. Not ours to commit.
	put("resources/vendored/README.md", "x")
	git(filepath.Join(root, "resources/vendored"), "init", "-q")
	m.Decoys = append(m.Decoys, "resources/vendored/README.md")
	put("areas/sub/.git", "gitdir: /nonexistent/worktrees/sub\n")
	decoy("areas/sub/20260103-a.html")
	// Symlinks: committed as links, never followed.
	for rel, target := range map[string]string{
		"areas/ops/20260104-link.html": "20260101-kept.html",
		"areas/linkdir":                "ops",
		"areas/loop":                   "loop",
		"resources/outside.html":       filepath.Join(os.TempDir(), "memd-outside-target"),
		"resources/dangling":           "nowhere/at/all",
	} {
		link(rel, target)
		m.Links = append(m.Links, rel)
	}
	// A FIFO named like a memory: never a file, never opened (an open would block).
	if err := syscall.Mkfifo(filepath.Join(root, "areas/ops/20260105-pipe.html"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Files = append(append([]string(nil), m.Regular...), m.Links...)
	slices.Sort(m.Files)
	slices.Sort(m.Links)
	slices.Sort(m.Regular)
	slices.Sort(m.Decoys)
	m.Memories = []string{"areas/ops/20260101-kept.html", "projects/p/private/20260102-y.html"}
	m.Dirs = []string{"", ".memhtml", ".memhtml/sleep", ".memhtml/state", "areas", "areas/ops", "projects", "projects/p", "projects/p/private", "resources"}
	return m
}
