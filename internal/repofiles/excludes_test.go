package repofiles_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/testutil"
)

// TestGlobalExcludesAsGitReadsThem: core.excludesFile at git's default place and set in
// the global config with a "~", below .git/info/exclude and the .gitignore files, never
// over a tracked path; `git check-ignore` and `git status` in the same HOME are the answer.
func TestGlobalExcludesAsGitReadsThem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string // global config
		excl    string // where the excludes file goes, under home
		wantRel string
	}{
		{name: "xdg default", excl: ".config/git/ignore"},
		{name: "tilde in config", config: "[core]\n\texcludesFile = ~/my-ignore\n", excl: "my-ignore"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			gitconfig := filepath.Join(home, ".gitconfig")
			testutil.WriteFile(t, home, ".gitconfig", "[user]\n\tname = t\n\temail = t@t\n"+tc.config)
			t.Setenv("HOME", home)
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			t.Setenv("GIT_CONFIG_GLOBAL", gitconfig)
			t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			testutil.WriteFile(t, home, tc.excl, ".DS_Store\n*.orig\nlocal-*\n")
			root := filepath.Join(home, "repo")
			git := testutil.Git{Env: testutil.IsolatedEnv(home, gitconfig)}
			if _, err := git.Run(home, nil, "init", "-q", "-b", "main", root); err != nil {
				t.Fatal(err)
			}
			testutil.WriteFile(t, root, ".gitignore", "!keep.orig\n")
			testutil.WriteFile(t, root, ".git/info/exclude", "!local-ok.html\n")
			files := []string{".DS_Store", "notes/.DS_Store", "a.html.orig", "notes/b.orig", "keep.orig",
				"local-x.html", "local-ok.html", "tracked.orig", "notes/a.html"}
			for _, f := range files {
				testutil.WriteFile(t, root, f, "x\n")
			}
			if _, err := git.Run(root, nil, "add", "-f", "tracked.orig"); err != nil {
				t.Fatal(err)
			}
			if _, err := git.Run(root, nil, "commit", "-qm", "tracked"); err != nil {
				t.Fatal(err)
			}
			if got, want := repofiles.ExcludesFile(root), filepath.Join(home, tc.excl); got != want {
				t.Fatalf("ExcludesFile = %q, want %q", got, want)
			}
			ig, err := repofiles.New(root, nil)
			if err != nil {
				t.Fatal(err)
			}
			status, err := git.Run(root, nil, "status", "--porcelain", "--untracked-files=all")
			if err != nil {
				t.Fatal(err)
			}
			shown := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(status), "\n") {
				if len(l) > 3 {
					shown[l[3:]] = true
				}
			}
			ignoredN := 0
			for _, f := range files {
				skip := ig.Skip(f, false)
				if f == "tracked.orig" {
					if skip {
						t.Errorf("Skip(%q) = true: a tracked path is never left out", f)
					}
					continue
				}
				if skip == shown[f] {
					t.Errorf("Skip(%q) = %v, but git status shows it: %v", f, skip, shown[f])
				}
				if skip {
					ignoredN++
				}
				cmd := exec.Command("git", "check-ignore", "-q", f)
				cmd.Dir, cmd.Env = root, git.Env
				gitIgnores := cmd.Run() == nil
				if gitIgnores != skip {
					t.Errorf("Skip(%q) = %v, git check-ignore says %v", f, skip, gitIgnores)
				}
			}
			if ignoredN != 5 {
				t.Errorf("%d paths ignored, want 5 (.DS_Store twice, two *.orig, local-x.html)", ignoredN)
			}
		})
	}
}

// TestGlobalExcludesEmptyValueReadsNone: `core.excludesFile =` (empty) turns the default off.
func TestGlobalExcludesEmptyValueReadsNone(t *testing.T) {
	home := t.TempDir()
	testutil.WriteFile(t, home, ".gitconfig", "[core]\n\texcludesFile =\n")
	testutil.WriteFile(t, home, ".config/git/ignore", "*.orig\n")
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, ".gitconfig"))
	root := newRepo(t)
	if got := repofiles.ExcludesFile(root); got != "" {
		t.Errorf("ExcludesFile = %q, want none", got)
	}
	if err := os.WriteFile(filepath.Join(root, "a.orig"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ig, err := repofiles.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ig.Ignored("a.orig", false) {
		t.Error("a.orig ignored with core.excludesFile set empty")
	}
}

// An edit of the global excludes file is seen (ExcludesChanged, one stat) and read by Reload.
func TestGlobalExcludesChangedAndReloaded(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	root := newRepo(t)
	ig, err := repofiles.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ig.ExcludesChanged() || ig.Ignored(".DS_Store", false) {
		t.Fatal("no global excludes file yet")
	}
	testutil.WriteFile(t, home, ".config/git/ignore", ".DS_Store\n")
	if !ig.ExcludesChanged() {
		t.Fatal("a new global excludes file is not seen")
	}
	if ig, err = ig.Reload(); err != nil {
		t.Fatal(err)
	}
	if ig.ExcludesChanged() || !ig.Ignored(".DS_Store", false) {
		t.Fatal("Reload did not read the global excludes file")
	}
}
