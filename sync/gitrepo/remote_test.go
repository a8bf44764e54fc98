package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"
)

// syncWorld is a bare remote and two clones of it, A and B, each opened
// with Open, as two machines sharing one memory repo.
type syncWorld struct {
	bare       string
	aDir, bDir string
	a, b       *Repo
}

func hostOptions(host string) Options {
	o := testOptions()
	o.Hostname = host
	return o
}

// newSyncWorld seeds a bare remote with files (path → content) through the
// git binary and clones it twice.
func newSyncWorld(t *testing.T, files map[string]string) *syncWorld {
	t.Helper()
	w := &syncWorld{bare: filepath.Join(t.TempDir(), "remote.git")}
	testutil.RunGit(t, filepath.Dir(w.bare), "init", "-q", "--bare", "-b", "main", w.bare)
	if len(files) > 0 {
		seed := newGitDir(t)
		for p, c := range files {
			testutil.WriteFile(t, seed, p, c)
		}
		testutil.RunGit(t, seed, "add", "-A")
		testutil.RunGit(t, seed, "commit", "-q", "-m", "seed")
		testutil.RunGit(t, seed, "push", "-q", w.bare, "main")
	}
	w.aDir = filepath.Join(t.TempDir(), "a")
	w.bDir = filepath.Join(t.TempDir(), "b")
	for _, d := range []string{w.aDir, w.bDir} {
		testutil.RunGit(t, filepath.Dir(d), "clone", "-q", w.bare, d)
		if len(files) == 0 {
			testutil.RunGit(t, d, "symbolic-ref", "HEAD", "refs/heads/main")
		}
	}
	w.a = openTest(t, w.aDir, hostOptions("hosta"))
	w.b = openTest(t, w.bDir, hostOptions("hostb"))
	return w
}

func pushOpts() RemoteOptions { return RemoteOptions{Push: true, Timeout: 30 * time.Second} }

func mustSync(t *testing.T, r *Repo) SyncResult {
	t.Helper()
	res, err := r.Sync(context.Background(), pushOpts())
	if err != nil {
		t.Fatalf("Sync %s: %v", r.Dir(), err)
	}
	return res
}

// syncAll runs A, B, A: after it both clones and the remote agree.
func (w *syncWorld) syncAll(t *testing.T) (ra, rb SyncResult) {
	t.Helper()
	ra = mustSync(t, w.a)
	rb = mustSync(t, w.b)
	mustSync(t, w.a)
	return ra, rb
}

// check is the invariant after every scenario: fsck clean on all three,
// one HEAD everywhere, no conflict markers, clean status, nothing ahead or
// behind.
func (w *syncWorld) check(t *testing.T) {
	t.Helper()
	for _, d := range []string{w.aDir, w.bDir, w.bare} {
		fsck(t, d)
	}
	ha := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD"))
	hb := strings.TrimSpace(testutil.RunGit(t, w.bDir, "rev-parse", "HEAD"))
	hr := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	if ha != hb || hb != hr {
		t.Fatalf("heads differ: a %s b %s remote %s", ha, hb, hr)
	}
	for _, r := range []*Repo{w.a, w.b} {
		noMarkers(t, r.Dir())
		statusClean(t, r)
		ahead, behind, err := r.AheadBehind(pushOpts())
		if err != nil || ahead != 0 || behind != 0 {
			t.Fatalf("%s: ahead %d behind %d err %v", r.Dir(), ahead, behind, err)
		}
	}
}

func noMarkers(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "<<<<<<<") || strings.Contains(string(b), ">>>>>>>") {
				t.Errorf("conflict marker in %s", p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readWork(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return string(b)
}

func absent(t *testing.T, dir, rel string) {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s should not exist in %s (err %v)", rel, dir, err)
	}
}

func removeFile(t *testing.T, dir, rel string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, filepath.FromSlash(rel))); err != nil {
		t.Fatal(err)
	}
}

