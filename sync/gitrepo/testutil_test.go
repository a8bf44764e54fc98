package gitrepo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// newGitDir makes an empty repo on branch main with the git binary.
func newGitDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	return dir
}

var testNow = time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)

func testOptions() Options {
	return Options{
		Author:   Author{Name: "memd test", Email: "memd@test"},
		Hostname: "testhost",
		Now:      func() time.Time { return testNow },
	}
}

// openTest opens dir as a Repo and closes it (waiting for index refreshes)
// at the end of the test.
func openTest(t testing.TB, dir string, opts Options) *Repo {
	t.Helper()
	r, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// mustCommit commits and fails the test on error.
func mustCommit(t testing.TB, r *Repo, paths ...string) memd.CommitResult {
	t.Helper()
	res, err := r.CommitPaths(paths)
	if err != nil {
		t.Fatalf("CommitPaths(%q): %v", paths, err)
	}
	return res
}

// fsck runs git fsck --full --strict and fails on any complaint.
func fsck(t testing.TB, dir string) {
	t.Helper()
	testutil.RunGit(t, dir, "fsck", "--full", "--strict", "--no-progress")
}

// lsFiles is `git ls-tree -r HEAD` as path → "mode hash".
func lsTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := testutil.RunGit(t, dir, "-c", "core.quotepath=off", "ls-tree", "-r", "-z", "HEAD")
	m := make(map[string]string)
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, path, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		m[path] = f[0] + " " + f[2]
	}
	return m
}

// statusClean refreshes the index and requires `git status --porcelain` to
// be empty.
func statusClean(t testing.TB, r *Repo) {
	t.Helper()
	r.WaitIndexRefresh()
	if err := r.RefreshIndex(); err != nil {
		t.Fatal(err)
	}
	if out := testutil.RunGit(t, r.Dir(), "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("git status not clean after refresh:\n%s", out)
	}
}

// benchRepo returns a fresh copy (cp -a) of a committed and packed repo of
// n small files spread ~100 a folder; the original is built once per test
// binary and size. Also returns the files' paths.
func benchRepo(b *testing.B, n int) (string, []string) {
	b.Helper()
	fx, ok := benchFixtures[n]
	if !ok {
		root, err := os.MkdirTemp("", "memd-sync-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchRoots = append(benchRoots, root)
		dir := filepath.Join(root, "base")
		var files []string
		body := strings.Repeat("A remembered fact with enough words to look like a note. ", 12)
		for i := 0; i < n; i++ {
			folder := i / 100
			rel := fmt.Sprintf("%s/g%03d/f%03d/m-%06d.html",
				[]string{"projects", "areas", "resources", "archive"}[folder%4], folder/40, folder%40, i)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if i%100 == 0 {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					b.Fatal(err)
				}
			}
			if err := os.WriteFile(p, []byte(fmt.Sprintf("<p>%d %s</p>\n", i, body)), 0o644); err != nil {
				b.Fatal(err)
			}
			files = append(files, rel)
		}
		testutil.RunGit(b, dir, "init", "-q", "-b", "main")
		testutil.RunGit(b, dir, "add", "-A")
		testutil.RunGit(b, dir, "-c", "gc.auto=0", "commit", "-q", "-m", "initial") // no detached gc racing cp -a
		testutil.RunGit(b, dir, "repack", "-adq")
		testutil.RunGit(b, dir, "prune-packed")
		fx = benchFixture{dir: dir, files: files}
		benchFixtures[n] = fx
	}
	dst := filepath.Join(b.TempDir(), "repo")
	if out, err := exec.Command("cp", "-a", fx.dir, dst).CombinedOutput(); err != nil {
		b.Fatalf("cp -a: %v %s", err, out)
	}
	testutil.RunGit(b, dst, "update-index", "-q", "--refresh") // new inodes after the copy
	return dst, fx.files
}

type benchFixture struct {
	dir   string
	files []string
}

var (
	benchFixtures = map[int]benchFixture{}
	benchRoots    []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, r := range benchRoots {
		os.RemoveAll(r)
	}
	os.Exit(code)
}

// benchSizes: 1k and 10k; 100k only with MEMD_LONG=1.
func benchSizes() []int {
	if os.Getenv("MEMD_LONG") == "1" {
		return []int{1000, 10000, 100000}
	}
	return []int{1000, 10000}
}

// appendTo appends a line to each path.
func appendTo(b *testing.B, dir string, paths []string, i int) {
	b.Helper()
	for _, p := range paths {
		f, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(p)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(f, "<!-- %d -->\n", i)
		f.Close()
	}
}
