package gitrepo

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/commitmsg"
	"github.com/memd-dev/memd/internal/testutil"
)

func TestCommitAddModifyDelete(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/a.html", "one\n")
	testutil.WriteFile(t, dir, "projects/x/b.html", "two\n")
	res := mustCommit(t, r, "areas/a.html", filepath.Join(dir, "projects/x/b.html"))
	if res.Hash == "" || res.Added != 2 || res.Modified != 0 || res.Deleted != 0 || res.Kind != memd.CommitChange {
		t.Fatalf("first commit: %+v", res)
	}
	if got := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")); got != res.Hash {
		t.Fatalf("HEAD %s, result %s", got, res.Hash)
	}
	testutil.WriteFile(t, dir, "areas/a.html", "one, edited\n")
	if err := os.Remove(filepath.Join(dir, "projects/x/b.html")); err != nil {
		t.Fatal(err)
	}
	res = mustCommit(t, r, "areas/a.html", "projects/x/b.html")
	want := []memd.Change{{Path: "areas/a.html", Op: 'M'}, {Path: "projects/x/b.html", Op: 'D'}}
	if !reflect.DeepEqual(res.Changes, want) || res.Modified != 1 || res.Deleted != 1 {
		t.Fatalf("second commit changes %+v", res)
	}
	stat := testutil.RunGit(t, dir, "show", "--stat", "--format=%s", "HEAD")
	if !strings.Contains(stat, "memd: +0 ~1 -1") || !strings.Contains(stat, "areas/a.html") ||
		!strings.Contains(stat, "projects/x/b.html") {
		t.Fatalf("git show --stat:\n%s", stat)
	}
	if got := testutil.RunGit(t, dir, "show", "HEAD:areas/a.html"); got != "one, edited\n" {
		t.Fatalf("content at HEAD %q", got)
	}
	if _, ok := lsTree(t, dir)["projects/x/b.html"]; ok {
		t.Fatal("deleted file still in HEAD")
	}
	// The now-empty directory projects/x (and projects) must be gone.
	if out := testutil.RunGit(t, dir, "ls-tree", "HEAD"); strings.Contains(out, "projects") {
		t.Fatalf("empty tree kept:\n%s", out)
	}
	if n := strings.TrimSpace(testutil.RunGit(t, dir, "rev-list", "--count", "HEAD")); n != "2" {
		t.Fatalf("commit count %s", n)
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitUnbornBranchFirstCommitHasNoParent(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	if h, err := r.Head(); err != nil || h != "" {
		t.Fatalf("Head of unborn = %q, %v", h, err)
	}
	testutil.WriteFile(t, dir, "areas/inbox/first.html", "x")
	res := mustCommit(t, r, "areas")
	cat := testutil.RunGit(t, dir, "cat-file", "-p", res.Hash)
	if strings.Contains(cat, "parent ") {
		t.Fatalf("first commit has a parent:\n%s", cat)
	}
	if !strings.Contains(cat, "author memd test <memd@test> 1796049125 +0000") {
		t.Fatalf("author/time not from options:\n%s", cat)
	}
	if h, _ := r.Head(); h != res.Hash {
		t.Fatalf("Head %q want %q", h, res.Hash)
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitNestedNewDirsAndDirectoryPath(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "keep.md", "k")
	mustCommit(t, r, "keep.md")
	testutil.WriteFile(t, dir, "projects/p/tasks/deep/one.html", "1")
	testutil.WriteFile(t, dir, "projects/p/tasks/two.html", "2")
	testutil.WriteFile(t, dir, "projects/q/three.html", "3")
	// The watcher may report only the top new directory.
	res := mustCommit(t, r, "projects")
	if res.Added != 3 {
		t.Fatalf("added %d: %+v", res.Added, res.Changes)
	}
	tree := lsTree(t, dir)
	for _, p := range []string{"keep.md", "projects/p/tasks/deep/one.html", "projects/p/tasks/two.html", "projects/q/three.html"} {
		if _, ok := tree[p]; !ok {
			t.Errorf("%s missing from HEAD: %v", p, tree)
		}
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitRemovedDirectoryDeletesAllItsFiles(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	for _, p := range []string{"areas/old/a.html", "areas/old/sub/b.html", "areas/old/sub/c.html", "areas/stay.html"} {
		testutil.WriteFile(t, dir, p, p)
	}
	mustCommit(t, r, "areas")
	if err := os.RemoveAll(filepath.Join(dir, "areas/old")); err != nil {
		t.Fatal(err)
	}
	res := mustCommit(t, r, "areas/old")
	if res.Deleted != 3 || res.Added+res.Modified != 0 {
		t.Fatalf("want 3 deletions: %+v", res)
	}
	tree := lsTree(t, dir)
	if len(tree) != 1 || tree["areas/stay.html"] == "" {
		t.Fatalf("HEAD tree %v", tree)
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitRenameAndReplacements(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/note.html", "same bytes\n")
	testutil.WriteFile(t, dir, "f/inner.md", "i")
	testutil.WriteFile(t, dir, "g", "was a file")
	mustCommit(t, r, ".")
	// Rename: old gone, new added, git sees R100.
	if err := os.Rename(filepath.Join(dir, "areas/note.html"), filepath.Join(dir, "archive/2025/areas/note.html")); err != nil {
		if err := os.MkdirAll(filepath.Join(dir, "archive/2025/areas"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "areas/note.html"), filepath.Join(dir, "archive/2025/areas/note.html")); err != nil {
			t.Fatal(err)
		}
	}
	res := mustCommit(t, r, "areas/note.html", "archive/2025/areas/note.html")
	want := []memd.Change{{Path: "archive/2025/areas/note.html", Op: 'A'}, {Path: "areas/note.html", Op: 'D'}}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Fatalf("rename changes %+v", res.Changes)
	}
	if out := testutil.RunGit(t, dir, "diff", "-M", "--name-status", "HEAD~1", "HEAD"); !strings.HasPrefix(out, "R100") {
		t.Fatalf("rename not R100: %q", out)
	}
	// Directory f replaced by a file f; file g replaced by a directory g.
	if err := os.RemoveAll(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, dir, "f", "now a file")
	if err := os.Remove(filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, dir, "g/child.md", "c")
	res = mustCommit(t, r, "f", "g/child.md") // g itself not reported
	want = []memd.Change{{Path: "f", Op: 'A'}, {Path: "f/inner.md", Op: 'D'}, {Path: "g", Op: 'D'}, {Path: "g/child.md", Op: 'A'}}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Fatalf("replacement changes %+v", res.Changes)
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitSymlinksAreLinksNeverFollowed(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/target.html", "t")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("target.html", filepath.Join(dir, "areas/link.html")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "areas/passwd")))
	must(os.Symlink("loop2", filepath.Join(dir, "loop1")))
	must(os.Symlink("loop1", filepath.Join(dir, "loop2")))
	must(os.Symlink("/etc", filepath.Join(dir, "etcdir"))) // a dir link: not walked
	res := mustCommit(t, r, "areas", "loop1", "loop2", "etcdir")
	if res.Added != 6 {
		t.Fatalf("added %d: %+v", res.Added, res.Changes)
	}
	if err := r.RefreshIndex(); err != nil {
		t.Fatal(err)
	}
	out := testutil.RunGit(t, dir, "ls-files", "-s")
	for _, p := range []string{"areas/link.html", "areas/passwd", "loop1", "loop2", "etcdir"} {
		if !strings.Contains(out, "120000 ") || !containsLine(out, "120000", p) {
			t.Errorf("%s not a 120000 link in:\n%s", p, out)
		}
	}
	if got := testutil.RunGit(t, dir, "cat-file", "-p", "HEAD:areas/passwd"); got != "/etc/passwd" {
		t.Fatalf("link blob %q: the link was followed", got)
	}
	if got := testutil.RunGit(t, dir, "cat-file", "-p", "HEAD:etcdir"); got != "/etc" {
		t.Fatalf("dir link blob %q", got)
	}
	for p := range lsTree(t, dir) {
		if strings.HasPrefix(p, "etcdir/") {
			t.Fatalf("followed a directory symlink: %s", p)
		}
	}
	// Retarget a link: a modification.
	must(os.Remove(filepath.Join(dir, "areas/link.html")))
	must(os.Symlink("elsewhere.html", filepath.Join(dir, "areas/link.html")))
	res = mustCommit(t, r, "areas/link.html")
	if res.Modified != 1 {
		t.Fatalf("retarget: %+v", res)
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitNeverThroughADirectorySymlink(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	outside := t.TempDir()
	testutil.WriteFile(t, outside, "secret.txt", "do not commit")
	testutil.WriteFile(t, dir, "areas/d/real.html", "r")
	mustCommit(t, r, "areas")
	// areas/d becomes a link to a directory outside the repo.
	if err := os.RemoveAll(filepath.Join(dir, "areas/d")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "areas/d")); err != nil {
		t.Fatal(err)
	}
	// A watcher or caller naming a path through the link must not reach it.
	res := mustCommit(t, r, "areas/d/secret.txt", "areas/d/real.html", "areas/d")
	want := []memd.Change{{Path: "areas/d", Op: 'A'}, {Path: "areas/d/real.html", Op: 'D'}}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Fatalf("changes %+v", res.Changes)
	}
	for p := range lsTree(t, dir) {
		if strings.Contains(p, "secret") {
			t.Fatalf("followed a symlink out of the repo: %s", p)
		}
	}
	fsck(t, dir)
	statusClean(t, r)
}

func containsLine(out, mode, path string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, mode+" ") && strings.HasSuffix(l, "\t"+path) {
			return true
		}
	}
	return false
}

func TestCommitEmptyFileOddNamesAndExecBit(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	names := []string{"empty.html", "areas/with space/a b.html", "areas/ünïcødé/日本語.html", "areas/tab\tname.md"}
	for i, p := range names {
		content := strings.Repeat("x", i)
		testutil.WriteFile(t, dir, p, content)
	}
	testutil.WriteFile(t, dir, "tool.sh", "#!/bin/sh\n")
	res := mustCommit(t, r, append(names, "tool.sh")...)
	if res.Added != len(names)+1 {
		t.Fatalf("added %+v", res)
	}
	tree := lsTree(t, dir)
	for _, p := range names {
		if tree[p] == "" {
			t.Errorf("%q not in HEAD: %v", p, tree)
		}
	}
	if !strings.HasSuffix(tree["empty.html"], "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391") {
		t.Fatalf("empty blob id: %s", tree["empty.html"])
	}
	if !strings.HasPrefix(tree["tool.sh"], "100644 ") {
		t.Fatalf("tool.sh mode %s", tree["tool.sh"])
	}
	if err := os.Chmod(filepath.Join(dir, "tool.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	res = mustCommit(t, r, "tool.sh")
	if res.Modified != 1 {
		t.Fatalf("exec bit: %+v", res)
	}
	if m := lsTree(t, dir)["tool.sh"]; !strings.HasPrefix(m, "100755 ") {
		t.Fatalf("tool.sh mode after chmod %s", m)
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitUnchangedMakesNoCommit(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	first := mustCommit(t, r, "a.html")
	// Same bytes rewritten (an echo of memd's own write), a path that never
	// existed, and a directory with nothing new: no commit.
	testutil.WriteFile(t, dir, "a.html", "a")
	res := mustCommit(t, r, "a.html", "never/was.html", ".")
	if res.Hash != "" || len(res.Changes) != 0 {
		t.Fatalf("no-op made a commit: %+v", res)
	}
	if h, _ := r.Head(); h != first.Hash {
		t.Fatalf("HEAD moved on no-op")
	}
	// Empty input: nothing.
	if res := mustCommit(t, r); res.Hash != "" {
		t.Fatal("empty path list made a commit")
	}
}

func TestCommitIgnoredPathsSkipped(t *testing.T) {
	dir := newGitDir(t)
	opts := testOptions()
	opts.Ignore = func(rel string, isDir bool) bool {
		return strings.HasSuffix(rel, ".swp") || (isDir && rel == "tmp")
	}
	r := openTest(t, dir, opts)
	testutil.WriteFile(t, dir, "areas/x.html", "x")
	testutil.WriteFile(t, dir, "areas/.x.html.swp", "swap")
	testutil.WriteFile(t, dir, "tmp/junk.html", "junk")
	testutil.WriteFile(t, dir, ".memory.lock", "pid: 1\n")
	testutil.WriteFile(t, dir, "sub/.git/config", "nested repo")
	testutil.WriteFile(t, dir, "sub/file.md", "in nested repo")
	res := mustCommit(t, r, ".", "areas/.x.html.swp", "tmp/junk.html", ".memory.lock", ".git/config", "sub", "sub/file.md")
	want := []memd.Change{{Path: "areas/x.html", Op: 'A'}}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Fatalf("changes %+v", res.Changes)
	}
	fsck(t, dir)
}

func TestCommitHeadMovedCASAndRetry(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	base := mustCommit(t, r, "a.html")
	testutil.WriteFile(t, dir, "b.html", "b")
	// Between reading HEAD and moving the ref, a git commit lands.
	r.testBeforeRef = func() {
		r.testBeforeRef = nil
		testutil.WriteFile(t, dir, "outside.md", "by git")
		testutil.RunGit(t, dir, "add", "outside.md")
		testutil.RunGit(t, dir, "commit", "-q", "-m", "outside")
	}
	_, err := r.CommitPaths([]string{"b.html"})
	if !errors.Is(err, memd.ErrHeadMoved) {
		t.Fatalf("want memd.ErrHeadMoved, got %v", err)
	}
	outside := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD"))
	if outside == base.Hash {
		t.Fatal("outside commit did not land")
	}
	// Retry builds on the outside commit; nothing lost.
	res := mustCommit(t, r, "b.html")
	if res.Hash == "" {
		t.Fatal("retry made no commit")
	}
	if p := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD^")); p != outside {
		t.Fatalf("retry parent %s, want outside commit %s", p, outside)
	}
	tree := lsTree(t, dir)
	for _, p := range []string{"a.html", "b.html", "outside.md"} {
		if tree[p] == "" {
			t.Errorf("%s missing after retry", p)
		}
	}
	fsck(t, dir)
	statusClean(t, r)
}

func TestCommitRefLockedByGitIsHeadMoved(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	mustCommit(t, r, "a.html")
	if _, canSee := r.liveGitProcess(); !canSee {
		t.Skip("no /proc: ref lock liveness is by age only")
	}
	// The lock's holder: a real git process running in the repo (it waits on stdin).
	git := exec.Command("git", "hash-object", "--stdin")
	git.Dir = dir
	git.Env = testutil.GitEnv()
	if _, err := git.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := git.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = git.Process.Kill(); _ = git.Wait() }()
	testutil.WaitFor(t, "git process visible", 5*time.Second, func() bool {
		live, _ := r.liveGitProcess()
		return live
	}, nil)
	lock := filepath.Join(dir, ".git/refs/heads/main.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, dir, "a.html", "b")
	_, err := r.CommitPaths([]string{"a.html"})
	if !errors.Is(err, memd.ErrHeadMoved) {
		t.Fatalf("want memd.ErrHeadMoved while ref locked, got %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatal("a live git's ref lock was removed")
	}
	os.Remove(lock)
	if res := mustCommit(t, r, "a.html"); res.Modified != 1 {
		t.Fatalf("after unlock: %+v", res)
	}
	fsck(t, dir)
}

func TestCommitAbsolutePathThroughSymlinkedRoot(t *testing.T) {
	real := newGitDir(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	r := openTest(t, link, testOptions())
	testutil.WriteFile(t, real, "a.html", "a")
	res := mustCommit(t, r, filepath.Join(link, "a.html"))
	if res.Added != 1 {
		t.Fatalf("%+v", res)
	}
}

func TestCommitBadPathNamed(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	_, err := r.CommitPaths([]string{"../escape.html"})
	if err == nil || !strings.Contains(err.Error(), "../escape.html") {
		t.Fatalf("want an error naming the path, got %v", err)
	}
	_, err = r.CommitPaths([]string{"/definitely/elsewhere.html"})
	if err == nil || !strings.Contains(err.Error(), "elsewhere.html") {
		t.Fatalf("want an error naming the path, got %v", err)
	}
}

func TestCommitPathsMessageSleepKindAndMessages(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "a.html", "a")
	mustCommit(t, r, "a.html")
	testutil.WriteFile(t, dir, "areas/arcs/x-2026.html", "arc")
	msg := "sleep(arcs): arcs=1\n\nMemd-Run: r1\nMemd-Phase: arcs\nMemd-Counts: arcs=1\n"
	res, err := r.CommitPathsMessage([]string{"areas/arcs"}, msg, memd.CommitSleep)
	if err != nil || res.Kind != memd.CommitSleep || res.Added != 1 {
		t.Fatalf("sleep commit %+v %v", res, err)
	}
	msgs, err := r.CommitMessages(10)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("messages %q %v", msgs, err)
	}
	if msgs[0] != msg {
		t.Fatalf("newest message %q", msgs[0])
	}
	if tr := commitmsg.Trailers(msgs[0]); tr["Memd-Phase"] != "arcs" || tr["Memd-Run"] != "r1" {
		t.Fatalf("trailers %v", tr)
	}
	if !strings.HasPrefix(msgs[1], "memd: +1 ~0 -0\n\nA a.html\n\nMemd-Host: testhost\n") {
		t.Fatalf("change message %q", msgs[1])
	}
	if got := testutil.RunGit(t, dir, "log", "-1", "--format=%(trailers:key=Memd-Phase,valueonly)"); strings.TrimSpace(got) != "arcs" {
		t.Fatalf("git does not see the trailer: %q", got)
	}
	one, _ := r.CommitMessages(1)
	if len(one) != 1 {
		t.Fatalf("limit 1 gave %d", len(one))
	}
}

func TestAuthorFallbacks(t *testing.T) {
	dir := newGitDir(t)
	testutil.RunGit(t, dir, "config", "user.name", "Repo Person")
	testutil.RunGit(t, dir, "config", "user.email", "repo@example.invalid")
	r := openTest(t, dir, Options{Hostname: "h1"})
	if a := r.CommitAuthor(); a != (Author{"Repo Person", "repo@example.invalid"}) {
		t.Fatalf("from git config: %+v", a)
	}
	dir2 := newGitDir(t)
	t.Setenv("HOME", t.TempDir()) // no global identity
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	r2 := openTest(t, dir2, Options{Hostname: "h2"})
	if a := r2.CommitAuthor(); a != (Author{"memd", "memd@h2"}) {
		t.Fatalf("fallback: %+v", a)
	}
}

func TestOpenRefusesSHA256(t *testing.T) {
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "--object-format=sha256")
	_, err := Open(dir, Options{})
	// go-git refuses it itself ("unknown extension: objectformat"); our own
	// check covers versions that would open it.
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "objectformat") &&
		!strings.Contains(err.Error(), "sha256") {
		t.Fatalf("want a clear refusal naming the dir and format, got %v", err)
	}
}

func TestOpenAndInit(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{}); !errors.Is(err, ErrNotRepo) {
		t.Fatalf("Open non-repo: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "mem")
	r, err := Init(dir, "trunk")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if head := strings.TrimSpace(testutil.RunGit(t, dir, "symbolic-ref", "HEAD")); head != "refs/heads/trunk" {
		t.Fatalf("HEAD -> %s", head)
	}
	testutil.WriteFile(t, dir, "x.md", "x")
	res := mustCommit(t, r, "x.md")
	if got := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "trunk")); got != res.Hash {
		t.Fatalf("trunk %s want %s", got, res.Hash)
	}
	// Init on an existing repo opens it.
	r2, err := Init(dir, "trunk")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if h, _ := r2.Head(); h != res.Hash {
		t.Fatalf("reinit head %s", h)
	}
}

// BenchmarkCommitPaths times memd's commit of k changed files in an n-file
// repo, with git's `git add -A && git commit -q` on an identical copy as the
// baseline sub-benchmark (compare ns/op: the ratio is memd/git).
//
//	go test -run '^$' -bench CommitPaths ./sync/       (MEMD_LONG=1 adds 100k)
func BenchmarkCommitPaths(b *testing.B) {
	for _, n := range benchSizes() {
		for _, k := range []int{1, 20} {
			b.Run(fmt.Sprintf("files=%d/changed=%d/memd", n, k), func(b *testing.B) {
				dir, files := benchRepo(b, n)
				r, err := Open(dir, testOptions())
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				rng := rand.New(rand.NewSource(1))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					paths := pickFiles(rng, files, k)
					appendTo(b, dir, paths, i)
					r.WaitIndexRefresh()
					b.StartTimer()
					res, err := r.CommitPaths(paths)
					if err != nil || len(res.Changes) != k {
						b.Fatalf("commit: %v %+v", err, res)
					}
				}
			})
			b.Run(fmt.Sprintf("files=%d/changed=%d/git", n, k), func(b *testing.B) {
				dir, files := benchRepo(b, n)
				rng := rand.New(rand.NewSource(1))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					paths := pickFiles(rng, files, k)
					appendTo(b, dir, paths, i)
					b.StartTimer()
					cmd := exec.Command("sh", "-c", "git add -A && git -c gc.auto=0 commit -q -m bench")
					cmd.Dir = dir
					cmd.Env = testutil.GitEnv()
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("git: %v %s", err, out)
					}
				}
			})
		}
	}
}