func renameFile(t *testing.T, dir, from, to string) {
	t.Helper()
	dst := filepath.Join(dir, filepath.FromSlash(to))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, filepath.FromSlash(from)), dst); err != nil {
		t.Fatal(err)
	}
}

// conflictCopies lists work tree files named like conflict copies.
func conflictCopies(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d != nil && strings.Contains(d.Name(), ".conflict-") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func TestSyncBothEditDifferentFiles(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/base.html": "base\n"})
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "a\n")
	mustCommit(t, w.a, "areas/from-a.html")
	testutil.WriteFile(t, w.bDir, "projects/p/from-b.html", "b\n")
	mustCommit(t, w.b, "projects/p/from-b.html")
	ra, rb := w.syncAll(t)
	if !ra.Pushed || ra.Merged {
		t.Errorf("A first sync: %+v", ra)
	}
	if !rb.Merged || !rb.Pushed || len(rb.Conflicts) != 0 || rb.MergeHash == "" {
		t.Errorf("B sync: %+v", rb)
	}
	w.check(t)
	for _, d := range []string{w.aDir, w.bDir} {
		if readWork(t, d, "areas/from-a.html") != "a\n" || readWork(t, d, "projects/p/from-b.html") != "b\n" {
			t.Errorf("%s misses a file", d)
		}
	}
	msg := testutil.RunGit(t, w.bDir, "log", "-1", "--format=%B", rb.MergeHash)
	if !strings.HasPrefix(msg, "memd: merge origin/main") || !strings.Contains(msg, "Memd-Host: hostb") {
		t.Errorf("merge message %q", msg)
	}
	if parents := strings.Fields(testutil.RunGit(t, w.bDir, "log", "-1", "--format=%P", rb.MergeHash)); len(parents) != 2 {
		t.Errorf("merge parents %v", parents)
	}
}

func TestSyncSameMemoryConflictCopy(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/oncall/rollback.html": "base\n"})
	testutil.WriteFile(t, w.aDir, "areas/oncall/rollback.html", "edited on A\n")
	mustCommit(t, w.a, "areas/oncall/rollback.html")
	testutil.WriteFile(t, w.bDir, "areas/oncall/rollback.html", "edited on B\n")
	mustCommit(t, w.b, "areas/oncall/rollback.html")
	_, rb := w.syncAll(t)
	want := "areas/oncall/rollback.conflict-hostb-20261130T143205Z.html"
	if len(rb.Conflicts) != 1 || rb.Conflicts[0] != want {
		t.Fatalf("conflicts %q, want [%s]", rb.Conflicts, want)
	}
	w.check(t)
	for _, d := range []string{w.aDir, w.bDir} {
		if got := readWork(t, d, "areas/oncall/rollback.html"); got != "edited on A\n" {
			t.Errorf("%s: path holds %q, want theirs (A, pushed first)", d, got)
		}
		if got := readWork(t, d, want); got != "edited on B\n" {
			t.Errorf("%s: conflict copy holds %q", d, got)
		}
		if cc := conflictCopies(t, d); len(cc) != 1 {
			t.Errorf("%s: conflict copies %v", d, cc)
		}
	}
}

func TestSyncLedgerAppendsBothSides(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"memory.jsonl": recA + "\n" + recB + "\n"})
	testutil.WriteFile(t, w.aDir, "memory.jsonl", recA+"\n"+recB+"\n"+recD+"\n")
	mustCommit(t, w.a, "memory.jsonl")
	testutil.WriteFile(t, w.bDir, "memory.jsonl", recA+"\n"+recB+"\n"+recE+"\n")
	mustCommit(t, w.b, "memory.jsonl")
	_, rb := w.syncAll(t)
	if len(rb.Conflicts) != 0 {
		t.Errorf("ledger merge made conflict copies %v", rb.Conflicts)
	}
	w.check(t)
	for _, d := range []string{w.aDir, w.bDir} {
		got := readWork(t, d, "memory.jsonl")
		for _, rec := range []string{recA, recB, recD, recE} {
			if strings.Count(got, rec) != 1 {
				t.Errorf("%s: ledger misses or repeats %s:\n%s", d, rec, got)
			}
		}
	}
}

