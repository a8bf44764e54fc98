package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/internal/testutil"
)

// seed003Dir lays out a directory of project memories the way the memory-save mod keeps
// them (seed 003): one directory per project with MEMORY.md and topic files, no PARA buckets.
// beta's MEMORY.md is out of the template (an extra section) and over the soft line cap.
func seed003Dir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "memory")
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("alpha/MEMORY.md", "# alpha\n\n## CRITICAL RULES\n\n- Never push to main.\n\n## Architecture & Config Facts\n\n- Go 1.26.\n\n"+
		"## Active Warnings\n\n- None yet.\n\n## Topic Files\n\n- `history.md`.\n")
	write("alpha/history.md", "# alpha: history\n\n- first session\n")
	var facts []string
	for i := 0; i < memorymd.ProjectSoftLines; i++ {
		facts = append(facts, "- fact "+strings.Repeat("x", i%7))
	}
	write("beta/MEMORY.md", "# beta\n\n## CRITICAL RULES\n\n- Keep the API stable.\n\n## Architecture & Config Facts\n\n"+
		strings.Join(facts, "\n")+"\n\n## Notes\n\n- an old note\n")
	return dir
}

func TestInitProjectMemoryLayout(t *testing.T) {
	isolateHome(t)
	dir := seed003Dir(t)
	code, out, stderr := runApp(t, "init", dir)
	if code != 0 {
		t.Fatalf("init: %d %s", code, stderr)
	}
	if !strings.Contains(out, "layout: project-memory") {
		t.Errorf("init output does not name the layout:\n%s", out)
	}
	for _, b := range scaffold.SkeletonDirs {
		if _, err := os.Stat(filepath.Join(dir, b)); !os.IsNotExist(err) {
			t.Errorf("init added %s to a directory of project memories", b)
		}
	}
	if got := strings.TrimSpace(testutil.RunGit(t, dir, "show", "--name-only", "--format=%s", "HEAD")); got != "memd: init\n\n.gitignore" {
		t.Errorf("init committed %q", got)
	}

	// doctor: the template check and the caps, per project; nothing about missing buckets.
	code, out, _ = runApp(t, "doctor", "--repo", dir)
	if code != 1 || !strings.Contains(out, "beta/MEMORY.md") || !strings.Contains(out, "not in the four-section template") ||
		!strings.Contains(out, "over the soft cap") || strings.Contains(out, "alpha/MEMORY.md") {
		t.Errorf("doctor: exit %d\n%s", code, out)
	}
	// The files are committed by memd run; here by git, so that tidy works on a clean tree.
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-qm", "the memories")
	if code, out, stderr := runApp(t, "sleep", "--repo", dir, "--phase", "tidy"); code != 0 {
		t.Fatalf("sleep tidy: %d %s %s", code, out, stderr)
	}
	fixed, _ := os.ReadFile(filepath.Join(dir, "beta", "MEMORY.md"))
	if r := memorymd.InspectProject(fixed); !r.InTemplate || !strings.Contains(string(fixed), "### Unsorted: Notes") {
		t.Errorf("tidy did not repair beta/MEMORY.md: %+v\n%s", r, fixed)
	}
	if _, err := os.Stat(filepath.Join(dir, "beta", memorymd.PreMigrationName)); err != nil {
		t.Errorf("no backup: %v", err)
	}
	if code, out, _ := runApp(t, "doctor", "--repo", dir); code != 0 || strings.Contains(out, "template") {
		t.Errorf("doctor after tidy: exit %d\n%s", code, out)
	}
	for _, b := range memd.Buckets {
		if _, err := os.Stat(filepath.Join(dir, string(b))); !os.IsNotExist(err) {
			t.Errorf("sleep added %s", b)
		}
	}
	// A second init leaves the layout as it is.
	if code, _, stderr := runApp(t, "init", dir); code != 0 {
		t.Fatalf("second init: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, string(memd.BucketProjects))); !os.IsNotExist(err) {
		t.Error("second init added the PARA skeleton")
	}
}

func TestInitLayoutFlag(t *testing.T) {
	isolateHome(t)
	empty := filepath.Join(t.TempDir(), "new")
	if code, _, stderr := runApp(t, "init", "--layout", "project-memory", empty); code != 0 {
		t.Fatalf("init --layout project-memory: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(empty, string(memd.BucketAreas))); !os.IsNotExist(err) {
		t.Error("--layout project-memory added buckets")
	}
	forced := seed003Dir(t)
	if code, _, stderr := runApp(t, "init", "--layout", "para", forced); code != 0 {
		t.Fatalf("init --layout para: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(forced, memd.InboxDir, ".gitkeep")); err != nil {
		t.Errorf("--layout para on project memories: %v", err)
	}
	if code, _, stderr := runApp(t, "init", "--layout", "flat", t.TempDir()); code != exitUsage || !strings.Contains(stderr, `--layout "flat"`) {
		t.Errorf("bad layout: %d %s", code, stderr)
	}
	if code, _, stderr := runApp(t, "init", "--layout", "project-memory", "--demo", t.TempDir()); code != exitUsage || !strings.Contains(stderr, "--demo") {
		t.Errorf("--demo with project-memory: %d %s", code, stderr)
	}
}

// A new machine joining a remote of project memories takes that layout: the adopted files
// are checked out before the layout is told, so no PARA bucket is added.
func TestInitRemoteProjectMemoryLayout(t *testing.T) {
	isolateHome(t)
	tmp := t.TempDir()
	remote := filepath.Join(tmp, "remote.git")
	testutil.RunGit(t, tmp, "init", "-q", "--bare", remote)
	a := seed003Dir(t)
	if code, out, stderr := runApp(t, "init", a, "--remote", remote); code != 0 {
		t.Fatalf("init a: %d %s %s", code, out, stderr)
	}
	testutil.RunGit(t, a, "add", "-A")
	testutil.RunGit(t, a, "commit", "-qm", "the memories")
	testutil.RunGit(t, a, "push", "-q", remote, "HEAD:main")
	b := filepath.Join(tmp, "b")
	code, out, stderr := runApp(t, "init", b, "--remote", remote)
	if code != 0 || !strings.Contains(out, "layout: project-memory") {
		t.Fatalf("init b: %d %s %s", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(b, "alpha", "MEMORY.md")); err != nil {
		t.Fatalf("remote not adopted: %v", err)
	}
	for _, d := range scaffold.SkeletonDirs {
		if _, err := os.Stat(filepath.Join(b, d)); !os.IsNotExist(err) {
			t.Errorf("init b added %s", d)
		}
	}
	if st := strings.TrimSpace(testutil.RunGit(t, b, "status", "--porcelain")); st != "" {
		t.Errorf("status after init b:\n%s", st)
	}
}
