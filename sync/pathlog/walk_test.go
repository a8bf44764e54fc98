package pathlog

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"
)

// genHistory writes n commits into the new repo dir through git fast-import, one change a
// commit (so git's rename detection sees no pair memd would not): edits, new memories,
// renames, archive moves and back, deletes and restores of the deleted content. It answers
// every path that ever held a file.
func genHistory(t *testing.T, dir string, seed int64, n int) []string {
	t.Helper()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	rng := rand.New(rand.NewSource(seed))
	live := map[string]string{} // path -> content
	gone := map[string]string{} // deleted path -> its last content
	ever := map[string]bool{}
	body := func() string {
		return fmt.Sprintf("<p>%x</p>\n", rng.Int63()) + strings.Repeat(fmt.Sprintf("%x\n", rng.Int63()), 8)
	}
	pick := func(m map[string]string, ok func(string) bool) string {
		var ks []string
		for k := range m {
			if ok(k) {
				ks = append(ks, k)
			}
		}
		if len(ks) == 0 {
			return ""
		}
		sort.Strings(ks)
		return ks[rng.Intn(len(ks))]
	}
	any := func(string) bool { return true }
	notArchived := func(p string) bool { return !strings.HasPrefix(p, "archive/") }
	var sb strings.Builder
	mod := func(p, c string) {
		fmt.Fprintf(&sb, "M 100644 inline %s\ndata %d\n%s\n", p, len(c), c)
		live[p], ever[p] = c, true
		delete(gone, p)
	}
	for i := 0; i < n; i++ {
		at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
		fmt.Fprintf(&sb, "commit refs/heads/main\ncommitter t <t@t> %d +0100\ndata 7\nc %04d\n", at.Unix(), i)
		newName := func() string { return fmt.Sprintf("areas/d%d/m%03d.html", rng.Intn(3), i) }
		switch r := rng.Intn(100); {
		case len(live) < 3 || r < 10:
			mod(newName(), body())
		case r < 55:
			p := pick(live, any)
			mod(p, body())
		case r < 65:
			if p := pick(live, notArchived); p != "" {
				q := newName()
				fmt.Fprintf(&sb, "R %s %s\n", p, q)
				live[q], ever[q] = live[p], true
				delete(live, p)
			}
		case r < 75:
			if p := pick(live, notArchived); p != "" {
				q := "archive/2026/" + p
				fmt.Fprintf(&sb, "R %s %s\n", p, q)
				live[q], ever[q] = live[p], true
				delete(live, p)
			}
		case r < 82:
			if p := pick(live, func(p string) bool {
				_, back := live[strings.TrimPrefix(p, "archive/2026/")]
				return !notArchived(p) && !back
			}); p != "" {
				q := strings.TrimPrefix(p, "archive/2026/")
				fmt.Fprintf(&sb, "R %s %s\n", p, q)
				live[q], ever[q] = live[p], true
				delete(live, p)
			}
		case r < 92:
			p := pick(live, any)
			fmt.Fprintf(&sb, "D %s\n", p)
			gone[p] = live[p]
			delete(live, p)
		default:
			if p := pick(gone, any); p != "" {
				mod(p, gone[p])
			}
		}
		sb.WriteString("\n")
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testutil.GitEnv(), strings.NewReader(sb.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	testutil.RunGit(t, dir, "reset", "-q", "--hard")
	var paths []string
	for p := range ever {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// walkIDs is the walk's commits for p, newest first, and the first deletion's commit.
func walkIDsActs(t *testing.T, dir, p string, acts map[string]int) (ids []string, deleted string) {
	t.Helper()
	src := Open(filepath.Join(dir, ".git"))
	defer src.Close()
	head := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")))
	w := &Walk{Source: src, Head: head, Path: p, Entry: func(e Entry) bool {
		ids = append(ids, e.Commit.String())
		if acts != nil {
			acts[e.Action]++
		}
		if e.Action == ActDeleted && deleted == "" {
			deleted = e.Commit.String()
		}
		return true
	}}
	if err := w.Run(); err != nil {
		t.Fatalf("walk %s: %v", p, err)
	}
	return ids, deleted
}

// sameAsGit checks every path's walk against git's own answers on the first-parent chain:
// `git log --follow` for the commits, `git log --diff-filter=D -1` for what restore finds
// for a path that is gone.
func sameAsGit(t *testing.T, dir string, paths []string) map[string]int {
	t.Helper()
	head := testutil.RunGit(t, dir, "ls-tree", "-r", "--name-only", "HEAD")
	inHead := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(head), "\n") {
		inHead[l] = true
	}
	acts := map[string]int{}
	for _, p := range paths {
		ids, deleted := walkIDsActs(t, dir, p, acts)
		want := strings.Fields(testutil.RunGit(t, dir, "log", "--first-parent", "--follow", "--format=%H", "--", p))
		if strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("%s: walk\n  %v\ngit log --follow\n  %v", p, ids, want)
		}
		if !inHead[p] {
			wantDel := strings.TrimSpace(testutil.RunGit(t, dir, "log", "--first-parent", "--diff-filter=D", "-1", "--format=%H", "--", p))
			if deleted != wantDel {
				t.Errorf("%s: first deletion %s, git log --diff-filter=D -1 says %s", p, deleted, wantDel)
			}
		}
	}
	return acts
}

func TestWalkEqualsGitLogFollow(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			paths := genHistory(t, dir, seed, 300)
			acts := sameAsGit(t, dir, paths)
			// The history has every kind of step, each seen by the walk.
			for _, a := range []string{ActAdded, ActModified, ActDeleted, ActRenamed, ActArchived, ActUnarchived} {
				if acts[a] == 0 {
					t.Errorf("no %s entry in the generated history: %v", a, acts)
				}
			}
			// The commit-graph (what `git gc` and KeepGraph write) gives the same answers.
			testutil.RunGit(t, dir, "commit-graph", "write", "--reachable")
			if openGraph(filepath.Join(dir, ".git")) == nil {
				t.Fatal("the commit-graph git wrote does not parse")
			}
			sameAsGit(t, dir, paths)
			// And with the changed-path filters, which let the walk skip a commit unread.
			testutil.RunGit(t, dir, "commit-graph", "write", "--reachable", "--changed-paths")
			if g := openGraph(filepath.Join(dir, ".git")); g == nil || g.bidx == nil {
				t.Fatal("no changed-path filters in the commit-graph git wrote")
			}
			sameAsGit(t, dir, paths)
			bloomAgreesWithGit(t, dir, paths)
		})
	}
}