func pickFiles(rng *rand.Rand, files []string, k int) []string {
	out := make([]string, k)
	for i, j := range rng.Perm(len(files))[:k] {
		out[i] = files[j]
	}
	return out
}

func TestCommitAfterGitGCRepacksBehindGoGit(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/a/one.html", "1")
	testutil.WriteFile(t, dir, "areas/b/two.html", "2")
	mustCommit(t, r, "areas")
	testutil.WriteFile(t, dir, "areas/a/one.html", "1b")
	mustCommit(t, r, "areas/a/one.html") // go-git has now indexed (no) packs
	if _, err := r.CommitMessages(0); err != nil {
		t.Fatal(err)
	}
	r.WaitIndexRefresh()
	// Nightly gc: every loose object moves into a new pack.
	testutil.RunGit(t, dir, "gc", "-q", "--prune=now")
	if out := testutil.RunGit(t, dir, "count-objects"); !strings.HasPrefix(out, "0 objects") {
		t.Fatalf("gc left loose objects: %s", out)
	}
	testutil.WriteFile(t, dir, "areas/b/two.html", "2b")
	res := mustCommit(t, r, "areas/b/two.html")
	if res.Modified != 1 {
		t.Fatalf("%+v", res)
	}
	if msgs, err := r.CommitMessages(0); err != nil || len(msgs) != 3 {
		t.Fatalf("messages after gc: %d %v", len(msgs), err)
	}
	fsck(t, dir)
	statusClean(t, r)
}

