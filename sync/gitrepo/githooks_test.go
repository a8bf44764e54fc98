package gitrepo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/githooks"
)

// A pre-commit hook that refuses two of eight changed paths (found by halving): those two
// are held with the hook's last line, the six others are committed in one commit; a held
// path unchanged stays out, changed it is tried again; `git fsck` is clean.
func TestCommitHookRefusalHoldsOnlyRefusedPaths(t *testing.T) {
	dir := newGitDir(t)
	hook := "#!/bin/sh\nbad=$(git grep --cached -l NOPE | tr '\\n' ' ')\n" +
		"if [ -n \"$bad\" ]; then echo first line >&2; echo \"refused: $bad\" >&2; exit 1; fi\n"
	testutil.WriteFile(t, dir, ".git/hooks/pre-commit", hook)
	must(t, os.Chmod(filepath.Join(dir, ".git/hooks/pre-commit"), 0o755))
	r := openTest(t, dir, testOptions())
	r.SetGitHooks(r.GitHooks(true, ""))
	var paths []string
	for i, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		content := "fine\n"
		if i == 2 || i == 6 {
			content = "NOPE\n"
		}
		testutil.WriteFile(t, dir, name+".html", content)
		paths = append(paths, name+".html")
	}
	res := mustCommit(t, r, paths...)
	if res.Hash == "" || len(res.Changes) != 6 {
		t.Fatalf("commit %q with %d changes, want the 6 fine paths", res.Hash, len(res.Changes))
	}
	held := r.HookHeldFiles()
	if len(held) != 2 || held[0].Path != "c.html" || held[1].Path != "g.html" {
		t.Fatalf("held %+v, want c.html and g.html", held)
	}
	if held[0].Hook != "pre-commit" || held[0].Line != "refused: c.html" {
		t.Fatalf("held %+v: want the hook and its last stderr line", held[0])
	}
	// Unchanged: no commit, still held.
	if res := mustCommit(t, r, "c.html", "g.html"); res.Hash != "" {
		t.Fatalf("a held path unchanged was committed: %+v", res)
	}
	testutil.WriteFile(t, dir, "c.html", "fine now\n")
	res = mustCommit(t, r, "c.html", "g.html")
	if len(res.Changes) != 1 || res.Changes[0].Path != "c.html" {
		t.Fatalf("after the change: %+v", res.Changes)
	}
	if held := r.HookHeldFiles(); len(held) != 1 || held[0].Path != "g.html" {
		t.Fatalf("held %+v, want g.html only", held)
	}
	if out := testutil.RunGit(t, dir, "ls-tree", "--name-only", "HEAD"); strings.Contains(out, "g.html") {
		t.Fatalf("g.html committed:\n%s", out)
	}
	fsck(t, dir)
}

// A commit-msg refusal (memd's message names a path the hook will not have in a message)
// holds that path; commit-msg's edit to the message of the rest is kept.
func TestCommitMsgRefusalHoldsItsPath(t *testing.T) {
	dir := newGitDir(t)
	hook := "#!/bin/sh\nif grep -q '^A private/' \"$1\"; then echo 'no private paths in messages' >&2; exit 1; fi\n" +
		"echo 'Checked-By: commit-msg' >> \"$1\"\n"
	testutil.WriteFile(t, dir, ".git/hooks/commit-msg", hook)
	must(t, os.Chmod(filepath.Join(dir, ".git/hooks/commit-msg"), 0o755))
	r := openTest(t, dir, testOptions())
	r.SetGitHooks(r.GitHooks(true, ""))
	for _, p := range []string{"a.html", "private/x.html", "z.html"} {
		testutil.WriteFile(t, dir, p, p+"\n")
	}
	res := mustCommit(t, r, "a.html", "private", "z.html")
	if len(res.Changes) != 2 {
		t.Fatalf("changes %+v, want a.html and z.html", res.Changes)
	}
	if held := r.HookHeldFiles(); len(held) != 1 || held[0].Path != "private/x.html" || held[0].Hook != "commit-msg" ||
		held[0].Line != "no private paths in messages" {
		t.Fatalf("held %+v", held)
	}
	if msg := testutil.RunGit(t, dir, "log", "-1", "--format=%B"); !strings.HasSuffix(msg, "Checked-By: commit-msg\n\n") ||
		!strings.HasPrefix(msg, "memd: +2 ~0 -0\n") {
		t.Fatalf("message %q: want memd's for the two paths with commit-msg's line", msg)
	}
	fsck(t, dir)
}

// BenchmarkNoHooksCommitOverhead is what each commit pays for the git hooks in a repo
// without any: the runner's Before and AfterCommit (the git config stamp, a stat of the
// hooks directory each).
func BenchmarkNoHooksCommitOverhead(b *testing.B) {
	dir := newGitDir(b)
	must(b, os.RemoveAll(filepath.Join(dir, ".git", "hooks")))
	r := openTest(b, dir, testOptions())
	h := r.GitHooks(true, "")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if h.Before() {
			b.Fatal("hooks found")
		}
		r.mu.Lock()
		r.gitHooks = h
		r.afterCommitHooks()
		r.mu.Unlock()
	}
}

