package gitrepo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitstore"
)

// A directory big enough to be written in pieces, changed commit after commit in the ways
// a tree's order can trip on ("a" vs "a.b" vs "a/", first and last entries, a file
// replaced by a directory, changes far apart, shrinking below packMin and growing back):
// every tree is the one git makes of the same entries (git mktree), git fsck is clean,
// and the directory's tree is kept in pieces for the next commit.
func TestBigTreePiecesMatchGit(t *testing.T) {
	dir := newGitDir(t)
	const n = 2200 // ~200 KB of tree
	name := func(i int) string {
		return fmt.Sprintf("big/2024%04d-a-memory-with-a-long-descriptive-file-name-%d.html", i/10, i)
	}
	for i := range n {
		testutil.WriteFile(t, dir, name(i), fmt.Sprintf("m%d\n", i))
	}
	for _, p := range []string{"big/a", "big/a.b", "big/a-b", "big/a0"} {
		testutil.WriteFile(t, dir, p, p+"\n")
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "init")
	r := openTest(t, dir, testOptions())

	check := func(step string) {
		t.Helper()
		want := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD:big"))
		ls := testutil.RunGit(t, dir, "ls-tree", "HEAD:big")
		cmd := exec.Command("git", "mktree")
		cmd.Dir, cmd.Env, cmd.Stdin = dir, testutil.GitEnv(), strings.NewReader(ls)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: git mktree: %v", step, err)
		}
		if got := strings.TrimSpace(string(out)); got != want {
			t.Fatalf("%s: memd's tree of big/ is %s, git mktree makes %s of the same entries", step, want, got)
		}
		testutil.RunGit(t, dir, "fsck", "--strict", "--no-dangling", "--no-progress")
	}
	commit := func(step string, paths ...string) {
		t.Helper()
		abs := make([]string, len(paths))
		for i, p := range paths {
			abs[i] = filepath.Join(dir, filepath.FromSlash(p))
		}
		res, err := r.CommitPaths(abs)
		if err != nil || res.Hash == "" {
			t.Fatalf("%s: commit %v: %+v, %v", step, paths, res, err)
		}
		check(step)
	}
	pieces := func(step string) *gitstore.PackedTree {
		t.Helper()
		h := r.hotDirs["big"]
		tv := r.hot[h]
		if tv == nil || tv.z == nil {
			t.Fatalf("%s: big/'s tree is not kept in pieces", step)
		}
		if err := tv.z.Verify(tv.entries); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return tv.z
	}
	edit := func(p, s string) { testutil.WriteFile(t, dir, p, s) }

	edit(name(n/2), "changed\n")
	commit("modify, cold", name(n/2))
	before := pieces("modify, cold")
	edit(name(n/2+1), "changed\n")
	commit("modify, hot", name(n/2+1))
	after := pieces("modify, hot")
	if same := after.SharedWith(before); same < after.Pieces()-2 {
		t.Fatalf("one-file change reused %d of %d pieces", same, after.Pieces())
	}

	_ = os.Remove(filepath.Join(dir, "big", "a"))
	edit("big/a/x", "a dir\n")
	commit("file a replaced by directory a/", "big/a")
	edit("big/0000-first.html", "first\n")
	edit("big/zzzz-last.html", "last\n")
	edit(name(7), "far apart 1\n")
	edit(name(n-7), "far apart 2\n")
	commit("first, last and far apart", "big/0000-first.html", "big/zzzz-last.html", name(7), name(n-7))
	_ = os.Remove(filepath.Join(dir, "big", "a.b"))
	edit("big/a.b/y", "now a directory too\n")
	commit("a.b replaced by a directory", "big/a.b")
	_ = os.Remove(filepath.Join(dir, filepath.FromSlash(name(100))))
	commit("delete", name(100))
	pieces("delete")

	// Shrink below packMin (written whole), then grow back (in pieces again).
	var gone []string
	for i := 200; i < 1800; i++ {
		_ = os.Remove(filepath.Join(dir, filepath.FromSlash(name(i))))
		gone = append(gone, name(i))
	}
	commit("shrink", gone...)
	for _, p := range gone {
		edit(p, "back\n")
	}
	commit("grow back", gone...)
	pieces("grow back")
	edit(name(1000), "after regrowth\n")
	commit("modify after regrowth", name(1000))
}

