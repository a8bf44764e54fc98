package githooks

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/procgroup"
	"github.com/memd-dev/memd/internal/testutil"
)

func newRepo(t *testing.T) (work, gitDir string) {
	t.Helper()
	work = t.TempDir()
	testutil.RunGit(t, work, "init", "-q", "-b", "main")
	return work, filepath.Join(work, ".git")
}

func writeHook(t *testing.T, dir, name, body string, mode os.FileMode) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), mode))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A hook sees the user's environment and git's variables for it, never memd's token
// (the default name and sync.token_env) nor another MEMD_* variable; it runs in the work
// tree root; a non-executable file is no hook.
func TestRunEnvironmentAndPlace(t *testing.T) {
	work, gitDir := newRepo(t)
	out := filepath.Join(t.TempDir(), "env")
	writeHook(t, filepath.Join(gitDir, "hooks"), PreCommit, "pwd > '"+out+"'; env >> '"+out+"'\n", 0o755)
	writeHook(t, filepath.Join(gitDir, "hooks"), CommitMsg, "exit 1\n", 0o644)
	t.Setenv("MEMD_GIT_TOKEN", "tok-default")
	t.Setenv("MY_TOKEN", "tok-custom")
	t.Setenv("MEMD_OTHER", "x")
	t.Setenv("SSH_AUTH_SOCK", "/run/agent.sock")
	t.Setenv("GIT_INDEX_FILE", "/wrong/index")
	r := New(work, gitDir, true, "MY_TOKEN", nil)
	if r.Has(CommitMsg) {
		t.Fatal("a non-executable commit-msg counts as a hook")
	}
	msg, err := r.BeforeCommit(context.Background(), Commit{Message: "m\n", WriteIndex: func(io.Writer) error { return nil },
		Env: []string{"GIT_AUTHOR_NAME=a"}})
	if err != nil || msg != "m\n" {
		t.Fatalf("BeforeCommit = %q, %v", msg, err)
	}
	b, err := os.ReadFile(out)
	must(t, err)
	env := string(b)
	for _, bad := range []string{"tok-default", "tok-custom", "MEMD_OTHER", "/wrong/index"} {
		if strings.Contains(env, bad) {
			t.Errorf("hook environment has %q", bad)
		}
	}
	for _, want := range []string{work + "\n", "SSH_AUTH_SOCK=/run/agent.sock", "GIT_INDEX_FILE=" + gitDir + "/memd-hook-index-", "GIT_EDITOR=:", "GIT_AUTHOR_NAME=a", "\nGIT_PREFIX=\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("hook environment lacks %q:\n%s", want, env)
		}
	}
	if ents, _ := filepath.Glob(filepath.Join(gitDir, "memd-hook-index-*")); len(ents) != 0 {
		t.Errorf("temporary index left: %v", ents)
	}
}

// core.hooksPath relative to the work tree root; commit.hooks false skips pre-commit,
// commit-msg and pre-push (git's --no-verify), not prepare-commit-msg; commit-msg's edits
// are kept and cleaned as git cleans a -m message; a refusal names the last stderr line.
func TestHooksPathNoVerifyAndMessage(t *testing.T) {
	work, gitDir := newRepo(t)
	testutil.RunGit(t, work, "config", "core.hooksPath", "hooks-here")
	dir := filepath.Join(work, "hooks-here")
	writeHook(t, dir, PrepareCommitMsg, `[ "$2" = message ] || exit 3; printf '\n\n' >> "$1"`+"\n", 0o755)
	writeHook(t, dir, CommitMsg, `printf 'Signed: x   \n\n\n' >> "$1"`+"\n", 0o755)
	writeHook(t, dir, PrePush, "echo one >&2; printf 'two\\033[31m\\n' >&2; exit 1\n", 0o755)
	writeHook(t, filepath.Join(gitDir, "hooks"), PreCommit, "exit 1\n", 0o755) // not the hooks dir
	r := New(work, gitDir, true, "", nil)
	if got := r.Dir(); got != dir {
		t.Fatalf("Dir = %q, want %q", got, dir)
	}
	msg, err := r.BeforeCommit(context.Background(), Commit{Message: "subject\n"})
	if err != nil || msg != "subject\n\nSigned: x\n" {
		t.Fatalf("BeforeCommit = %q, %v", msg, err)
	}
	err = r.BeforePush(context.Background(), "origin", "/x.git", []PushRef{{LocalRef: "refs/heads/main", LocalID: ZeroID, RemoteRef: "refs/heads/main"}})
	var rf *Refusal
	if !errors.Is(err, ErrRefused) || !errors.As(err, &rf) || rf.Hook != PrePush || rf.Line != `two\x1b[31m` {
		t.Fatalf("pre-push refusal = %v (%+v)", err, rf)
	}
	nv := New(work, gitDir, false, "", nil)
	if nv.Has(CommitMsg) || nv.Has(PrePush) || !nv.Has(PrepareCommitMsg) {
		t.Fatal("--no-verify skips commit-msg and pre-push, not prepare-commit-msg")
	}
	if err := nv.BeforePush(context.Background(), "origin", "/x.git", nil); err != nil {
		t.Fatalf("pre-push ran under --no-verify: %v", err)
	}
}

func TestCleanupWhitespace(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "\n\n  \n": "", "a": "a\n", "\n\na  \n\n\n\nb\t\n\n": "a\n\nb\n", "a\nb\n": "a\nb\n",
	} {
		if got := CleanupWhitespace(in); got != want {
			t.Errorf("CleanupWhitespace(%q) = %q, want %q", in, got, want)
		}
	}
}

// A hook that does not answer in time is no refusal (nothing is held for it): the error
// says it timed out, and its processes are gone.
func TestHungHookIsNoRefusal(t *testing.T) {
	work, gitDir := newRepo(t)
	writeHook(t, filepath.Join(gitDir, "hooks"), PreCommit, "sleep 30\n", 0o755)
	old := hookTimeout
	hookTimeout = 300 * time.Millisecond
	t.Cleanup(func() { hookTimeout = old })
	start := time.Now()
	_, err := New(work, gitDir, true, "", nil).BeforeCommit(context.Background(), Commit{Message: "m"})
	if err == nil || errors.Is(err, ErrRefused) || !errors.Is(err, procgroup.ErrTimeout) {
		t.Fatalf("BeforeCommit = %v, want a timeout that is no refusal", err)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Fatalf("took %s", el)
	}
}
