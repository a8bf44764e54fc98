package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

func isolateHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("MEMD_CONFIG", "")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, "gitconfig"))
}

func TestInitCreatesSkeletonOnce(t *testing.T) {
	isolateHome(t)
	dir := filepath.Join(t.TempDir(), "memory")
	if code, _, stderr := runApp(t, "init", dir); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	for _, p := range []string{"projects/.gitkeep", "areas/inbox/.gitkeep", "areas/inbox/tasks/.gitkeep", "areas/arcs/.gitkeep",
		"resources/people/.gitkeep", "archive/.gitkeep", ".gitignore"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("missing %s", p)
		}
	}
	if b := strings.TrimSpace(testutil.RunGit(t, dir, "symbolic-ref", "--short", "HEAD")); b != "main" {
		t.Fatalf("branch %q", b)
	}
	if n := strings.TrimSpace(testutil.RunGit(t, dir, "rev-list", "--count", "HEAD")); n != "1" {
		t.Fatalf("%s commits, want 1", n)
	}
	gi, _ := os.ReadFile(filepath.Join(dir, ".gitignore"))
	for _, line := range []string{".memory.lock", ".memhtml/index.db", ".memhtml/state.db", ".memhtml/index.db-*", ".memhtml/state.db-*"} {
		if !strings.Contains("\n"+string(gi), "\n"+line+"\n") {
			t.Fatalf(".gitignore lacks %s: %q", line, gi)
		}
	}
	if st := strings.TrimSpace(testutil.RunGit(t, dir, "status", "--porcelain")); st != "" {
		t.Fatalf("status not clean:\n%s", st)
	}
	// A user file, then init again: nothing is added, the user file is left to memd run.
	os.WriteFile(filepath.Join(dir, "areas", "mine.html"), []byte("x"), 0o644)
	if code, _, stderr := runApp(t, "init", dir); code != 0 {
		t.Fatalf("second init: %d %s", code, stderr)
	}
	if n := strings.TrimSpace(testutil.RunGit(t, dir, "rev-list", "--count", "HEAD")); n != "1" {
		t.Fatalf("second init made a commit (%s commits)", n)
	}
	// An existing repo that lacks a folder: only that is added.
	os.Remove(filepath.Join(dir, "areas", "arcs", ".gitkeep"))
	testutil.RunGit(t, dir, "rm", "-q", "--cached", "areas/arcs/.gitkeep")
	testutil.RunGit(t, dir, "commit", "-qm", "drop arcs")
	if code, _, stderr := runApp(t, "init", dir); code != 0 {
		t.Fatalf("third init: %d %s", code, stderr)
	}
	if got := strings.TrimSpace(testutil.RunGit(t, dir, "show", "--name-only", "--format=", "HEAD")); got != "areas/arcs/.gitkeep" {
		t.Fatalf("third init committed %q", got)
	}
}

func TestInitRemoteEmptyThenWithHistory(t *testing.T) {
	isolateHome(t)
	tmp := t.TempDir()
	remote := filepath.Join(tmp, "remote.git")
	testutil.RunGit(t, tmp, "init", "-q", "--bare", remote)

	a := filepath.Join(tmp, "a")
	if code, out, stderr := runApp(t, "init", a, "--remote", remote, "--demo", "--demo-count", "40"); code != 0 {
		t.Fatalf("init a: %d %s %s", code, out, stderr)
	}
	head := strings.TrimSpace(testutil.RunGit(t, a, "rev-parse", "HEAD"))
	if got := strings.TrimSpace(testutil.RunGit(t, remote, "rev-parse", "main")); got != head {
		t.Fatalf("remote main %s, local %s", got, head)
	}

	// Machine b: a local file already there; init adopts the remote's history and keeps it.
	b := filepath.Join(tmp, "b")
	os.MkdirAll(filepath.Join(b, "areas"), 0o755)
	os.WriteFile(filepath.Join(b, "areas", "local-only.html"), []byte("mine"), 0o644)
	if code, out, stderr := runApp(t, "init", b, "--remote", remote); code != 0 {
		t.Fatalf("init b: %d %s %s", code, out, stderr)
	}
	if strings.TrimSpace(testutil.RunGit(t, b, "merge-base", "--is-ancestor", head, "HEAD")) != "" {
		t.Fatal("unreachable")
	}
	if _, err := os.Stat(filepath.Join(b, "memory.jsonl")); err != nil {
		t.Fatal("remote's files not checked out in b")
	}
	if data, _ := os.ReadFile(filepath.Join(b, "areas", "local-only.html")); string(data) != "mine" {
		t.Fatalf("local file lost: %q", data)
	}
	if strings.TrimSpace(testutil.RunGit(t, b, "status", "--porcelain")) != "" {
		// The local file is left for memd run to commit; nothing else may be dirty.
		st := strings.TrimSpace(testutil.RunGit(t, b, "status", "--porcelain"))
		if st != "?? areas/local-only.html" {
			t.Fatalf("unexpected status:\n%s", st)
		}
	}
	testutil.RunGit(t, b, "fsck", "--full")
}

