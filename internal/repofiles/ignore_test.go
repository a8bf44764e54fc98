package repofiles_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/internal/testutil"
)

// gitignoreTree is a repo with root, nested and info/exclude rules, and paths that hit
// the interesting cases (anchoring, dir-only, negation, ** and re-including below an
// excluded directory, which git does not allow).
func gitignoreTree(t *testing.T) (root string, files, dirs []string) {
	root = newRepo(t)
	testutil.WriteFile(t, root, ".gitignore", strings.Join([]string{
		"# comment",
		"*.log",
		"!important.log",
		"build/",
		"/rooted.html",
		"docs/**/draft-*.html",
		"cache",
		"excluded/",
		"!excluded/keep.html",
		"   ",
		"space.html   ",
	}, "\n")+"\n")
	testutil.WriteFile(t, root, "projects/p/.gitignore", "secret.html\n!debug.log\n/local/\n")
	testutil.WriteFile(t, root, "projects/p/q/.gitignore", "!secret.html\n")
	testutil.WriteFile(t, root, ".git/info/exclude", "mine-*\n")
	files = []string{
		"a.log", "important.log", "x/important.log", "x/a.log", "x/a.html",
		"build/out.html", "x/build/out.html", "build.html",
		"rooted.html", "x/rooted.html",
		"docs/a/b/draft-1.html", "docs/draft-2.html", "docs/a/final.html",
		"cache", "x/cache/y.html",
		"excluded/keep.html", "excluded/other.html",
		"space.html",
		"projects/p/secret.html", "projects/p/q/secret.html", "projects/secret.html",
		"projects/p/debug.log", "projects/p/local/l.html", "projects/p/q/local/l.html",
		"mine-notes.html", "x/mine-too.html",
		"areas/ok.html",
	}
	for _, f := range files {
		testutil.WriteFile(t, root, f, "x")
	}
	seen := map[string]bool{}
	for _, f := range files {
		for d := filepath.ToSlash(filepath.Dir(f)); d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	sort.Strings(dirs)
	return root, files, dirs
}

// TestIgnorerAgreesWithGit checks every path against `git check-ignore`.
func TestIgnorerAgreesWithGit(t *testing.T) {
	root, files, dirs := gitignoreTree(t)
	ig, err := repofiles.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	all := append(append([]string(nil), files...), dirs...)
	out := gitCheckIgnore(t, root, all)
	isDir := map[string]bool{}
	for _, d := range dirs {
		isDir[d] = true
	}
	if len(out) < 10 || len(out) > len(all)-10 {
		t.Fatalf("git ignores %d of %d paths: the tree does not test both ways", len(out), len(all))
	}
	for _, p := range all {
		if got, want := ig.Ignored(p, isDir[p]), out[p]; got != want {
			t.Errorf("Ignored(%q, dir=%v) = %v, git check-ignore says %v", p, isDir[p], got, want)
		}
	}
}

func gitCheckIgnore(t *testing.T, root string, paths []string) map[string]bool {
	t.Helper()
	res := map[string]bool{}
	for _, p := range paths {
		// One call a path: --stdin batches differ in how they treat excluded parents.
		cmd := exec.Command("git", "check-ignore", "--no-index", p)
		cmd.Dir, cmd.Env = root, testutil.GitEnv()
		out, err := cmd.Output()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			continue // not ignored
		} else if err != nil {
			t.Fatalf("git check-ignore %s: %v", p, err)
		}
		if strings.TrimSpace(string(out)) != "" {
			res[p] = true
		}
	}
	return res
}

func TestIgnorerMemdRules(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, ".gitignore", "!*.swp\n") // cannot re-include memd's own list
	ig, err := repofiles.New(root, []string{"*.bak", "private/"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		rel   string
		dir   bool
		want  bool
		cause string
	}{
		{".git", true, true, ".git"},
		{".git/HEAD", false, true, ".git"},
		{"x/.git/config", false, true, "nested .git"},
		{".memory.lock", false, true, "writer lock"},
		{"a.html.swp", false, true, "DefaultIgnore"},
		{"notes.html~", false, true, "DefaultIgnore"},
		{"areas/4913", false, true, "DefaultIgnore"},
		{".#notes.html", false, true, "DefaultIgnore"},
		{"x.tmp", false, true, "DefaultIgnore"},
		{"areas/.memd-tmp-x", false, true, "an older memd's temp name (scaffold.IgnoreLines)"},
		{"sub/.memory.lock", false, true, "the lock line of scaffold.IgnoreLines, as .gitignore has it"},
		{".memd-tmp-123", false, true, "memd's older temp name"},
		{"areas/.memd-ABC.tmp", false, true, "memd's temp name"},
		{".memhtml/index.db", false, true, "memhtml's index"},
		{".memhtml/state.db-wal", false, true, "memhtml's state side file"},
		{".memhtml/index.db-shm", false, true, "memhtml's index side file"},
		{".memhtml/state/access.jsonl", false, false, "memhtml's committed sidecar"},
		{".memhtml/sleep/run.html", false, false, "memhtml's committed sleep report"},
		{"areas/.memhtml/index.db", false, false, "anchored at the root"},
		{"x.bak", false, true, "extra"},
		{"private", true, true, "extra dir"},
		{"private/a.html", false, true, "below an extra dir"},
		{"a/private", false, false, "dir-only pattern, a file"},
		{"areas/notes.html", false, false, "plain memory"},
		{".gitignore", false, false, "the rules themselves are committed"},
		{"/areas/x.html/", false, false, "slashes trimmed"},
		{"", true, false, "root"},
	}
	for _, c := range cases {
		if got := ig.Ignored(c.rel, c.dir); got != c.want {
			t.Errorf("Ignored(%q) = %v, want %v (%s)", c.rel, got, c.want, c.cause)
		}
	}
	if len(repofiles.DefaultIgnore) != 5+len(scaffold.IgnoreLines) {
		t.Errorf("DefaultIgnore = %q", repofiles.DefaultIgnore)
	}
}

