package gitrepo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitstore"
)

// rev is `git rev-parse rev` in dir.
func rev(t *testing.T, dir, rev string) string {
	t.Helper()
	return strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", rev))
}

// layoutRound is what memd does in any checkout, checked with plain git: a commit of
// its own, a push, another machine's commit merged in by a sync, the state dir in the
// checkout's own git dir, git status empty and fsck clean.
func layoutRound(t *testing.T, w *syncWorld, dir string, opts Options) {
	t.Helper()
	r := openTest(t, dir, opts)
	branch := opts.Branch
	if branch == "" {
		branch = "main"
	}
	testutil.WriteFile(t, dir, "notes/mine.md", "mine\n")
	mustCommit(t, r, "notes/mine.md")
	testutil.WriteFile(t, w.bDir, "notes/theirs.md", "theirs\n")
	testutil.RunGit(t, w.bDir, "add", "-A")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "theirs")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "HEAD:"+branch)
	mustSync(t, r)
	if b, err := os.ReadFile(filepath.Join(dir, "notes", "theirs.md")); err != nil || string(b) != "theirs\n" {
		t.Fatalf("the other side's file after the sync: %q %v", b, err)
	}
	if h, rh := rev(t, dir, "HEAD"), rev(t, w.bare, branch); h != rh {
		t.Fatalf("HEAD %s, remote %s %s", h, branch, rh)
	}
	statusClean(t, r)
	fsck(t, dir)
	gitDir := rev(t, dir, "--absolute-git-dir")
	if sd := memd.StateDir(dir); sd != filepath.Join(gitDir, memd.StateDirName) {
		t.Fatalf("state dir %s, git dir %s", sd, gitDir)
	}
	if fi, err := os.Stat(filepath.Join(gitDir, memd.StateDirName)); err != nil || !fi.IsDir() {
		t.Fatalf("no state dir in the git dir %s: %v", gitDir, err)
	}
}

// A checkout whose .git is a file: a submodule of a dotfiles repo, a --separate-git-dir clone.
func TestLayoutGitFile(t *testing.T) {
	t.Run("submodule", func(t *testing.T) {
		w := newSyncWorld(t, map[string]string{"README.md": "seed\n"})
		dots := newGitDir(t)
		testutil.RunGit(t, dots, "-c", "protocol.file.allow=always", "submodule", "add", "-q", w.bare, "memory")
		testutil.RunGit(t, dots, "commit", "-q", "-m", "memory as a submodule")
		layoutRound(t, w, filepath.Join(dots, "memory"), testOptions())
		fsck(t, dots)
	})
	t.Run("separate-git-dir", func(t *testing.T) {
		w := newSyncWorld(t, map[string]string{"README.md": "seed\n"})
		dir := filepath.Join(t.TempDir(), "sep")
		testutil.RunGit(t, filepath.Dir(dir), "clone", "-q", "--separate-git-dir", filepath.Join(filepath.Dir(dir), "sep.git"), w.bare, dir)
		layoutRound(t, w, dir, testOptions())
	})
}

// A linked worktree has its own HEAD, index and state dir; objects and refs are shared.
// memd in each of two worktrees of one repo commits its own branch without meeting the
// other, and refuses the branch the other has checked out.
func TestLayoutLinkedWorktree(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"README.md": "seed\n"})
	linked := filepath.Join(t.TempDir(), "linked")
	testutil.RunGit(t, w.aDir, "worktree", "add", "-q", "-b", "side", linked)
	opts := testOptions()
	opts.Branch = "side"
	if _, err := Open(linked, testOptions()); !errors.Is(err, gitlayout.ErrUnsupported) || !strings.Contains(err.Error(), "checked out at "+w.aDir) {
		t.Fatalf("memd on main in the linked worktree: %v", err)
	}
	main := openTest(t, w.aDir, testOptions())
	mainHead := rev(t, w.aDir, "HEAD")
	layoutRound(t, w, linked, opts)
	side := openTest(t, linked, opts)
	testutil.RunGit(t, w.aDir, "checkout", "-q", "--ignore-other-worktrees", "side")
	if a := side.StandAside(); !strings.Contains(a.Reason, "checked out at "+w.aDir) {
		t.Fatalf("side checked out in the main worktree too: memd's aside %+v", a)
	}
	testutil.RunGit(t, w.aDir, "checkout", "-q", "main")
	if a := side.StandAside(); a.Reason != "" {
		t.Fatalf("after: %+v", a)
	}
	if h := rev(t, w.aDir, "HEAD"); h != mainHead {
		t.Fatalf("the main worktree's HEAD moved: %s → %s", mainHead, h)
	}
	if out := testutil.RunGit(t, w.aDir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("the main worktree after memd in the linked one:\n%s", out)
	}
	testutil.WriteFile(t, w.aDir, "notes/main.md", "main\n")
	mustCommit(t, main, "notes/main.md")
	statusClean(t, main)
	if memd.StateDir(w.aDir) == memd.StateDir(linked) {
		t.Fatalf("one state dir for two worktrees: %s", memd.StateDir(linked))
	}
	if got := rev(t, linked, "side"); got != rev(t, linked, "HEAD") {
		t.Fatalf("side %s, linked HEAD %s", got, rev(t, linked, "HEAD"))
	}
	fsck(t, w.aDir)
}

