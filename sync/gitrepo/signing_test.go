package gitrepo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitsign"
)

// signWorld is one user's home whose git config signs every commit, a bare remote that
// refuses unsigned commits (pre-receive: git verify-commit), and two clones A and B opened
// by memd. git is the user's own git in that home: the reference.
type signWorld struct {
	home, bare, aDir, bDir string
	a, b                   *Repo
	git                    testutil.Git
}

// newSignWorld sets the test process's HOME and git config to a home of its own (memd reads
// the signing config as git does, from there), makes the user's key with keys, sets the
// config (key → value) it returns in the user's global config, and seeds the remote with a
// commit plain git signed.
func newSignWorld(t *testing.T, keys func(home string) [][2]string) *signWorld {
	w := &signWorld{home: t.TempDir()}
	gitconfig := filepath.Join(w.home, ".gitconfig")
	testutil.WriteFile(t, w.home, ".gitconfig", "")
	env := testutil.IsolatedEnv(w.home, gitconfig)
	env = append(env, "GNUPGHOME="+filepath.Join(w.home, ".gnupg"))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "HOME" || k == "GNUPGHOME" || strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "XDG_") {
			t.Setenv(k, v)
		}
	}
	w.git = testutil.Git{Env: append(env, "GIT_AUTHOR_NAME=memd test", "GIT_AUTHOR_EMAIL=memd@test",
		"GIT_COMMITTER_NAME=memd test", "GIT_COMMITTER_EMAIL=memd@test")}
	for _, kv := range keys(w.home) {
		w.run(t, w.home, "config", "--global", kv[0], kv[1])
	}
	w.bare = filepath.Join(t.TempDir(), "remote.git")
	testutil.VerifyingRemote(t, w.bare)
	seed := filepath.Join(t.TempDir(), "seed")
	w.run(t, filepath.Dir(seed), "clone", "-q", w.bare, seed)
	testutil.WriteFile(t, seed, "areas/x.html", "base\n")
	w.run(t, seed, "add", "-A")
	w.run(t, seed, "commit", "-q", "-m", "seed") // signed by git, from the same config
	w.run(t, seed, "push", "-q", "origin", "HEAD:main")
	w.aDir, w.bDir = filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	w.run(t, filepath.Dir(w.aDir), "clone", "-q", w.bare, w.aDir)
	w.run(t, filepath.Dir(w.bDir), "clone", "-q", w.bare, w.bDir)
	w.a = openTest(t, w.aDir, hostOptions("hosta"))
	w.b = openTest(t, w.bDir, hostOptions("hostb"))
	return w
}

func (w *signWorld) run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := w.git.Run(dir, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// verified fails unless git verify-commit accepts rev in dir.
func (w *signWorld) verified(t *testing.T, dir, rev string) {
	t.Helper()
	c := exec.Command("git", "verify-commit", "-v", rev)
	c.Dir, c.Env = dir, w.git.Env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("git verify-commit %s in %s: %v\n%s", rev, dir, err, out)
	}
}

// end: every commit the remote holds is signed, fsck clean everywhere, both clones at the
// remote's head with a clean git status.
func (w *signWorld) end(t *testing.T) {
	t.Helper()
	for _, c := range strings.Fields(w.run(t, w.bare, "rev-list", "--all")) {
		w.verified(t, w.bare, c)
	}
	head := w.run(t, w.bare, "rev-parse", "main")
	for _, r := range []*Repo{w.a, w.b} {
		mustSync(t, r)
		fsck(t, r.Dir())
		if h := w.run(t, r.Dir(), "rev-parse", "HEAD"); h != head {
			t.Fatalf("%s at %s, remote at %s", r.Dir(), h, head)
		}
		r.WaitIndexRefresh()
		if err := r.RefreshIndex(); err != nil {
			t.Fatal(err)
		}
		if out := w.run(t, r.Dir(), "status", "--porcelain", "-uall"); out != "" {
			t.Fatalf("git status in %s:\n%s", r.Dir(), out)
		}
	}
	fsck(t, w.bare)
}

