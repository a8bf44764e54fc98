package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo makes a repo with one commit holding "a b.txt" (a name with a space, which
// cat-file's "<spec> missing" line also holds) and returns it with its Git.
func gitRepo(t *testing.T) (Git, string) {
	t.Helper()
	home := t.TempDir()
	gitconfig := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(gitconfig, []byte("[user]\n\tname = t\n\temail = t@example.invalid\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := Git{Env: IsolatedEnv(home, gitconfig)}
	repo := filepath.Join(home, "repo")
	if _, err := g.Run(home, nil, "init", "-q", repo); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "a b.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "c"}} {
		if _, err := g.Run(repo, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	return g, repo
}

func TestGitObjects(t *testing.T) {
	g, repo := gitRepo(t)
	got, err := g.Objects(repo, []string{"HEAD:a b.txt", "HEAD:no such file", "HEAD:gone"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["HEAD:a b.txt"] != "one\ntwo\n" {
		t.Fatalf("Objects = %q, want only HEAD:a b.txt = \"one\\ntwo\\n\"", got)
	}
	if got, err := g.Objects(repo, nil); err != nil || len(got) != 0 {
		t.Fatalf("Objects(nil) = %q, %v", got, err)
	}
}

func TestGitRevAndTreeDiff(t *testing.T) {
	g, repo := gitRepo(t)
	head, tree := g.Rev(repo, "HEAD"), g.Rev(repo, "HEAD^{tree}")
	if len(head) < 40 || len(tree) < 40 || head == tree {
		t.Fatalf("Rev HEAD = %q, HEAD^{tree} = %q: want two different object ids", head, tree)
	}
	if r := g.Rev(repo, "refs/heads/nope"); r != "" {
		t.Fatalf("Rev of a missing ref = %q, want \"\"", r)
	}
	if d, err := g.TreeDiff(repo, t.TempDir()); err != nil || d != "" {
		t.Fatalf("TreeDiff of a clean repo = %q, %v", d, err)
	}
	if err := os.WriteFile(filepath.Join(repo, "new.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d, err := g.TreeDiff(repo, t.TempDir()); err != nil || d != "?? new.txt\n" {
		t.Fatalf("TreeDiff with an untracked file = %q, %v", d, err)
	}
	if _, err := g.Run(repo, nil, "rev-parse", "--verify", "nope"); err == nil || !strings.Contains(err.Error(), "(in "+repo+")") {
		t.Fatalf("a failing git's error should name its directory: %v", err)
	}
}

func TestIsolatedEnv(t *testing.T) {
	t.Setenv("GIT_DIR", "/somewhere/else")
	t.Setenv("MEMD_CONFIG", "/x")
	env := IsolatedEnv("/h", "/h/gitconfig")
	for _, kv := range env {
		if strings.HasPrefix(kv, "GIT_DIR=") || strings.HasPrefix(kv, "MEMD_") {
			t.Fatalf("IsolatedEnv kept %s", kv)
		}
	}
	for _, want := range []string{"HOME=/h", "GIT_CONFIG_GLOBAL=/h/gitconfig", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0"} {
		if !strings.Contains("\n"+strings.Join(env, "\n")+"\n", "\n"+want+"\n") {
			t.Fatalf("IsolatedEnv lacks %s", want)
		}
	}
}

func TestPoll(t *testing.T) {
	start := time.Now()
	n := 0
	if !Poll(time.Second, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Poll: true after the 3rd call wanted, got n=%d", n)
	}
	if Poll(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Poll of a condition that never holds returned true")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Poll took %s", d)
	}
}

// RunGit and WriteFile: a file written under a new directory is what git commits and
// shows back, with the fixed author.
func TestRunGitWriteFile(t *testing.T) {
	dir := t.TempDir()
	RunGit(t, dir, "init", "-q")
	WriteFile(t, dir, "a/b/c.txt", "hello\n")
	RunGit(t, dir, "add", "-A")
	RunGit(t, dir, "commit", "-q", "-m", "one")
	if got := RunGit(t, dir, "show", "HEAD:a/b/c.txt"); got != "hello\n" {
		t.Fatalf("HEAD:a/b/c.txt = %q", got)
	}
	if got := RunGit(t, dir, "log", "-1", "--format=%an <%ae>"); got != "t <t@t>\n" {
		t.Fatalf("author %q", got)
	}
}