// What memd cannot work in is refused at open, naming the layout.
func TestLayoutRefused(t *testing.T) {
	for _, c := range []struct{ name, key, val, want string }{
		{"sha256", "extensions.objectformat", "sha256", "object format"},
		{"reftable", "extensions.refstorage", "reftable", "ref storage"},
		{"bare", "core.bare", "true", "bare repository"},
		{"worktree elsewhere", "core.worktree", "/", "core.worktree"},
	} {
		dir := newGitDir(t)
		testutil.RunGit(t, dir, "config", "core.repositoryformatversion", "1")
		testutil.RunGit(t, dir, "config", c.key, c.val)
		_, err := Open(dir, testOptions())
		if !errors.Is(err, gitlayout.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	dir := t.TempDir()
	testutil.WriteFile(t, dir, ".git", "gitdir: nowhere\n")
	if _, err := Open(dir, testOptions()); !errors.Is(err, gitlayout.ErrBadGitFile) {
		t.Errorf("a .git file naming nothing: %v", err)
	}
}

// commits makes n commits of one file in dir with the git binary.
func commits(t *testing.T, dir, name string, n int) {
	t.Helper()
	for i := range n {
		testutil.WriteFile(t, dir, name, strings.Repeat("x\n", i+1))
		testutil.RunGit(t, dir, "add", name)
		testutil.RunGit(t, dir, "commit", "-q", "-m", name+" "+string(rune('a'+i%26)))
	}
}

// A `--depth 1` clone whose remote moved on syncs: a fast-forward, a merge whose base is
// the graft point, and a merge whose base is below it (the remote rewritten from 30
// commits down) that deepens the clone as git fetch --deepen does; fsck clean, git status
// empty, git agreeing on the merge's parents.
func TestLayoutShallowClone(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"README.md": "seed\n"})
	commits(t, w.bDir, "history.md", 30)
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	dir := filepath.Join(t.TempDir(), "shallow")
	testutil.RunGit(t, filepath.Dir(dir), "clone", "-q", "--depth", "1", "file://"+w.bare, dir)
	r := openTest(t, dir, testOptions())

	commits(t, w.bDir, "theirs.md", 2) // the remote moves on: a fast-forward
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	mustSync(t, r)
	if h, rh := rev(t, dir, "HEAD"), rev(t, w.bare, "main"); h != rh {
		t.Fatalf("after a fast-forward: HEAD %s, remote %s", h, rh)
	}

	testutil.WriteFile(t, dir, "notes/mine.md", "mine\n") // both move on: a merge
	mustCommit(t, r, "notes/mine.md")
	commits(t, w.bDir, "theirs2.md", 1)
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	mustSync(t, r)
	if h, rh := rev(t, dir, "HEAD"), rev(t, w.bare, "main"); h != rh {
		t.Fatalf("after a merge: HEAD %s, remote %s", h, rh)
	}

	// The remote rewritten below the graft point: the base is 30 commits down.
	testutil.WriteFile(t, dir, "notes/mine2.md", "mine2\n")
	mustCommit(t, r, "notes/mine2.md")
	testutil.RunGit(t, w.bDir, "pull", "-q", "--no-rebase", "origin", "main")
	testutil.RunGit(t, w.bDir, "reset", "-q", "--hard", "HEAD~30")
	commits(t, w.bDir, "rewritten.md", 1)
	testutil.RunGit(t, w.bDir, "push", "-q", "--force", "origin", "main")
	theirs := rev(t, w.bare, "main")
	mustSync(t, r)
	if h, rh := rev(t, dir, "HEAD"), rev(t, w.bare, "main"); h != rh {
		t.Fatalf("after the deepening merge: HEAD %s, remote %s", h, rh)
	}
	if out := testutil.RunGit(t, dir, "merge-base", "--is-ancestor", theirs, "HEAD"); out != "" {
		t.Fatal(out)
	}
	for _, f := range []string{"notes/mine.md", "notes/mine2.md", "rewritten.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after the merges: %v", err)
		}
	}
	statusClean(t, r)
	fsck(t, dir)
}