func TestSyncLedgerBothChangeOneRecord(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"memory.jsonl": recA + "\n"})
	testutil.WriteFile(t, w.aDir, "memory.jsonl", recA2+"\n") // older update
	mustCommit(t, w.a, "memory.jsonl")
	testutil.WriteFile(t, w.bDir, "memory.jsonl", recA1+"\n") // newer update
	mustCommit(t, w.b, "memory.jsonl")
	w.syncAll(t)
	w.check(t)
	for _, d := range []string{w.aDir, w.bDir} {
		if got := readWork(t, d, "memory.jsonl"); got != recA1+"\n" {
			t.Errorf("%s: ledger %q, want the later update", d, got)
		}
		if got := readWork(t, d, "memory.conflicts.jsonl"); got != recA2+"\n" {
			t.Errorf("%s: conflicts %q, want the loser", d, got)
		}
	}
}

func TestSyncDeleteVersusEdit(t *testing.T) {
	for _, deleterFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "deleter pushes first", false: "editor pushes first"}[deleterFirst], func(t *testing.T) {
			w := newSyncWorld(t, map[string]string{"areas/y.html": "base\n", "areas/keep.html": "k\n"})
			removeFile(t, w.aDir, "areas/y.html")
			mustCommit(t, w.a, "areas/y.html")
			testutil.WriteFile(t, w.bDir, "areas/y.html", "edited\n")
			mustCommit(t, w.b, "areas/y.html")
			if deleterFirst {
				w.syncAll(t)
			} else {
				mustSync(t, w.b)
				mustSync(t, w.a)
				mustSync(t, w.b)
			}
			w.check(t)
			for _, d := range []string{w.aDir, w.bDir} {
				if got := readWork(t, d, "areas/y.html"); got != "edited\n" {
					t.Errorf("%s: edit lost, got %q", d, got)
				}
				if cc := conflictCopies(t, d); len(cc) != 0 {
					t.Errorf("%s: conflict copies %v", d, cc)
				}
			}
		})
	}
}

func TestSyncArchiveMoveVersusEdit(t *testing.T) {
	const old = "areas/journal/20240105-standup.html"
	const moved = "archive/2024/areas/journal/20240105-standup.html"
	for _, moverFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "mover pushes first", false: "editor pushes first"}[moverFirst], func(t *testing.T) {
			w := newSyncWorld(t, map[string]string{old: "standup\n", "areas/journal/other.html": "o\n"})
			renameFile(t, w.aDir, old, moved)
			res := mustCommit(t, w.a, old, moved)
			if res.Hash == "" {
				t.Fatal("rename not committed")
			}
			testutil.WriteFile(t, w.bDir, old, "standup, edited\n")
			mustCommit(t, w.b, old)
			if moverFirst {
				w.syncAll(t)
			} else {
				mustSync(t, w.b)
				mustSync(t, w.a)
				mustSync(t, w.b)
			}
			w.check(t)
			for _, d := range []string{w.aDir, w.bDir} {
				if got := readWork(t, d, moved); got != "standup, edited\n" {
					t.Errorf("%s: archive path holds %q, want the edit", d, got)
				}
				absent(t, d, old)
				if cc := conflictCopies(t, d); len(cc) != 0 {
					t.Errorf("%s: conflict copies %v", d, cc)
				}
			}
		})
	}
}