// Every kind of commit memd makes is signed with the user's ssh key, as git signs: a
// writer's change, a merge after the two clones diverged, a sleep phase's commit, a
// resolve, a restore; the remote that refuses unsigned commits takes every push. A key
// that is gone stops the commit (ErrSign, the signer named, HEAD where it was, nothing
// pushed); the key back, the same paths commit and push.
func TestSignedCommitsSSH(t *testing.T) {
	var key string
	w := newSignWorld(t, func(home string) [][2]string {
		var pub string
		key, pub = testutil.SSHSigningKey(t, home, "id_ed25519")
		testutil.WriteFile(t, home, "allowed_signers", "memd@test "+pub+"\n")
		return [][2]string{{"commit.gpgsign", "true"}, {"gpg.format", "ssh"},
			{"user.signingkey", key}, {"gpg.ssh.allowedSignersFile", filepath.Join(home, "allowed_signers")}}
	})
	signedKinds(t, w)

	// The key gone: no commit, the error names the signer; nothing pushed.
	if err := os.Rename(key, key+".away"); err != nil {
		t.Fatal(err)
	}
	before := w.run(t, w.aDir, "rev-parse", "HEAD")
	testutil.WriteFile(t, w.aDir, "areas/late.html", "late\n")
	_, err := w.a.CommitPaths([]string{"areas/late.html"})
	if !errors.Is(err, gitsign.ErrSign) || !strings.Contains(err.Error(), "ssh key "+key+": ssh-keygen:") {
		t.Fatalf("commit without its key: %v", err)
	}
	if h := w.run(t, w.aDir, "rev-parse", "HEAD"); h != before {
		t.Fatalf("HEAD moved to %s without a signature", h)
	}
	// Nor a merge: B diverged from the remote (with the key), then its sync without the
	// key fails before anything moves.
	if err := os.Rename(key+".away", key); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.bDir, "areas/b2.html", "b2\n")
	mustCommit(t, w.b, "areas/b2.html")
	testutil.WriteFile(t, w.aDir, "areas/a2.html", "a2\n")
	mustCommit(t, w.a, "areas/a2.html")
	mustSync(t, w.a)
	remoteBefore := w.run(t, w.bare, "rev-parse", "main")
	bBefore := w.run(t, w.bDir, "rev-parse", "HEAD")
	if err := os.Rename(key, key+".away"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.b.Sync(context.Background(), pushOpts()); !errors.Is(err, gitsign.ErrSign) {
		t.Fatalf("merge without its key: %v", err)
	}
	if h := w.run(t, w.bDir, "rev-parse", "HEAD"); h != bBefore {
		t.Fatalf("B moved to %s without a signature", h)
	}
	if h := w.run(t, w.bare, "rev-parse", "main"); h != remoteBefore {
		t.Fatalf("the remote moved to %s", h)
	}
	// The key back: the same path commits, signed, and goes out; B's merge too.
	if err := os.Rename(key+".away", key); err != nil {
		t.Fatal(err)
	}
	mustSync(t, w.b)
	w.verified(t, w.bDir, "HEAD")
	mustCommit(t, w.a, "areas/late.html")
	w.verified(t, w.aDir, "HEAD")
	mustSync(t, w.a)
	if got := w.run(t, w.bare, "show", "main:areas/late.html"); got != "late" {
		t.Fatalf("remote holds %q", got)
	}
	w.end(t)
}

// The same with an OpenPGP key (gpg, the committer's ident as the key, as git's default).
func TestSignedCommitsOpenPGP(t *testing.T) {
	w := newSignWorld(t, func(home string) [][2]string {
		testutil.GPGSigningKey(t, filepath.Join(home, ".gnupg"), "memd test <memd@test>")
		return [][2]string{{"commit.gpgsign", "true"}}
	})
	signedKinds(t, w)
	w.end(t)
}