// TestCrashChild is the child half of TestSIGKILLLeavesRepoConsistent: it
// commits in a loop until killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv("MEMD_SYNC_CRASH_DIR")
	if dir == "" {
		t.Skip("child process of TestSIGKILLLeavesRepoConsistent")
	}
	r, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		p := fmt.Sprintf("areas/d%d/f%d.html", i%7, i%13)
		testutil.WriteFile(t, dir, p, fmt.Sprintf("version %d\n", i))
		res, err := r.CommitPaths([]string{p})
		if err != nil && !errors.Is(err, memd.ErrHeadMoved) {
			t.Fatal(err)
		}
		fmt.Printf("ok %s\n", res.Hash)
	}
}

func TestSIGKILLLeavesRepoConsistent(t *testing.T) {
	dir := newGitDir(t)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	for round := 0; round < 4; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(testutil.GitEnv(), "MEMD_SYNC_CRASH_DIR="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		want := 5 + rng.Intn(20)
		for n := 0; n < want && sc.Scan(); {
			if strings.HasPrefix(sc.Text(), "ok ") {
				n++
			}
		}
		time.Sleep(time.Duration(rng.Intn(3000)) * time.Microsecond) // land mid-commit
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// Whatever the moment, the ref names a complete commit.
		fsck(t, dir)
		testutil.RunGit(t, dir, "rev-parse", "--verify", "HEAD^{tree}")
		// Locks a killed process left: the ref lock is stale once old
		// (backdated here instead of waiting 10 s); index.lock is cleared
		// by ClearStaleIndexLock as the agent does at start.
		old := time.Now().Add(-time.Minute)
		os.Chtimes(filepath.Join(dir, ".git/refs/heads/main.lock"), old, old)
		os.Chtimes(filepath.Join(dir, ".git/index.lock"), old, old)
		r := openTest(t, dir, testOptions())
		if err := r.ClearStaleIndexLock(); err != nil {
			t.Fatal(err)
		}
		paths, err := r.Reconcile()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.CommitPaths(append(paths, "areas")); err != nil {
			t.Fatalf("commit after kill: %v", err)
		}
		statusClean(t, r)
		r.Close()
	}
}