func TestSyncIdenticalSleepOnBothSides(t *testing.T) {
	files := map[string]string{
		"areas/journal/20240105-a.html": "a\n",
		"areas/journal/20240106-b.html": "b\n",
		"areas/keep.html":               "k\n",
	}
	w := newSyncWorld(t, files)
	arc := "areas/arcs/person-x-2024.html"
	for _, s := range []struct {
		dir string
		r   *Repo
	}{{w.aDir, w.a}, {w.bDir, w.b}} {
		for _, p := range []string{"areas/journal/20240105-a.html", "areas/journal/20240106-b.html"} {
			renameFile(t, s.dir, p, "archive/2024/"+p)
		}
		testutil.WriteFile(t, s.dir, arc, "<html>arc</html>\n")
		mustCommit(t, s.r, "areas", "archive")
	}
	treeA := lsTree(t, w.aDir)
	_, rb := w.syncAll(t)
	if len(rb.Conflicts) != 0 {
		t.Errorf("identical sleeps conflicted: %v", rb.Conflicts)
	}
	w.check(t)
	treeAfter := lsTree(t, w.bDir)
	if len(treeAfter) != len(treeA) {
		t.Errorf("tree changed by merge: %v vs %v", treeAfter, treeA)
	}
	for p, v := range treeA {
		if treeAfter[p] != v {
			t.Errorf("path %s: %s after merge, %s before", p, treeAfter[p], v)
		}
	}
	for _, d := range []string{w.aDir, w.bDir} {
		absent(t, d, "areas/journal/20240105-a.html")
		absent(t, d, "areas/journal/20240106-b.html")
	}
}

func TestSyncFastForwardUpdatesOnlyChangedPaths(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n", "areas/old/x.html": "x\n", "resources/r.html": "r\n"})
	testutil.WriteFile(t, w.aDir, "areas/a.html", "a2\n")
	testutil.WriteFile(t, w.aDir, "projects/new/n.html", "n\n")
	removeFile(t, w.aDir, "areas/old/x.html")
	mustCommit(t, w.a, "areas", "projects")
	mustSync(t, w.a)
	// An untouched file's inode must survive the fast-forward.
	before, err := os.Stat(filepath.Join(w.bDir, "resources/r.html"))
	if err != nil {
		t.Fatal(err)
	}
	rb := mustSync(t, w.b)
	if !rb.FastForward || rb.Merged || rb.Pushed {
		t.Errorf("B: %+v", rb)
	}
	w.check(t)
	if readWork(t, w.bDir, "areas/a.html") != "a2\n" || readWork(t, w.bDir, "projects/new/n.html") != "n\n" {
		t.Error("fast-forward did not write changed files")
	}
	absent(t, w.bDir, "areas/old")
	after, _ := os.Stat(filepath.Join(w.bDir, "resources/r.html"))
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Error("unchanged file was rewritten")
	}
}

func TestSyncCommitsUncommittedEditFirst(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.aDir, "areas/a.html", "from A\n")
	mustCommit(t, w.a, "areas/a.html")
	mustSync(t, w.a)
	// B edits the same file but the owner has not committed it yet.
	testutil.WriteFile(t, w.bDir, "areas/a.html", "uncommitted on B\n")
	rb := mustSync(t, w.b)
	if !rb.Merged || len(rb.Conflicts) != 1 {
		t.Fatalf("B: %+v", rb)
	}
	mustSync(t, w.a)
	w.check(t)
	for _, d := range []string{w.aDir, w.bDir} {
		if readWork(t, d, "areas/a.html") != "from A\n" || readWork(t, d, rb.Conflicts[0]) != "uncommitted on B\n" {
			t.Errorf("%s: contents lost", d)
		}
	}
}

func TestSyncEmptyRemoteFirstPush(t *testing.T) {
	w := newSyncWorld(t, nil)
	testutil.WriteFile(t, w.aDir, "areas/a.html", "a\n")
	mustCommit(t, w.a, "areas/a.html")
	ra := mustSync(t, w.a)
	if !ra.Pushed {
		t.Fatalf("A: %+v", ra)
	}
	rb := mustSync(t, w.b) // unborn clone: fast-forward from nothing
	if !rb.FastForward {
		t.Errorf("B: %+v", rb)
	}
	w.check(t)
	if readWork(t, w.bDir, "areas/a.html") != "a\n" {
		t.Error("B did not get the file")
	}
}

