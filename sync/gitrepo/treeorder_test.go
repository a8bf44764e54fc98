package gitrepo

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd/internal/testutil"
)

// treeEntryLess is git's tree order (a directory sorts as its name + "/"), find locates
// every entry of a sorted tree by binary search, and a merge of two sorted lists equals a
// sort of both.
func TestTreeOrderFindAndMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	names := []string{"a", "a.b", "a-b", "a0", "ab", "b", "a/", "é", "Z", "a.b.c", "aa"}
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	for round := 0; round < 200; round++ {
		seen := map[string]bool{}
		var es []object.TreeEntry
		for i := 0; i < 1+rng.IntN(12); i++ {
			n := names[rng.IntN(len(names))]
			if n == "a/" || seen[n] {
				continue
			}
			seen[n] = true
			m := filemode.Regular
			switch rng.IntN(3) {
			case 0:
				m = filemode.Dir
			case 1:
				m = filemode.Submodule
			}
			es = append(es, object.TreeEntry{Name: n, Mode: m})
		}
		want := append([]object.TreeEntry(nil), es...)
		sort.Slice(want, func(i, j int) bool { return key(want[i]) < key(want[j]) })
		got := append([]object.TreeEntry(nil), es...)
		sortTreeEntries(got)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d: order %v, want %v", round, got, want)
			}
		}
		tv := newTreeView(got)
		if tv.byName != nil {
			t.Fatalf("round %d: a sorted tree was indexed as out of order: %v", round, got)
		}
		for i, e := range got {
			if j, ok := tv.find(e.Name); !ok || j != i {
				t.Fatalf("round %d: find(%q) = %d, %v; want %d", round, e.Name, j, ok, i)
			}
		}
		if _, ok := tv.find("not-there"); ok {
			t.Fatalf("round %d: found an absent name", round)
		}
		k := rng.IntN(len(got) + 1)
		a, b := append([]object.TreeEntry(nil), got[:k]...), append([]object.TreeEntry(nil), got[k:]...)
		rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
		sortTreeEntries(a)
		merged := mergeTreeEntries(b, a)
		for i := range want {
			if merged[i] != want[i] {
				t.Fatalf("round %d: merge %v, want %v", round, merged, want)
			}
		}
	}
	// A tree out of git's order (foreign or damaged) is still searched correctly.
	tv := newTreeView([]object.TreeEntry{{Name: "b", Mode: filemode.Regular}, {Name: "a", Mode: filemode.Regular}})
	if i, ok := tv.find("a"); !ok || i != 1 {
		t.Fatalf("unsorted tree: find(a) = %d, %v", i, ok)
	}
}

// Commits that alternate between directories reuse the decoded trees of earlier commits
// (Repo.hot) and still write exactly the tree git would: the work tree is clean against
// HEAD after each, and fsck is happy.
func TestCommitsReuseHotTrees(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	for i := 0; i < 30; i++ {
		testutil.WriteFile(t, dir, fmt.Sprintf("a/f%02d.html", i), "a")
		testutil.WriteFile(t, dir, fmt.Sprintf("b/sub/f%02d.html", i), "b")
	}
	mustCommit(t, r, "a", "b")
	for i, p := range []string{"a/f03.html", "b/sub/f07.html", "a/f04.html", "a/new.html", "b/sub/f07.html", "b/sub/zz.html", "a/f03.html"} {
		testutil.WriteFile(t, dir, p, fmt.Sprintf("edit %d", i))
		mustCommit(t, r, p)
		if len(r.hot) == 0 {
			t.Fatalf("commit %d kept no hot trees", i)
		}
		r.WaitIndexRefresh()
		if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
			t.Fatalf("after commit %d (%s):\n%s", i, p, out)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, r, "b")
	if _, ok := r.hotDirs["b/sub"]; ok {
		t.Fatalf("a removed directory is still hot")
	}
	testutil.RunGit(t, dir, "fsck", "--strict")
	r.WaitIndexRefresh()
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("after removing b:\n%s", out)
	}
}