// feature.manyFiles (index version 4, the untracked cache): memd's commits and index
// refreshes, spliced and full, keep version 4, and git reads the index as clean.
func TestLayoutIndexVersion4(t *testing.T) {
	dir := newGitDir(t)
	testutil.RunGit(t, dir, "config", "feature.manyFiles", "true")
	for _, p := range []string{"projects/alpha/notes.md", "projects/alpha/todo.md", "projects/beta/notes.md", "areas/health.md", "README.md"} {
		testutil.WriteFile(t, dir, p, p+"\n")
	}
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, dir, "update-index", "--index-version", "4")
	testutil.RunGit(t, dir, "status", "--porcelain") // git writes its untracked cache
	idx := filepath.Join(dir, ".git", "index")
	r := openTest(t, dir, testOptions())
	for i, p := range []string{"projects/alpha/new.md", "projects/alpha/notes.md", "projects/beta/b.md"} {
		testutil.WriteFile(t, dir, p, strings.Repeat("v\n", i+2))
		mustCommit(t, r, p)
		statusClean(t, r)
		if v := gitstore.IndexFileVersion(idx); v != 4 {
			t.Fatalf("after memd's commit of %s: index version %d", p, v)
		}
	}
	testutil.RunGit(t, dir, "rm", "-q", "areas/health.md") // git writes the index: memd's next refresh is a full one
	testutil.RunGit(t, dir, "commit", "-q", "-m", "rm")
	testutil.WriteFile(t, dir, "areas/new.md", "new\n")
	mustCommit(t, r, "areas/new.md")
	statusClean(t, r)
	if v := gitstore.IndexFileVersion(idx); v != 4 {
		t.Fatalf("after a full refresh: index version %d", v)
	}
	if out := testutil.RunGit(t, dir, "ls-files"); strings.Count(out, "\n") != 7 {
		t.Fatalf("git ls-files:\n%s", out)
	}
	fsck(t, dir)
}

// A `--filter=blob:none` clone where the user's own `git fetch` brought the remote's
// commits without their blobs: memd's merge and checkout fetch each blob they read from
// the promisor remote, as git does.
func TestLayoutPartialClone(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.md": "a\n", "notes/old.md": "old\n"})
	testutil.RunGit(t, w.bare, "config", "uploadpack.allowFilter", "true")
	dir := filepath.Join(t.TempDir(), "partial")
	testutil.RunGit(t, filepath.Dir(dir), "clone", "-q", "--filter=blob:none", "file://"+w.bare, dir)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, w.bDir, "notes/a.md", "a, theirs\n")
	testutil.WriteFile(t, w.bDir, "notes/b.md", "b\n")
	testutil.RunGit(t, w.bDir, "add", "-A")
	testutil.RunGit(t, w.bDir, "commit", "-q", "-m", "theirs")
	testutil.RunGit(t, w.bDir, "push", "-q", "origin", "main")
	testutil.RunGit(t, dir, "fetch", "-q", "origin") // the user's fetch: commits and trees, no blobs
	blob := rev(t, w.bDir, "HEAD:notes/b.md")
	if out, err := (testutil.Git{Env: append(testutil.GitEnv(), "GIT_NO_LAZY_FETCH=1")}).Run(dir, nil, "cat-file", "--batch-check", "--batch-all-objects"); err != nil || strings.Contains(out, blob) {
		t.Fatalf("the blob is here before memd needs it (%v):\n%s", err, out)
	}
	testutil.WriteFile(t, dir, "notes/c.md", "c\n")
	mustCommit(t, r, "notes/c.md")
	mustSync(t, r)
	for p, want := range map[string]string{"notes/a.md": "a, theirs\n", "notes/b.md": "b\n", "notes/c.md": "c\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	if h, rh := rev(t, dir, "HEAD"), rev(t, w.bare, "main"); h != rh {
		t.Fatalf("HEAD %s, remote %s", h, rh)
	}
	statusClean(t, r)
	fsck(t, dir)
}

// A clone that borrows objects through objects/info/alternates (`git clone --shared`).
func TestLayoutAlternates(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"notes/a.md": "a\n"})
	dir := filepath.Join(t.TempDir(), "shared")
	testutil.RunGit(t, filepath.Dir(dir), "clone", "-q", "--shared", w.bare, dir)
	layoutRound(t, w, dir, testOptions())
}