// After `memd init DIR --remote URL` the branch tracks the remote as after `git clone`, so
// the user's plain git works beside memd: status shows ahead/behind, pull and push need no
// arguments; and memd still takes the user's own commits and pushes them.
func TestInitRemoteSetsUpstreamForPlainGit(t *testing.T) {
	isolateHome(t)
	base := t.TempDir()
	bare, dir, other := filepath.Join(base, "remote.git"), filepath.Join(base, "memory"), filepath.Join(base, "other")
	testutil.RunGit(t, base, "init", "-q", "--bare", "-b", "main", bare)
	if code, _, stderr := runApp(t, "init", dir, "--remote", bare); code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	if r, m := strings.TrimSpace(testutil.RunGit(t, dir, "config", "branch.main.remote")), strings.TrimSpace(testutil.RunGit(t, dir, "config", "branch.main.merge")); r != "origin" || m != "refs/heads/main" {
		t.Fatalf("upstream %q %q, want origin refs/heads/main", r, m)
	}
	if st := strings.TrimSpace(testutil.RunGit(t, dir, "status", "-sb")); st != "## main...origin/main" {
		t.Fatalf("git status -sb: %q", st)
	}
	if out := strings.TrimSpace(testutil.RunGit(t, dir, "pull")); out != "Already up to date." {
		t.Fatalf("git pull: %q", out)
	}

	// The user's own commit: git counts it ahead; memd sync pushes it; git is level again.
	if err := os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, dir, "add", "mine.txt")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "mine")
	mine := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD"))
	if st := strings.TrimSpace(testutil.RunGit(t, dir, "status", "-sb")); st != "## main...origin/main [ahead 1]" {
		t.Fatalf("git status after the user's commit: %q", st)
	}
	if code, _, stderr := runApp(t, "sync", "--repo", dir); code != 0 {
		t.Fatalf("memd sync: %d %s", code, stderr)
	}
	if got := strings.TrimSpace(testutil.RunGit(t, bare, "rev-parse", "main")); got != mine {
		t.Fatalf("remote main %s, want the user's commit %s", got, mine)
	}
	if st := strings.TrimSpace(testutil.RunGit(t, dir, "status", "-sb")); st != "## main...origin/main" {
		t.Fatalf("git status after memd pushed: %q", st)
	}

	// Another machine pushes: a plain git pull brings it in, a plain git push sends ours.
	testutil.RunGit(t, base, "clone", "-q", bare, other)
	if err := os.WriteFile(filepath.Join(other, "theirs.txt"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, other, "add", "theirs.txt")
	testutil.RunGit(t, other, "commit", "-q", "-m", "theirs")
	testutil.RunGit(t, other, "push", "-q")
	testutil.RunGit(t, dir, "pull", "-q", "--ff-only")
	if got, want := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")), strings.TrimSpace(testutil.RunGit(t, other, "rev-parse", "HEAD")); got != want {
		t.Fatalf("git pull: HEAD %s, want %s", got, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "second.txt"), []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, dir, "add", "second.txt")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "second")
	testutil.RunGit(t, dir, "push", "-q")
	if strings.TrimSpace(testutil.RunGit(t, bare, "rev-parse", "main")) != strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")) {
		t.Fatal("git push did not reach the remote")
	}

	// An upstream the user chose is kept by a second init.
	testutil.RunGit(t, dir, "config", "branch.main.merge", "refs/heads/mine")
	if code, _, stderr := runApp(t, "init", dir, "--remote", bare); code != 0 {
		t.Fatalf("second init: %d %s", code, stderr)
	}
	if m := strings.TrimSpace(testutil.RunGit(t, dir, "config", "branch.main.merge")); m != "refs/heads/mine" {
		t.Errorf("second init replaced the user's upstream: %q", m)
	}
}
