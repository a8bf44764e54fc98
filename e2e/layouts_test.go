package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// ident is a git identity for the test's own commits (the world's git config has none).
var ident = []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}

// memd run in the layouts git makes (README, "The repo layouts git makes"): the memory repo
// as a submodule of a dotfiles repo (its .git a file), and two linked worktrees of one repo
// each with a memd of its own, without meeting; memd on the branch the other worktree has
// checked out refuses to start with exit 2, naming where.
func TestRunInGitLayouts(t *testing.T) {
	w := newWorld(t)
	g := testutil.Git{Env: w.env}
	run := func(dir string, args ...string) string {
		t.Helper()
		out, err := g.Run(dir, ident, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	origin := w.repo
	dots := filepath.Join(w.home, "dots")
	run(w.home, "init", "-q", "-b", "main", dots)
	run(dots, "-c", "protocol.file.allow=always", "submodule", "add", "-q", origin, "memory")
	run(dots, "commit", "-q", "-m", "memory as a submodule")

	// The submodule checkout: .git is a file naming .git/modules/memory.
	w.repo = filepath.Join(dots, "memory")
	if fi, err := os.Lstat(filepath.Join(w.repo, ".git")); err != nil || fi.IsDir() {
		t.Fatalf("the submodule's .git is not a file: %v", err)
	}
	d := w.start()
	from := w.head()
	w.write("notes/sub.md", "in the submodule\n")
	w.waitHeadMoves(d, from)
	w.checkClean(d)
	sd := memd.StateDir(w.repo)
	if !strings.HasPrefix(sd, filepath.Join(dots, ".git", "modules")) {
		t.Fatalf("state dir %s is not in the submodule's git dir", sd)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("memd run in the submodule exited %d\n%s", code, d.Logs())
	}
	// The status document is in the submodule's state dir, and memd status finds it there
	// (the last one a stopped memd writes says so).
	if _, err := os.Stat(filepath.Join(sd, "status.json")); err != nil {
		t.Fatal(err)
	}
	if out, code := w.memd("status", "--config", w.config, "--repo", w.repo); code != 0 || !strings.Contains(out, "stopped") {
		t.Fatalf("memd status in the submodule: exit %d\n%s", code, out)
	}

	// Two worktrees of one repo, a memd in each.
	w.repo = origin
	linked := filepath.Join(w.home, "linked")
	run(origin, "worktree", "add", "-q", "-b", "side", linked)
	sideConfig := filepath.Join(w.home, "side.yaml")
	if err := os.WriteFile(sideConfig, []byte(baseConfig+"sync: {branch: side}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := testutil.Run(t, memdBin, w.procOptions(), memdTimeout, "run", "--config", w.config, "--repo", linked)
	if code != 2 || !strings.Contains(out, "checked out at "+origin) {
		t.Fatalf("memd run on main in the worktree of side: exit %d (want 2)\n%s", code, out)
	}
	// A .git file that names no git dir: exit 2, naming it, before anything is written.
	broken := filepath.Join(w.home, "broken")
	if err := os.MkdirAll(broken, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(broken, ".git"), []byte("gitdir: ../nowhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := testutil.Run(t, memdBin, w.procOptions(), memdTimeout, "run", "--config", w.config, "--repo", broken); code != 2 || !strings.Contains(out, filepath.Join(broken, ".git")) {
		t.Fatalf("memd run with a broken .git file: exit %d (want 2)\n%s", code, out)
	}

	dMain := w.start()
	dSide := testutil.Start(t, memdBin, w.procOptions(), "run", "--config", sideConfig, "--repo", linked)
	mainFrom, sideFrom := w.head(), g.Rev(linked, "side")
	w.write("notes/main.md", "main\n")
	if err := os.WriteFile(filepath.Join(linked, "side.md"), []byte("side\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitHeadMoves(dMain, mainFrom)
	testutil.WaitFor(t, "a commit on side", commitTimeout, func() bool { return g.Rev(linked, "side") != sideFrom }, dSide.Describe)
	w.checkClean(dMain)
	w.repo = linked
	w.checkClean(dSide)
	if _, ok := w.committed("notes/main.md"); ok {
		t.Fatal("the main worktree's file is on side")
	}
	if memd.StateDir(origin) == memd.StateDir(linked) {
		t.Fatalf("one state dir for both worktrees: %s", memd.StateDir(linked))
	}
	for _, d := range []*testutil.Daemon{dMain, dSide} {
		if code := d.Stop(); code != 0 {
			t.Fatalf("exit %d\n%s", code, d.Logs())
		}
	}
}