func TestSyncUnrelatedHistory(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	// Someone replaces the remote with an unrelated history.
	other := newGitDir(t)
	testutil.WriteFile(t, other, "areas/z.html", "z\n")
	testutil.RunGit(t, other, "add", "-A")
	testutil.RunGit(t, other, "commit", "-q", "-m", "unrelated")
	testutil.RunGit(t, other, "push", "-q", "-f", w.bare, "main")

	testutil.WriteFile(t, w.aDir, "areas/local.html", "mine\n")
	mustCommit(t, w.a, "areas/local.html")
	headBefore := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD"))
	_, err := w.a.Sync(context.Background(), pushOpts())
	if !errors.Is(err, ErrUnrelatedHistory) {
		t.Fatalf("Sync err = %v, want ErrUnrelatedHistory", err)
	}
	if h := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD")); h != headBefore {
		t.Errorf("local head moved %s → %s", headBefore, h)
	}
	if readWork(t, w.aDir, "areas/local.html") != "mine\n" {
		t.Error("local file lost")
	}
	absent(t, w.aDir, "areas/z.html")
	fsck(t, w.aDir)
}

func TestSyncPushRetriesWhenRemoteMoves(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "a\n")
	mustCommit(t, w.a, "areas/from-a.html")
	if err := w.a.Fetch(context.Background(), pushOpts()); err != nil {
		t.Fatal(err)
	}
	// B pushes after A's fetch; A's push must be rejected then retried
	// via fetch → merge → push.
	testutil.WriteFile(t, w.bDir, "areas/from-b.html", "b\n")
	mustCommit(t, w.b, "areas/from-b.html")
	mustSync(t, w.b)
	ra := mustSync(t, w.a)
	if !ra.Merged || !ra.Pushed {
		t.Errorf("A: %+v", ra)
	}
	mustSync(t, w.b)
	w.check(t)
}

func TestAdoptRemoteAndHasRemote(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n", "projects/p/MEMORY.md": "# p\n"})
	dir := filepath.Join(t.TempDir(), "fresh")
	r, err := Init(dir, "main")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	if ok, err := r.HasRemote(""); err != nil || ok {
		t.Fatalf("HasRemote on a fresh repo = %v, %v", ok, err)
	}
	adopted, err := r.AdoptRemote(context.Background(), RemoteOptions{URL: w.bare})
	if err != nil || !adopted {
		t.Fatalf("AdoptRemote = %v, %v", adopted, err)
	}
	if ok, _ := r.HasRemote("origin"); !ok {
		t.Error("HasRemote after AdoptRemote with URL = false")
	}
	if readWork(t, dir, "areas/a.html") != "a\n" || readWork(t, dir, "projects/p/MEMORY.md") != "# p\n" {
		t.Error("work tree not checked out")
	}
	if revParse(t, dir, "HEAD") != revParse(t, w.bare, "main") {
		t.Error("HEAD is not the remote's")
	}
	statusClean(t, r)
	if again, err := r.AdoptRemote(context.Background(), RemoteOptions{}); err != nil || again {
		t.Errorf("second AdoptRemote = %v, %v", again, err)
	}

	// A local file in the way is never overwritten.
	dir2 := filepath.Join(t.TempDir(), "busy")
	r2, err := Init(dir2, "main")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r2.Close() })
	testutil.WriteFile(t, dir2, "areas/a.html", "mine\n")
	if _, err := r2.AdoptRemote(context.Background(), RemoteOptions{URL: w.bare}); err == nil || !strings.Contains(err.Error(), "areas/a.html") {
		t.Errorf("AdoptRemote over a local file: err = %v", err)
	}
	if readWork(t, dir2, "areas/a.html") != "mine\n" {
		t.Error("local file overwritten")
	}
}