// bloomAgreesWithGit checks the filters as git wrote them: every path a commit changed
// (and each directory above it) may be held, and most paths it did not change are ruled out
// (else the hash is not git's and the filters would skip nothing).
func bloomAgreesWithGit(t *testing.T, dir string, paths []string) {
	t.Helper()
	g := openGraph(filepath.Join(dir, ".git"))
	revs := strings.Fields(testutil.RunGit(t, dir, "rev-list", "--first-parent", "HEAD"))
	ruledOut, asked := 0, 0
	for _, rev := range revs[:len(revs)-1] {
		pos, ok := g.find(plumbing.NewHash(rev))
		if !ok {
			t.Fatalf("%s not in the graph", rev)
		}
		f := g.filter(pos)
		changed := map[string]bool{}
		for _, p := range strings.Fields(testutil.RunGit(t, dir, "diff-tree", "-r", "--name-only", "--no-renames", rev+"^", rev)) {
			for d := p; d != "."; d = filepath.Dir(d) {
				changed[d] = true
			}
		}
		for p := range changed {
			if k, _ := newBloomKey(p); !k.mayHold(f, g.hashes) {
				t.Fatalf("%s changed %s, its filter rules it out", rev, p)
			}
		}
		for _, p := range paths {
			if !changed[p] {
				asked++
				if k, _ := newBloomKey(p); !k.mayHold(f, g.hashes) {
					ruledOut++
				}
			}
		}
	}
	if ruledOut < asked*9/10 {
		t.Errorf("the filters ruled out %d of %d unchanged paths", ruledOut, asked)
	}
}

// Two machines' merges (the first parent is this machine's), then the user rewrites history
// under the commit-graph: an amend, a rebase, a reset and new commits. The graph describes
// commits by id, so the walk stays right where it is stale.
func TestWalkMergesAndRewrittenHistory(t *testing.T) {
	dir := t.TempDir()
	paths := genHistory(t, dir, 3, 120)
	laptop := filepath.Join(t.TempDir(), "laptop")
	testutil.RunGit(t, t.TempDir(), "clone", "-q", dir, laptop)
	live := strings.Fields(testutil.RunGit(t, dir, "ls-files"))
	edit := func(repo, p, c, msg string) {
		testutil.WriteFile(t, repo, p, c)
		testutil.RunGit(t, repo, "add", "-A")
		testutil.RunGit(t, repo, "commit", "-qm", msg)
	}
	for i := 0; i < 3; i++ {
		edit(laptop, live[i], fmt.Sprintf("laptop %d\n%s", i, strings.Repeat("l\n", 40)), "laptop edit")
		edit(dir, live[len(live)-1-i], fmt.Sprintf("desk %d\n%s", i, strings.Repeat("d\n", 40)), "desk edit")
		testutil.RunGit(t, dir, "pull", "-q", "--no-rebase", "--no-edit", laptop, "main")
		testutil.RunGit(t, laptop, "pull", "-q", "--no-rebase", "--no-edit", dir, "main")
	}
	paths = append(paths, live...)
	sameAsGit(t, dir, paths)
	testutil.RunGit(t, dir, "commit-graph", "write", "--reachable", "--changed-paths")
	sameAsGit(t, dir, paths)

	edit(dir, live[0], "amend me\n", "to amend")
	testutil.WriteFile(t, dir, live[0], "amended\n")
	testutil.RunGit(t, dir, "commit", "-qa", "--amend", "-m", "amended")
	testutil.RunGit(t, dir, "branch", "side", "HEAD~2")
	testutil.RunGit(t, dir, "checkout", "-q", "side")
	edit(dir, "areas/side.html", "side\n", "side")
	testutil.RunGit(t, dir, "checkout", "-q", "main")
	testutil.RunGit(t, dir, "rebase", "-q", "side")
	testutil.RunGit(t, dir, "reset", "-q", "--hard", "HEAD~1")
	testutil.RunGit(t, dir, "mv", live[1], "areas/moved-after-reset.html")
	testutil.RunGit(t, dir, "commit", "-qm", "moved")
	sameAsGit(t, dir, append(paths, "areas/side.html", "areas/moved-after-reset.html"))
}

