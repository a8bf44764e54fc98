package gitlayout

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// gitEnv is a user of their own (HOME in the test's temp dir) for plain git, the reference.
func gitEnv(t *testing.T) (testutil.Git, string) {
	t.Helper()
	home := t.TempDir()
	cfg := filepath.Join(home, ".gitconfig")
	if err := os.WriteFile(cfg, []byte("[user]\n\tname = T\n\temail = t@example.com\n[protocol \"file\"]\n\tallow = always\n[init]\n\tdefaultBranch = main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return testutil.Git{Env: testutil.IsolatedEnv(home, cfg)}, home
}

func run(t *testing.T, g testutil.Git, dir string, args ...string) string {
	t.Helper()
	out, err := g.Run(dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// Each layout git makes resolves to what `git rev-parse` says, and every file memd
// touches is where `git rev-parse --git-path` puts it.
func TestResolveAsGit(t *testing.T) {
	g, home := gitEnv(t)
	main := filepath.Join(home, "main")
	run(t, g, home, "init", "-q", main)
	run(t, g, main, "commit", "-q", "--allow-empty", "-m", "one")
	run(t, g, main, "worktree", "add", "-q", "-b", "other", filepath.Join(home, "linked"))
	run(t, g, home, "init", "-q", "--separate-git-dir", filepath.Join(home, "sep.git"), filepath.Join(home, "sep"))
	dots := filepath.Join(home, "dots")
	run(t, g, home, "init", "-q", dots)
	run(t, g, dots, "submodule", "add", "-q", main, "memory")
	run(t, g, dots, "commit", "-q", "-m", "sub")

	names := []string{"HEAD", "index", "index.lock", "logs/HEAD", "MERGE_HEAD", "ORIG_HEAD", "FETCH_HEAD",
		"config", "config.worktree", "objects/pack", "refs/heads/main", "refs/heads/main.lock", "refs/remotes/origin/main",
		"refs/bisect/x", "packed-refs", "packed-refs.lock", "logs/refs/heads/main", "hooks/pre-commit",
		"info/exclude", "info/sparse-checkout", "shallow", "memd/status.json"}
	for _, wt := range []string{main, filepath.Join(home, "linked"), filepath.Join(home, "sep"), filepath.Join(dots, "memory")} {
		l, err := Resolve(wt)
		if err != nil {
			t.Fatalf("%s: %v", wt, err)
		}
		abs := func(p string) string {
			if !filepath.IsAbs(p) {
				p = filepath.Join(wt, p)
			}
			return filepath.Clean(p)
		}
		if want := abs(run(t, g, wt, "rev-parse", "--git-dir")); l.GitDir != want {
			t.Errorf("%s: git dir %s, git says %s", wt, l.GitDir, want)
		}
		if want := abs(run(t, g, wt, "rev-parse", "--git-common-dir")); l.CommonDir != want {
			t.Errorf("%s: common dir %s, git says %s", wt, l.CommonDir, want)
		}
		if GitDir(wt) != l.GitDir {
			t.Errorf("%s: GitDir %s", wt, GitDir(wt))
		}
		for _, n := range names {
			if want := abs(run(t, g, wt, "rev-parse", "--git-path", n)); l.Path(n) != want && !strings.HasSuffix(n, ".lock") {
				t.Errorf("%s: %s at %s, git says %s", wt, n, l.Path(n), want)
			}
		}
	}
	if l, _ := Resolve(filepath.Join(home, "linked")); !l.Linked() || !l.GitFile {
		t.Errorf("linked worktree: %+v", l)
	}
	if l, _ := Resolve(main); l.Linked() || l.GitFile {
		t.Errorf("main worktree: %+v", l)
	}
}

// A .git file that names nothing, or says something else, is a clear error naming it.
func TestResolveBadGitFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Resolve(dir); !errors.Is(err, ErrNoGitDir) || !strings.Contains(err.Error(), dir) {
		t.Errorf("no .git: %v", err)
	}
	for _, body := range []string{"", "gitdir: \n", "gitdir: nowhere\n", "hello\n", "gitdir: a\nb\n"} {
		if err := os.WriteFile(filepath.Join(dir, ".git"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Resolve(dir); !errors.Is(err, ErrBadGitFile) || !strings.Contains(err.Error(), filepath.Join(dir, ".git")) {
			t.Errorf("%q: %v", body, err)
		}
		if GitDir(dir) != filepath.Join(dir, ".git") {
			t.Errorf("%q: GitDir %s", body, GitDir(dir))
		}
	}
}

// A submodule reached through a symlink: its relative gitdir is read from where the
// checkout really is, as git reads it.
func TestResolveThroughSymlink(t *testing.T) {
	g, home := gitEnv(t)
	sub := filepath.Join(home, "sub")
	run(t, g, home, "init", "-q", sub)
	run(t, g, sub, "commit", "-q", "--allow-empty", "-m", "one")
	dots := filepath.Join(home, "deep", "dots")
	run(t, g, home, "init", "-q", dots)
	run(t, g, dots, "submodule", "add", "-q", sub, "memory")
	link := filepath.Join(home, "mem")
	if err := os.Symlink(filepath.Join(dots, "memory"), link); err != nil {
		t.Fatal(err)
	}
	l, err := Resolve(link)
	if err != nil {
		t.Fatal(err)
	}
	if want := run(t, g, link, "rev-parse", "--absolute-git-dir"); l.GitDir != want {
		t.Fatalf("git dir %s, git says %s", l.GitDir, want)
	}
}
