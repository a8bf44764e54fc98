package gitrepo

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd/internal/testutil"
)

func TestAdler32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		b := make([]byte, rng.IntN(200000))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		if round%3 == 0 {
			for i := range b {
				b[i] = 0xff // the sums' largest values
			}
		}
		cut := 0
		if len(b) > 0 {
			cut = rng.IntN(len(b) + 1)
		}
		got := adler32Combine(adler32.Checksum(b[:cut]), adler32.Checksum(b[cut:]), len(b)-cut)
		if want := adler32.Checksum(b); got != want {
			t.Fatalf("round %d (len %d, cut %d): combined %08x, want %08x", round, len(b), cut, got, want)
		}
	}
}

// inflatePieces decompresses the zlib stream of a packed tree with Go's own reader (which
// checks the adler-32) and compares it with the tree object of es.
func inflatePieces(t *testing.T, es []object.TreeEntry, pt *packedTree) {
	t.Helper()
	raw := appendTree(nil, es)
	hdr := objectHeader(plumbing.TreeObject, int64(len(raw)))
	zr, err := zlib.NewReader(bytes.NewReader(appendZlibPieces(nil, hdr, pt)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("inflate: %v", err)
	}
	if !bytes.Equal(got, append(hdr, raw...)) {
		t.Fatalf("inflated %d bytes, not the %d of the tree", len(got), len(hdr)+len(raw))
	}
	ne := 0
	for _, c := range pt.chunks {
		ne += c.ne
	}
	if ne != len(es) {
		t.Fatalf("pieces hold %d entries, the tree %d", ne, len(es))
	}
}

// A change recompresses only the pieces it touches; the rest are the base's, shared.
func TestPackTreeReusesUnchangedPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	entry := func(i int) object.TreeEntry {
		e := object.TreeEntry{Name: fmt.Sprintf("2024-%06d-a-memory-file-name.html", i), Mode: filemode.Regular}
		e.Hash[0], e.Hash[1], e.Hash[19] = byte(i), byte(i>>8), byte(rng.IntN(256))
		return e
	}
	var es []object.TreeEntry
	for i := range 8000 {
		es = append(es, entry(i*10))
	}
	base := &treeView{entries: es}
	base.z = packTree(es, appendTree(nil, es), nil)
	inflatePieces(t, es, base.z)
	for round := range 60 {
		nw := slices.Clone(base.entries)
		at := rng.IntN(len(nw))
		switch round % 3 {
		case 0: // modify
			nw[at].Hash[5]++
		case 1: // insert
			nw = slices.Insert(nw, at, entry(rng.IntN(80000)))
		case 2: // delete
			nw = slices.Delete(nw, at, at+1)
		}
		pt := packTree(nw, appendTree(nil, nw), base)
		inflatePieces(t, nw, pt)
		if fresh := len(pt.chunks) - samePieces(base.z, pt); fresh > 2 {
			t.Fatalf("round %d: %d of %d pieces recompressed for one change", round, fresh, len(pt.chunks))
		}
		base = &treeView{entries: nw, z: pt}
	}
	// Changes far apart: the pieces between them are compressed again (correct, not minimal).
	nw := slices.Clone(base.entries)
	nw[0].Hash[3]++
	nw[len(nw)-1].Hash[3]++
	inflatePieces(t, nw, packTree(nw, appendTree(nil, nw), base))
}

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
	pieces := func(step string) *packedTree {
		t.Helper()
		h := r.hotDirs["big"]
		tv := r.hot[h]
		if tv == nil || tv.z == nil {
			t.Fatalf("%s: big/'s tree is not kept in pieces", step)
		}
		inflatePieces(t, tv.entries, tv.z)
		return tv.z
	}
	edit := func(p, s string) { testutil.WriteFile(t, dir, p, s) }

	edit(name(n/2), "changed\n")
	commit("modify, cold", name(n/2))
	before := pieces("modify, cold")
	edit(name(n/2+1), "changed\n")
	commit("modify, hot", name(n/2+1))
	after := pieces("modify, hot")
	if same := samePieces(before, after); same < len(after.chunks)-2 {
		t.Fatalf("one-file change reused %d of %d pieces", same, len(after.chunks))
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

// samePieces counts the pieces of b shared with a.
func samePieces(a, b *packedTree) int {
	shared := map[*byte]bool{}
	for _, c := range a.chunks {
		shared[&c.z[0]] = true
	}
	same := 0
	for _, c := range b.chunks {
		if shared[&c.z[0]] {
			same++
		}
	}
	return same
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
	r := openTest(t, dir, testOptions())
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
	if now == nil || now.z == nil || samePieces(warm.z, now.z) < len(now.z.chunks)-2 {
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
	r := openTest(t, dir, testOptions())
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