// signedKinds makes each kind of memd commit in w and checks git verify-commit takes it.
func signedKinds(t *testing.T, w *signWorld) {
	t.Helper()
	// A writer's change, pushed through the verifying remote.
	testutil.WriteFile(t, w.aDir, "areas/a.html", "from A\n")
	mustCommit(t, w.a, "areas/a.html")
	w.verified(t, w.aDir, "HEAD")
	mustSync(t, w.a)
	// Divergence: B commits too; its sync merges (a two-parent commit) and pushes.
	testutil.WriteFile(t, w.bDir, "areas/x.html", "edited on B\n")
	mustCommit(t, w.b, "areas/x.html")
	testutil.WriteFile(t, w.aDir, "areas/x.html", "edited on A\n")
	mustCommit(t, w.a, "areas/x.html")
	mustSync(t, w.a)
	rb := mustSync(t, w.b)
	if n := len(strings.Fields(w.run(t, w.bDir, "rev-list", "--parents", "-n1", "HEAD"))); n != 3 {
		t.Fatalf("B's HEAD is not a merge (%d ids)", n)
	}
	w.verified(t, w.bDir, "HEAD")
	// A sleep phase's commit (sleep commits through CommitPathsMessage).
	testutil.WriteFile(t, w.bDir, "areas/b.html", "slept\n")
	if _, err := w.b.CommitPathsMessage([]string{"areas/b.html"}, "sleep: tidy\n", memd.CommitSleep); err != nil {
		t.Fatal(err)
	}
	w.verified(t, w.bDir, "HEAD")
	// Resolve the conflict the merge left, keeping B's copy.
	if len(rb.Conflicts) != 1 {
		t.Fatalf("conflicts %v", rb.Conflicts)
	}
	if _, err := w.b.Resolve(statusline.Conflict{Path: "areas/x.html", Copy: rb.Conflicts[0]}, KeepOurs); err != nil {
		t.Fatal(err)
	}
	w.verified(t, w.bDir, "HEAD")
	// Restore the first version of a.html.
	target, v, err := w.b.History().PlanRestore("areas/x.html", w.run(t, w.bDir, "rev-parse", "HEAD~3"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.b.History().Restore(target, v); err != nil {
		t.Fatal(err)
	}
	w.verified(t, w.bDir, "HEAD")
	mustSync(t, w.b)
	mustSync(t, w.a)
}

// The signing config is read again when git's config files move: a repo opened before
// `git config --global commit.gpgsign true` signs the commits after it, and stops after
// `commit.gpgsign false` in the repo's own config (the repo's file wins, as in git).
func TestSigningConfigReread(t *testing.T) {
	var key string
	w := newSignWorld(t, func(home string) [][2]string {
		var pub string
		key, pub = testutil.SSHSigningKey(t, home, "id_ed25519")
		testutil.WriteFile(t, home, "allowed_signers", "memd@test "+pub+"\n")
		return [][2]string{{"commit.gpgsign", "true"}, {"gpg.format", "ssh"}, {"user.signingkey", key},
			{"gpg.ssh.allowedSignersFile", filepath.Join(home, "allowed_signers")}}
	})
	w.run(t, w.home, "config", "--global", "--unset", "commit.gpgsign") // the seed was signed
	unsigned := func(rev string) {
		t.Helper()
		if out := w.run(t, w.aDir, "cat-file", "commit", rev); strings.Contains(out, "\ngpgsig ") {
			t.Fatalf("%s is signed:\n%s", rev, out)
		}
	}
	testutil.WriteFile(t, w.aDir, "areas/1.html", "1\n")
	mustCommit(t, w.a, "areas/1.html")
	unsigned("HEAD")
	w.run(t, w.home, "config", "--global", "commit.gpgsign", "true")
	testutil.WriteFile(t, w.aDir, "areas/2.html", "2\n")
	mustCommit(t, w.a, "areas/2.html")
	w.verified(t, w.aDir, "HEAD")
	w.run(t, w.aDir, "config", "commit.gpgsign", "false")
	testutil.WriteFile(t, w.aDir, "areas/3.html", "3\n")
	mustCommit(t, w.a, "areas/3.html")
	unsigned("HEAD")
}

// BenchmarkUnsignedCommitSigningCheck is what signing adds to a commit in a repo that does
// not sign: the stamp of git's config files and the cached answer (no process).
//
//	go test -run '^$' -bench UnsignedCommitSigningCheck ./sync/gitrepo/
func BenchmarkUnsignedCommitSigningCheck(b *testing.B) {
	dir := newGitDir(b)
	r := openTest(b, dir, testOptions())
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nm\n")
	if _, err := r.signers.Sign(context.Background(), r.gitDir, gitconfig.Stamp(r.layout), payload, "a <b>"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		out, err := r.signers.Sign(context.Background(), r.gitDir, gitconfig.Stamp(r.layout), payload, "a <b>")
		if err != nil || len(out) != len(payload) {
			b.Fatal(err)
		}
	}
}