func TestSyncPolicyKinds(t *testing.T) {
	const hdr = "# MEMORY\n\n"
	bA := "- [[areas/a.html|A]] · type:semantic subject:a · from A\n"
	bB := "- [[areas/b.html|B]] · type:semantic subject:b · from B\n"
	w := newSyncWorld(t, map[string]string{
		"MEMORY.md":                          hdr,
		"areas/arcs/person-x-2025.html":      "arc v1\n",
		"archive/2025/memory.drained.jsonl":  "d0\n",
		"projects/p/MEMORY.md":               "# p\n## CRITICAL RULES\n- None yet.\n",
		"areas/a.html":                       "a\n",
		"areas/b.html":                       "b\n",
		"resources/people/person-x.html":     "x\n",
		"resources/people/untouched-by.html": "u\n",
	})
	testutil.WriteFile(t, w.aDir, "MEMORY.md", hdr+bA)
	testutil.WriteFile(t, w.aDir, "areas/arcs/person-x-2025.html", "arc from A\n")
	testutil.WriteFile(t, w.aDir, "archive/2025/memory.drained.jsonl", "d0\ndA\n")
	testutil.WriteFile(t, w.aDir, "projects/p/MEMORY.md", "# p\n## CRITICAL RULES\n- rule A\n")
	mustCommit(t, w.a, "MEMORY.md", "areas", "archive", "projects")
	testutil.WriteFile(t, w.bDir, "MEMORY.md", hdr+bB)
	testutil.WriteFile(t, w.bDir, "areas/arcs/person-x-2025.html", "arc from B\n")
	testutil.WriteFile(t, w.bDir, "archive/2025/memory.drained.jsonl", "d0\ndB\n")
	testutil.WriteFile(t, w.bDir, "projects/p/MEMORY.md", "# p\n## CRITICAL RULES\n- rule B\n")
	mustCommit(t, w.b, "MEMORY.md", "areas", "archive", "projects")
	_, rb := w.syncAll(t)
	w.check(t)
	// The project MEMORY.md merges by section too (put into the template first).
	if len(rb.Conflicts) != 0 {
		t.Fatalf("conflicts %v", rb.Conflicts)
	}
	for _, d := range []string{w.aDir, w.bDir} {
		if got := readWork(t, d, "MEMORY.md"); got != hdr+bB+bA {
			t.Errorf("%s: index MEMORY.md = %q, want union, ours (B) first", d, got)
		}
		if got := readWork(t, d, "areas/arcs/person-x-2025.html"); got != "arc from A\n" {
			t.Errorf("%s: arc = %q, want theirs (A)", d, got)
		}
		if got := readWork(t, d, "archive/2025/memory.drained.jsonl"); got != "d0\ndA\ndB\n" {
			t.Errorf("%s: drained log = %q, want theirs then ours' new lines", d, got)
		}
		if got := readWork(t, d, "projects/p/MEMORY.md"); !strings.HasPrefix(got, "# p\n\n## CRITICAL RULES\n\n- rule B\n- rule A\n\n## Architecture") {
			t.Errorf("%s: project MEMORY.md = %q, want both rules, ours (B) first, in the template", d, got)
		}
	}
}