// Past the budget, the hot trees of the directories written longest ago go first; the
// ones written again and again stay.
func TestHotTreesEvictLeastRecentlyWritten(t *testing.T) {
	dir := newGitDir(t)
	for _, d := range []string{"d1", "d2", "d3"} {
		for i := range 100 {
			testutil.WriteFile(t, dir, fmt.Sprintf("%s/f%03d", d, i), "x\n")
		}
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "init")
	r := openTest(t, dir, testOptions())
	defer func(m int) { maxHotEntries = m }(maxHotEntries)
	maxHotEntries = 250 // two of the three directories, and the root
	for i, d := range []string{"d1", "d2", "d1", "d3"} {
		testutil.WriteFile(t, dir, d+"/f000", fmt.Sprintf("change %d\n", i))
		if _, err := r.CommitPaths([]string{filepath.Join(dir, d, "f000")}); err != nil {
			t.Fatal(err)
		}
	}
	for d, want := range map[string]bool{"": true, "d1": true, "d2": false, "d3": true} {
		h, ok := r.hotDirs[d]
		if ok && r.hot[h] == nil {
			ok = false
		}
		if ok != want {
			t.Errorf("directory %q hot = %v, want %v (hot: %v)", d, ok, want, r.hotDirs)
		}
	}
}

// A full index refresh (at start) decodes every tree of HEAD; the big ones stay hot, in
// pieces, so the first commit in a big directory after a start reuses them.
func TestFullRefreshWarmsBigTrees(t *testing.T) {
	dir := newGitDir(t)
	for i := range 2200 {
		testutil.WriteFile(t, dir, fmt.Sprintf("big/2024-a-memory-with-a-long-descriptive-file-name-%04d.html", i), "x\n")
	}
	testutil.WriteFile(t, dir, "small/a.html", "a\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "init")
	o := testOptions()
	o.WarmTrees = true
	r := openTest(t, dir, o)
	if err := r.RefreshIndex(); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	h := r.hotDirs["big"]
	warm := r.hot[h]
	_, smallHot := r.hotDirs["small"]
	r.mu.Unlock()
	if warm == nil || warm.z == nil {
		t.Fatalf("after a full refresh big/ is not hot in pieces (hot dirs %v)", r.hotDirs)
	}
	if smallHot {
		t.Fatal("a small directory was warmed")
	}
	if want := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD:big")); h.String() != want {
		t.Fatalf("warm tree of big/ is %s, HEAD has %s", h, want)
	}
	p := filepath.Join(dir, "big", "2024-a-memory-with-a-long-descriptive-file-name-1100.html")
	testutil.WriteFile(t, dir, "big/2024-a-memory-with-a-long-descriptive-file-name-1100.html", "changed\n")
	if _, err := r.CommitPaths([]string{p}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	now := r.hot[r.hotDirs["big"]]
	r.mu.Unlock()
	if now == nil || now.z == nil || now.z.SharedWith(warm.z) < now.z.Pieces()-2 {
		t.Fatal("the first commit in big/ did not reuse the warm pieces")
	}
	ls := testutil.RunGit(t, dir, "ls-tree", "HEAD:big")
	cmd := exec.Command("git", "mktree")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testutil.GitEnv(), strings.NewReader(ls)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD:big")); got != want {
		t.Fatalf("memd's tree %s, git mktree %s", want, got)
	}
	testutil.RunGit(t, dir, "fsck", "--strict", "--no-dangling", "--no-progress")
}

// The warmed trees carry the clock biggest last, so the first commit past the budget
// evicts the smaller warmed tree, not the biggest (which the next commit in its directory
// would read and compress cold again: ~20 ms for a 2 MB tree).
func TestWarmedBigTreesEvictSmallestFirst(t *testing.T) {
	dir := newGitDir(t)
	// Long names: a tree of packMin bytes in fewer files.
	name := strings.Repeat("a-memory-with-a-long-descriptive-file-name-", 4) + "%04d.html"
	for d, n := range map[string]int{"big1": 900, "big2": 700, "mid": 300} {
		for i := range n {
			testutil.WriteFile(t, dir, fmt.Sprintf("%s/"+name, d, i), "x\n")
		}
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "init")
	o := testOptions()
	o.WarmTrees = true
	r := openTest(t, dir, o)
	defer func(m int) { maxHotEntries = m }(maxHotEntries)
	maxHotEntries = 1850 // both big trees warm (1600 of 1850 - 1850/8), not with mid/ too
	if err := r.RefreshIndex(); err != nil {
		t.Fatal(err)
	}
	if len(r.hotDirs) != 2 {
		t.Fatalf("warmed %v, want big1 and big2", r.hotDirs)
	}
	testutil.WriteFile(t, dir, fmt.Sprintf("mid/"+name, 1), "changed\n")
	if _, err := r.CommitPaths([]string{filepath.Join(dir, "mid", fmt.Sprintf(name, 1))}); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{"big1": true, "big2": false, "mid": true} {
		h, ok := r.hotDirs[d]
		if ok && r.hot[h] == nil {
			ok = false
		}
		if ok != want {
			t.Errorf("directory %q hot = %v, want %v (hot: %v)", d, ok, want, r.hotDirs)
		}
	}
}