func TestIgnorerSkipsGitignoreInIgnoredDir(t *testing.T) {
	root := newRepo(t)
	testutil.WriteFile(t, root, ".gitignore", "vendor/\n")
	// git never reads rules inside an ignored directory; neither may we.
	testutil.WriteFile(t, root, "vendor/.gitignore", "!*\n")
	testutil.WriteFile(t, root, "vendor/x.html", "x")
	ig, err := repofiles.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ig.Ignored("vendor/x.html", false) {
		t.Fatal("vendor/x.html not ignored")
	}
}

func TestNewErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	if _, err := repofiles.New(missing, nil); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("New(missing) = %v, want an error naming it", err)
	}
	_, err := repofiles.New(t.TempDir(), []string{"ok", "bad[", "also-ok"})
	if !errors.Is(err, repofiles.ErrBadPattern) || !strings.Contains(err.Error(), `"bad["`) {
		t.Fatalf("New(bad pattern) = %v, want ErrBadPattern naming it", err)
	}
	if _, err := repofiles.New(t.TempDir(), []string{"", "x"}); !errors.Is(err, repofiles.ErrBadPattern) {
		t.Fatalf("empty pattern: %v", err)
	}
	if _, err := repofiles.New(t.TempDir(), []string{"*.bak", "drafts/", "**/tmp", "!keep.bak"}); err != nil {
		t.Fatalf("good patterns refused: %v", err)
	}
}

func TestIgnorerUnreadableGitignoreIsNoRules(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads everything")
	}
	root := newRepo(t)
	testutil.WriteFile(t, root, ".gitignore", "*.html\n")
	if err := os.Chmod(filepath.Join(root, ".gitignore"), 0); err != nil {
		t.Fatal(err)
	}
	ig, err := repofiles.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ig.Ignored("a.html", false) {
		t.Fatal("rules from an unreadable .gitignore applied")
	}
}

// FuzzIgnored: any input is answered without panicking, and leading/trailing slashes do
// not change the answer. Seeds run in every `go test`; fuzz with -fuzz=FuzzIgnored.
func FuzzIgnored(f *testing.F) {
	for _, s := range []string{"", "/", "//", "a//b", "../x", "./x", ".git", "a/.git/b", "x.log",
		"build/a", "[", "a\\b", "\x00", strings.Repeat("a/", 200) + "b.swp"} {
		f.Add(s, false)
	}
	root := f.TempDir()
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.log\nbuild/\n!keep.log\n[\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	ig, err := repofiles.New(root, []string{"*.bak"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rel string, isDir bool) {
		a := ig.Ignored(rel, isDir)
		if b := ig.Ignored("/"+rel+"/", isDir); a != b {
			t.Fatalf("Ignored(%q)=%v but Ignored(%q)=%v", rel, a, "/"+rel+"/", b)
		}
	})
}

// The temp files memd's one atomic writer (internal/safefs) makes are ignored with no
// .gitignore at all, so a write in flight is never committed: the watcher's defaults and
// safefs's temp name cannot drift apart.
func TestIgnorerIgnoresSafefsTemps(t *testing.T) {
	root := newRepo(t)
	if err := os.MkdirAll(filepath.Join(root, "areas"), 0o755); err != nil {
		t.Fatal(err)
	}
	tr, err := safefs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ig, err := repofiles.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"areas/notes.html", memd.DefaultLockFile} {
		tm, err := tr.CreateTemp(rel, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if !ig.Ignored(tm.Path(), false) {
			t.Errorf("safefs temp %s (for %s) is not ignored", tm.Path(), rel)
		}
		tm.Abort()
	}
}

func newRepo(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q")
	return dir
}