func TestCommitLargeFileStreams(t *testing.T) {
	old := inMemoryLimit
	inMemoryLimit = 1 << 10 // take the streaming path with a small file
	defer func() { inMemoryLimit = old }()
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	big := strings.Repeat("0123456789abcdef", 64<<10/16) // 64 KiB
	testutil.WriteFile(t, dir, "resources/big.txt", big)
	res := mustCommit(t, r, "resources/big.txt")
	if res.Added != 1 {
		t.Fatalf("%+v", res)
	}
	if got := testutil.RunGit(t, dir, "cat-file", "-p", "HEAD:resources/big.txt"); got != big {
		t.Fatalf("big file content differs (%d bytes)", len(got))
	}
	// Unchanged big file: no commit; the temp object is not left behind.
	if res := mustCommit(t, r, "resources/big.txt"); res.Hash != "" {
		t.Fatal("unchanged big file committed")
	}
	tmps, _ := filepath.Glob(filepath.Join(dir, ".git/objects/tmp_obj_memd_*"))
	if len(tmps) != 0 {
		t.Fatalf("temp objects left: %v", tmps)
	}
	fsck(t, dir)
	statusClean(t, r)
}

// TestCommitRandomOpsMatchGit applies random file operations, commits only
// the paths it touched, and after each round requires git to see the work
// tree exactly as committed (git status clean after the index refresh) and
// the objects valid. Seeded: a failure prints its seed.
func TestCommitRandomOpsMatchGit(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("MEMD_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (MEMD_SEED to replay)", seed)
	rng := rand.New(rand.NewSource(seed))
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	names := []string{"a", "b", "c d", "é"}
	randPath := func() string {
		depth := 1 + rng.Intn(3)
		parts := make([]string, depth)
		for i := range parts {
			parts[i] = names[rng.Intn(len(names))]
		}
		return strings.Join(parts, "/")
	}
	for round := 0; round < 25; round++ {
		var touched []string
		// Operations never go through a symlinked or file ancestor (that
		// would change a file elsewhere than the path the test records):
		// such an ancestor is removed first, and recorded as touched.
		clear := func(p string) {
			parts := strings.Split(p, "/")
			for i := 1; i < len(parts); i++ {
				anc := strings.Join(parts[:i], "/")
				fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(anc)))
				if err == nil && !fi.IsDir() {
					os.RemoveAll(filepath.Join(dir, filepath.FromSlash(anc)))
					touched = append(touched, anc)
				}
				if err != nil {
					return
				}
			}
		}
		for op := 0; op < 1+rng.Intn(6); op++ {
			p := randPath()
			abs := filepath.Join(dir, filepath.FromSlash(p))
			touched = append(touched, p)
			clear(p)
			switch rng.Intn(6) {
			case 0, 1: // write a file (replacing whatever is there)
				os.RemoveAll(abs)
				if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
					t.Fatal(err)
				}
				os.WriteFile(abs, []byte(fmt.Sprint(rng.Intn(3))), 0o644)
			case 2: // remove (file or whole directory)
				os.RemoveAll(abs)
			case 3: // symlink
				os.RemoveAll(abs)
				if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
					t.Fatal(err)
				}
				os.Symlink(names[rng.Intn(len(names))], abs)
			case 4: // chmod (never through a symlink: Lstat first)
				if fi, err := os.Lstat(abs); err == nil && fi.Mode().IsRegular() {
					os.Chmod(abs, []os.FileMode{0o644, 0o755}[rng.Intn(2)])
				}
			case 5: // rename onto a fresh name
				q := randPath() + "-r"
				touched = append(touched, q)
				clear(q)
				if os.MkdirAll(filepath.Dir(filepath.Join(dir, q)), 0o755) == nil {
					os.Rename(abs, filepath.Join(dir, filepath.FromSlash(q)))
				}
			}
		}
		commit := touched
		if round%2 == 1 {
			// As if the watcher missed it all: reconcile finds the paths
			// (both ways must agree), and committing them is enough.
			viaGit, err := r.reconcileGit("git")
			if err != nil {
				t.Fatal(err)
			}
			r.mu.Lock()
			viaWalk, err := r.reconcileWalkLocked()
			r.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			// git status does not list deletions under a directory
			// replaced by a looping symlink (lstat gives ELOOP); it lists
			// the new path itself, and committing that deletes the old
			// subtree. So: git's set ⊆ walk's, and every extra walk path
			// has an ancestor in git's set.
			if !coveredBy(viaGit, viaWalk) {
				find, _ := exec.Command("find", dir, "-path", filepath.Join(dir, ".git"), "-prune", "-o", "-printf", "%y %p %l\n").Output()
				t.Fatalf("round %d (seed %d): git status %q, walk %q\nstatus:\n%s\nHEAD:\n%s\nindex:\n%s\nwork tree:\n%s", round, seed, viaGit, viaWalk,
					testutil.RunGit(t, dir, "status", "--porcelain", "-uall"), testutil.RunGit(t, dir, "ls-tree", "-r", "HEAD"), testutil.RunGit(t, dir, "ls-files", "-s"), find)
			}
			commit = viaGit
		}
		if _, err := r.CommitPaths(commit); err != nil {
			t.Fatalf("round %d (seed %d): %v", round, seed, err)
		}
		r.WaitIndexRefresh()
		if err := r.RefreshIndex(); err != nil {
			t.Fatal(err)
		}
		if out := testutil.RunGit(t, dir, "-c", "core.quotepath=off", "status", "--porcelain", "-uall"); out != "" {
			find, _ := exec.Command("find", dir, "-path", filepath.Join(dir, ".git"), "-prune", "-o", "-print").Output()
			t.Fatalf("round %d (seed %d): git sees uncommitted state after committing %q:\n%s\nHEAD:\n%s\nwork tree:\n%s",
				round, seed, commit, out, testutil.RunGit(t, dir, "ls-tree", "-r", "HEAD"), find)
		}
	}
	fsck(t, dir)
}