// TestAheadBehindMatchesGit compares the paint-down walk with `git rev-list
// --left-right --count` on a history with merges and skewed commit dates.
func TestAheadBehindMatchesGit(t *testing.T) {
	dir := newGitDir(t)
	commit := func(msg string, date int) {
		testutil.WriteFile(t, dir, "f.txt", msg+"\n")
		testutil.RunGit(t, dir, "add", "f.txt")
		cmd := []string{"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg, "--date", fmt.Sprintf("@%d +0000", date)}
		t.Setenv("GIT_COMMITTER_DATE", fmt.Sprintf("@%d +0000", date))
		testutil.RunGit(t, dir, cmd...)
	}
	for i := 0; i < 5; i++ {
		commit(fmt.Sprintf("base%d", i), 1000+i*10)
	}
	testutil.RunGit(t, dir, "branch", "other")
	commit("a1", 2000)
	commit("a2", 900) // skewed: older than its parent
	commit("a3", 2100)
	testutil.RunGit(t, dir, "checkout", "-q", "other")
	commit("b1", 1500)
	commit("b2", 3000)
	testutil.RunGit(t, dir, "checkout", "-q", "main")
	t.Setenv("GIT_COMMITTER_DATE", "@4000 +0000")
	testutil.RunGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "merge", "-q", "--no-ff", "-s", "ours", "-m", "m", "other~1")
	commit("a4", 4100)
	r := openTest(t, dir, testOptions())
	for _, pair := range [][2]string{{"main", "other"}, {"other", "main"}, {"main", "main~3"}, {"other~1", "main"}} {
		want := strings.Fields(testutil.RunGit(t, dir, "rev-list", "--left-right", "--count", pair[0]+"..."+pair[1]))
		l, rr := plumbing.NewHash(revParse(t, dir, pair[0])), plumbing.NewHash(revParse(t, dir, pair[1]))
		r.Lock()
		a, b, err := r.aheadBehindLocked(l, rr)
		r.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a) != want[0] || fmt.Sprint(b) != want[1] {
			t.Errorf("%s...%s: ahead %d behind %d, git says %v", pair[0], pair[1], a, b, want)
		}
	}
}

// Commits made within one second (memd and a writer on one machine; a test's fixed clock)
// share a committer time, so the heap may expand a parent before the child that reaches it
// from the other side: a fast-forward must still count as behind only, never as diverged
// (which made a needless merge commit).
func TestAheadBehindEqualCommitTimes(t *testing.T) {
	dir := newGitDir(t)
	t.Setenv("GIT_COMMITTER_DATE", "@5000 +0000")
	for _, msg := range []string{"init", "f0", "f1", "f2"} {
		testutil.WriteFile(t, dir, "f.txt", msg+"\n")
		testutil.RunGit(t, dir, "add", "f.txt")
		testutil.RunGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg, "--date", "@5000 +0000")
	}
	r := openTest(t, dir, testOptions())
	for _, pair := range [][2]string{{"main~2", "main~1"}, {"main~1", "main~2"}, {"main~2", "main"}, {"main~3", "main"}, {"main", "main~3"}} {
		want := strings.Fields(testutil.RunGit(t, dir, "rev-list", "--left-right", "--count", pair[0]+"..."+pair[1]))
		l, rr := plumbing.NewHash(revParse(t, dir, pair[0])), plumbing.NewHash(revParse(t, dir, pair[1]))
		r.Lock()
		a, b, err := r.aheadBehindLocked(l, rr)
		r.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a) != want[0] || fmt.Sprint(b) != want[1] {
			t.Errorf("%s...%s: ahead %d behind %d, git says %v", pair[0], pair[1], a, b, want)
		}
	}
}

func TestSyncFileVersusDirectory(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/keep.html": "k\n", "areas/old/dir/f.html": "f\n"})
	// A makes areas/x a file; B makes it a directory.
	testutil.WriteFile(t, w.aDir, "areas/x", "file on A\n")
	mustCommit(t, w.a, "areas/x")
	testutil.WriteFile(t, w.bDir, "areas/x/y.html", "dir on B\n")
	mustCommit(t, w.b, "areas/x/y.html")
	// A also replaces a directory by a file: no collision on B's side.
	removeFile(t, w.aDir, "areas/old/dir/f.html")
	removeFile(t, w.aDir, "areas/old/dir")
	testutil.WriteFile(t, w.aDir, "areas/old/dir", "now a file\n")
	mustCommit(t, w.a, "areas/old")
	_, rb := w.syncAll(t)
	w.check(t)
	want := "areas/x.conflict-hostb-20261130T143205Z/y.html"
	if len(rb.Conflicts) != 1 || rb.Conflicts[0] != want {
		t.Fatalf("conflicts %v, want [%s]", rb.Conflicts, want)
	}
	for _, d := range []string{w.aDir, w.bDir} {
		if readWork(t, d, "areas/x") != "file on A\n" || readWork(t, d, want) != "dir on B\n" {
			t.Errorf("%s: file/dir contents wrong", d)
		}
		if readWork(t, d, "areas/old/dir") != "now a file\n" {
			t.Errorf("%s: directory-to-file change lost", d)
		}
	}

	// The other way round: B (merging) has the file, A (theirs) the dir.
	w2 := newSyncWorld(t, map[string]string{"areas/keep.html": "k\n"})
	testutil.WriteFile(t, w2.aDir, "areas/z/in.html", "dir on A\n")
	mustCommit(t, w2.a, "areas/z")
	testutil.WriteFile(t, w2.bDir, "areas/z", "file on B\n")
	mustCommit(t, w2.b, "areas/z")
	_, rb2 := w2.syncAll(t)
	w2.check(t)
	want2 := "areas/z.conflict-hostb-20261130T143205Z"
	if len(rb2.Conflicts) != 1 || rb2.Conflicts[0] != want2 {
		t.Fatalf("conflicts %v, want [%s]", rb2.Conflicts, want2)
	}
	for _, d := range []string{w2.aDir, w2.bDir} {
		if readWork(t, d, "areas/z/in.html") != "dir on A\n" || readWork(t, d, want2) != "file on B\n" {
			t.Errorf("%s: contents wrong", d)
		}
	}
}