// post-merge after a sync's merge and after its fast-forward ("0", in the work tree with
// the merge in); pre-push before the push with git's arguments and stdin; a pre-push
// refusal fails the sync (errors.Is githooks.ErrRefused) and the remote keeps its head.
func TestSyncRunsPostMergeAndPrePush(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/base.html": "base\n"})
	log := filepath.Join(t.TempDir(), "log")
	hooks := filepath.Join(w.bDir, ".git", "hooks")
	testutil.WriteFile(t, hooks, "post-merge", "#!/bin/sh\necho \"post-merge $1 $(cat areas/from-a.html)\" >> '"+log+"'\n")
	testutil.WriteFile(t, hooks, "pre-push", "#!/bin/sh\necho \"pre-push $1 $2\" >> '"+log+"'\nsed 's/^/stdin /' >> '"+log+"'\n"+
		"if [ -e '"+log+".refuse' ]; then echo 'not today' >&2; exit 1; fi\n")
	for _, h := range []string{"post-merge", "pre-push"} {
		must(t, os.Chmod(filepath.Join(hooks, h), 0o755))
	}
	w.b.SetGitHooks(w.b.GitHooks(true, ""))
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "a1\n")
	mustCommit(t, w.a, "areas/from-a.html")
	mustSync(t, w.a)
	testutil.WriteFile(t, w.bDir, "areas/from-b.html", "b\n")
	mustCommit(t, w.b, "areas/from-b.html")
	if rb := mustSync(t, w.b); !rb.Merged || !rb.Pushed {
		t.Fatalf("B: %+v", rb)
	}
	head := strings.TrimSpace(testutil.RunGit(t, w.bDir, "rev-parse", "HEAD"))
	old := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD"))
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "a2\n")
	mustCommit(t, w.a, "areas/from-a.html")
	mustSync(t, w.a)
	if rb := mustSync(t, w.b); !rb.FastForward {
		t.Fatalf("B second sync: %+v", rb)
	}
	b, err := os.ReadFile(log)
	must(t, err)
	want := "post-merge 0 a1\npre-push origin " + w.bare + "\nstdin refs/heads/main " + head + " refs/heads/main " + old + "\npost-merge 0 a2\n"
	if string(b) != want {
		t.Fatalf("hooks log:\n%s\nwant:\n%s", b, want)
	}
	must(t, os.WriteFile(log+".refuse", nil, 0o644))
	testutil.WriteFile(t, w.bDir, "areas/from-b.html", "b2\n")
	mustCommit(t, w.b, "areas/from-b.html")
	remote := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	_, err = w.b.Sync(context.Background(), pushOpts())
	if !errors.Is(err, githooks.ErrRefused) || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("Sync with pre-push refusing: %v", err)
	}
	if now := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")); now != remote {
		t.Fatalf("pushed despite pre-push: %s -> %s", remote, now)
	}
}

// A path the hook holds that the remote changes too: like `git pull` over an uncommitted
// change ("would be overwritten by merge"), the sync stops with an error naming it and the
// refused version is in no commit (not in an edit merge's side commit either); once the
// path passes the hook it is committed and the sync merges.
func TestHookHeldPathChangedRemotely(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/x.html": "base\n"})
	hook := "#!/bin/sh\nif git grep --cached -q NOPE; then echo refused >&2; exit 1; fi\n"
	testutil.WriteFile(t, w.bDir, ".git/hooks/pre-commit", hook)
	must(t, os.Chmod(filepath.Join(w.bDir, ".git/hooks/pre-commit"), 0o755))
	w.b.SetGitHooks(w.b.GitHooks(true, ""))
	testutil.WriteFile(t, w.bDir, "areas/x.html", "NOPE\n")
	if res := mustCommit(t, w.b, "areas/x.html"); res.Hash != "" {
		t.Fatalf("held path committed: %+v", res)
	}
	testutil.WriteFile(t, w.aDir, "areas/x.html", "from a\n")
	mustCommit(t, w.a, "areas/x.html")
	mustSync(t, w.a)
	if _, err := w.b.Sync(context.Background(), pushOpts()); err == nil || !strings.Contains(err.Error(), "areas/x.html") {
		t.Fatalf("B sync over a held path: %v, want an error naming it", err)
	}
	if out := testutil.RunGit(t, w.bDir, "log", "--all", "-p", "--format=%H"); strings.Contains(out, "NOPE") {
		t.Fatalf("the refused version is in a commit:\n%s", out)
	}
	if got := readWork(t, w.bDir, "areas/x.html"); got != "NOPE\n" {
		t.Fatalf("the held file was overwritten: %q", got)
	}
	testutil.WriteFile(t, w.bDir, "areas/x.html", "from b\n")
	mustCommit(t, w.b, "areas/x.html")
	w.syncAll(t)
	w.check(t)
}