func TestCommitFileReplacedByEmptyDirUnderDirPath(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "d/f", "file")
	mustCommit(t, r, "d")
	os.Remove(filepath.Join(dir, "d/f"))
	if err := os.Mkdir(filepath.Join(dir, "d/f"), 0o755); err != nil { // empty: nothing for git
		t.Fatal(err)
	}
	res := mustCommit(t, r, "d")
	if !reflect.DeepEqual(res.Changes, []memd.Change{{Path: "d/f", Op: 'D'}}) {
		t.Fatalf("changes %+v", res.Changes)
	}
	statusClean(t, r)
}

// coveredBy: small ⊆ big, and each path of big is in small or under one.
func coveredBy(small, big []string) bool {
	in := make(map[string]bool, len(small))
	for _, p := range small {
		in[p] = true
	}
	bigSet := make(map[string]bool, len(big))
	for _, p := range big {
		bigSet[p] = true
	}
	for _, p := range small {
		if !bigSet[p] {
			return false
		}
	}
next:
	for _, p := range big {
		if in[p] {
			continue
		}
		for i := len(p) - 1; i > 0; i-- {
			if p[i] == '/' && in[p[:i]] {
				continue next
			}
		}
		return false
	}
	return true
}

func TestCommitUnreadableFileIsSkippedNotLost(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads mode-000 files: run as a normal user")
	}
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/locked.html", "v1")
	testutil.WriteFile(t, dir, "areas/d/in.html", "in")
	mustCommit(t, r, "areas")
	testutil.WriteFile(t, dir, "areas/locked.html", "v2")
	testutil.WriteFile(t, dir, "areas/ok.html", "ok")
	os.Chmod(filepath.Join(dir, "areas/locked.html"), 0)
	os.Chmod(filepath.Join(dir, "areas/d"), 0)
	defer os.Chmod(filepath.Join(dir, "areas/d"), 0o755)
	res := mustCommit(t, r, "areas")
	if !reflect.DeepEqual(res.Changes, []memd.Change{{Path: "areas/ok.html", Op: 'A'}}) {
		t.Fatalf("changes %+v", res.Changes)
	}
	if len(res.Skipped) != 2 {
		t.Fatalf("skipped %q", res.Skipped)
	}
	tree := lsTree(t, dir)
	if tree["areas/d/in.html"] == "" || tree["areas/locked.html"] == "" {
		t.Fatalf("unreadable paths were dropped from HEAD: %v", tree)
	}
}