func TestSyncFastForwardModeChange(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"resources/tools/run.sh": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(w.aDir, "resources/tools/run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res := mustCommit(t, w.a, "resources/tools/run.sh"); res.Hash == "" {
		t.Skip("mode-only change not committed by CommitPaths")
	}
	mustSync(t, w.a)
	mustSync(t, w.b)
	fi, err := os.Stat(filepath.Join(w.bDir, "resources/tools/run.sh"))
	if err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Fatalf("executable bit not checked out: %v %v", fi.Mode(), err)
	}
	w.check(t)
}

// TestSyncRandomNothingLost runs random edits, deletions, additions and
// archive moves on two clones, syncs them, and checks that every content
// either side wrote is somewhere in the final tree (at its path, at an
// archive path or in a conflict copy), that both sides and the remote
// agree, and that the repos are sound.
func TestSyncRandomNothingLost(t *testing.T) {
	iters := 6
	if os.Getenv("MEMD_LONG") != "" {
		iters = 60
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < iters; iter++ {
		files := map[string]string{}
		for i := 0; i < 8; i++ {
			files[fmt.Sprintf("areas/j/2024010%d-m%d.html", i%9, i)] = fmt.Sprintf("base %d\n", i)
		}
		w := newSyncWorld(t, files)
		paths := slices.Sorted(maps.Keys(files))
		written := map[string]bool{} // contents a side wrote
		for _, side := range []struct {
			name string
			dir  string
			r    *Repo
		}{{"A", w.aDir, w.a}, {"B", w.bDir, w.b}} {
			var touched []string
			for _, p := range paths {
				switch rng.IntN(5) {
				case 0: // edit
					c := fmt.Sprintf("%s edit %s %d\n", side.name, p, iter)
					testutil.WriteFile(t, side.dir, p, c)
					written[c] = true
					touched = append(touched, p)
				case 1: // delete
					removeFile(t, side.dir, p)
					touched = append(touched, p)
				case 2: // archive move
					renameFile(t, side.dir, p, "archive/2024/"+p)
					touched = append(touched, p, "archive/2024/"+p)
				}
			}
			np := fmt.Sprintf("areas/new/%s-%d.html", side.name, rng.IntN(3))
			c := side.name + " new\n"
			testutil.WriteFile(t, side.dir, np, c)
			written[c] = true
			touched = append(touched, np)
			mustCommit(t, side.r, touched...)
		}
		w.syncAll(t)
		w.check(t)
		final := map[string]bool{}
		for p := range lsTree(t, w.aDir) {
			final[readWork(t, w.aDir, p)] = true
		}
		for c := range written {
			if !final[c] {
				t.Fatalf("iter %d: content %q lost; final tree %v", iter, c, lsTree(t, w.aDir))
			}
		}
	}
}