// A truncated or foreign commit-graph is not read (the objects are), and the walk is right.
func TestWalkIgnoresBadGraph(t *testing.T) {
	dir := t.TempDir()
	paths := genHistory(t, dir, 4, 60)
	testutil.RunGit(t, dir, "commit-graph", "write", "--reachable")
	g := filepath.Join(dir, ".git", "objects", "info", "commit-graph")
	b, err := os.ReadFile(g)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(g, 0o644)
	if err := os.WriteFile(g, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if openGraph(filepath.Join(dir, ".git")) != nil {
		t.Fatal("a truncated commit-graph parsed")
	}
	sameAsGit(t, dir, paths[:10])
}

// A commit-graph whose first commit names itself as its parent (a damaged file) does not
// make the walk go round forever: past as many steps as the graph has commits, the commit
// objects answer.
func TestWalkSurvivesGraphCycle(t *testing.T) {
	dir := t.TempDir()
	paths := genHistory(t, dir, 5, 40)
	testutil.RunGit(t, dir, "commit-graph", "write", "--reachable")
	gitDir := filepath.Join(dir, ".git")
	g := openGraph(gitDir)
	head := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")))
	pos, ok := g.find(head)
	if !ok {
		t.Fatal("HEAD not in the graph")
	}
	f := filepath.Join(gitDir, "objects", "info", "commit-graph")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	// CDAT's entry for HEAD: its first parent is HEAD itself.
	off := strings.Index(string(b), string(g.cdat))
	if off < 0 {
		t.Fatal("CDAT not found in the file")
	}
	binary.BigEndian.PutUint32(b[off+graphDataLen*int(pos)+20:], pos)
	os.Chmod(f, 0o644)
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		src := Open(gitDir)
		defer src.Close()
		n := 0
		w := &Walk{Source: src, Head: head, Path: paths[0], Entry: func(Entry) bool { n++; return true }}
		if err := w.Run(); err != nil {
			t.Error(err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the walk went round the damaged graph's cycle")
	}
}

// TestWalkReadAhead: a walk long enough to read the chain ahead (prefetch.go) gives git's
// answers with no graph, with a graph that holds only the older half (the reader stops
// where the graph begins), and when it ends early; a read-ahead that went off the chain is
// noticed and the walk reads the parent itself.
func TestWalkReadAhead(t *testing.T) {
	dir := t.TempDir()
	paths := genHistory(t, dir, 3, 3*prefetchAfter+100)
	sameAsGit(t, dir, paths[:6])
	older := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", fmt.Sprintf("HEAD~%d", 2*prefetchAfter)))
	cmd := exec.Command("git", "commit-graph", "write", "--stdin-commits")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(older+"\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git commit-graph write: %v: %s", err, out)
	}
	if g := openGraph(filepath.Join(dir, ".git")); g == nil || g.count() == 0 {
		t.Fatal("no partial commit-graph")
	}
	sameAsGit(t, dir, paths[:6])

	// A reader only 8 commits ahead: one the walk's end did not stop would wait to send
	// forever, and be seen below.
	defer func(d int) { prefetchDepth = d }(prefetchDepth)
	prefetchDepth = 8
	src := Open(filepath.Join(dir, ".git"))
	defer src.Close()
	head := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")))
	n := 0
	w := &Walk{Source: src, Head: head, Path: paths[0], Visit: func(plumbing.Hash, time.Time, string) bool {
		n++
		return n == prefetchAfter+10 // ends while the reader is ahead
	}}
	if err := w.Run(); err != nil {
		t.Fatal(err)
	}
	// The walk's end stopped the reader and waited for it to release its store
	// (prefetcher.close); its goroutine is gone a moment later, never left reading.
	var st string
	if !testutil.Poll(5*time.Second, func() bool {
		buf := make([]byte, 1<<20)
		st = string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(st, "startPrefetch")
	}) {
		t.Errorf("a reader is left running after the walk ended:\n%s", st)
	}

	// Off the chain: a reader started at HEAD's grandparent is asked for HEAD's parent.
	c, err := src.commit(head)
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.firstParent(c)
	if err != nil {
		t.Fatal(err)
	}
	ahead := src.startPrefetch(p.parents[0])
	got, err := w.parent(c, &ahead)
	if err != nil || got.id != p.id {
		t.Fatalf("parent with a reader off the chain: %v, %v; want %s", got, err, p.id)
	}
	if ahead != nil {
		t.Fatal("the reader off the chain was not stopped")
	}
}
