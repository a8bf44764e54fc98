package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/testutil"
)

// syncConfig: baseConfig with a short pull interval, so two machines meet in seconds.
const syncConfig = baseConfig + "sync: {pull_interval: 1s, timeout: 5s}\n"

const (
	projMD   = "proj/MEMORY.md"
	projHist = "proj/history.md"
)

// newMachine is a world whose repo is made by `memd init --remote bare` on an empty
// directory: it adopts the remote's project memories.
func newMachine(t *testing.T, name, bare string) *world {
	t.Helper()
	home := t.TempDir()
	w := &world{t: t, home: home, repo: filepath.Join(home, name), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, []byte(syncConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = testutil.IsolatedEnv(home, gitconfig)
	if out, code := w.memd("init", "--config", w.config, w.repo, "--remote", bare); code != 0 || !strings.Contains(out, "layout: project-memory") {
		t.Fatalf("memd init %s: exit %d\n%s", name, code, out)
	}
	return w
}

// edit changes files the way the memory-save mod does, under the writer lock (docs/FORMATS.md §5)
// so no checkout of memd's runs between the read and the write.
func (w *world) edit(change func()) {
	w.t.Helper()
	lock := w.path(".memory.lock")
	testutil.WaitFor(w.t, "the writer lock", commitTimeout, func() bool {
		f, err := os.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return false
		}
		host, _ := os.Hostname()
		fmt.Fprintf(f, "pid: %d\nhostname: %s\nacquired_at: %s\ncontext: memory-save\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
		return f.Close() == nil
	}, func() string { return "" })
	defer func() {
		if err := os.Remove(lock); err != nil {
			w.t.Fatal(err)
		}
	}()
	change()
}

// addBullet puts a bullet at the end of a section's own block, as the mod's add op does.
func (w *world) addBullet(section, bullet string) {
	w.t.Helper()
	lines := strings.Split(strings.TrimSuffix(w.read(projMD), "\n"), "\n")
	start := -1
	for i, l := range lines {
		if l == "## "+section {
			start = i
		}
	}
	if start < 0 {
		w.t.Fatalf("%s has no section %s", projMD, section)
	}
	end := len(lines)
	for i := start + 1; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "## ") || strings.HasPrefix(lines[i], "### ") {
			end = i
			break
		}
	}
	for end > start+1 && strings.TrimSpace(lines[end-1]) == "" {
		end--
	}
	lines = append(lines[:end], append([]string{bullet}, lines[end:]...)...)
	w.writeAtomic(projMD, strings.Join(lines, "\n")+"\n")
}

// appendHistory appends one entry to the topic file, a blank line before it (the mod's
// appendTopic).
func (w *world) appendHistory(line string) {
	w.t.Helper()
	w.writeAtomic(projHist, w.read(projHist)+"\n"+line+"\n")
}

func (w *world) writeAtomic(rel, content string) {
	w.t.Helper()
	tmp := w.path(rel) + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.path(rel)); err != nil {
		w.t.Fatal(err)
	}
}

// converged: both machines' HEADs are the remote's main and their trees are committed.
func converged(bare string, ws ...*world) (bool, string) {
	remote := testutil.Git{Env: ws[0].env}.Rev(bare, "main")
	for _, w := range ws {
		if h := w.head(); h != remote {
			return false, fmt.Sprintf("%s at %s, remote at %s", w.repo, h, remote)
		}
		if d, err := w.treeDiff(); err != nil || d != "" {
			return false, fmt.Sprintf("%s: work tree differs from HEAD: %v %s", w.repo, err, d)
		}
	}
	return true, ""
}

func waitConverged(t *testing.T, bare string, ds []*testutil.Daemon, ws ...*world) {
	t.Helper()
	var why string
	testutil.WaitFor(t, "both machines to converge", 30*time.Second, func() bool {
		ok, w := converged(bare, ws...)
		why = w
		return ok
	}, func() string {
		var b strings.Builder
		b.WriteString(why)
		for _, d := range ds {
			b.WriteString(d.Describe())
		}
		return b.String()
	})
}

// TestProjectMemoryTwoMachines: two machines share one project memory (seed 003) through a
// bare remote, each running `memd run`. They append to history.md and add bullets to
// different and to the same sections of MEMORY.md, first in turns, then at once (both
// daemons stopped while both write, so both commit on one base and the second to push must
// merge). After they converge there is no conflict copy, every added bullet and history line
// is there exactly once, MEMORY.md is in the template and no PARA bucket was added.
func TestProjectMemoryTwoMachines(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	bare := filepath.Join(tmp, "remote.git")
	g := testutil.Git{Env: testutil.IsolatedEnv(tmp, filepath.Join(tmp, "gitconfig"))}
	seed := filepath.Join(tmp, "seed")
	for _, args := range [][]string{{"init", "-q", "--bare", "-b", "main", bare}, {"init", "-q", "-b", "main", seed}} {
		if _, err := g.Run(tmp, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Run(bare, nil, "config", "gc.autoDetach", "false"); err != nil {
		t.Fatal(err)
	}
	md := "# proj\n\n## CRITICAL RULES\n\n- Never force-push.\n\n## Architecture & Config Facts\n\n- Go module, one binary.\n\n" +
		"## Active Warnings\n\n- None yet.\n\n## Topic Files\n\n- `history.md`.\n"
	for rel, c := range map[string]string{projMD: md, projHist: "# proj: history\n\n- the project starts\n"} {
		p := filepath.Join(seed, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := []string{"GIT_AUTHOR_NAME=seed", "GIT_AUTHOR_EMAIL=seed@x", "GIT_COMMITTER_NAME=seed", "GIT_COMMITTER_EMAIL=seed@x"}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "seed"}, {"push", "-q", bare, "main"}} {
		if _, err := g.Run(seed, id, args...); err != nil {
			t.Fatal(err)
		}
	}

	a, b := newMachine(t, "vm-a", bare), newMachine(t, "vm-b", bare)
	da, db := a.start(), b.start()
	ds := []*testutil.Daemon{da, db}
	var bullets, lines []string
	add := func(w *world, section, bullet string) {
		w.addBullet(section, bullet)
		bullets = append(bullets, bullet)
	}
	hist := func(w *world, line string) {
		w.appendHistory(line)
		lines = append(lines, line)
	}

	// In turns: each edit reaches the other machine before the next.
	a.edit(func() { add(a, "CRITICAL RULES", "- Rule from A, turn 1."); hist(a, "- A: turn 1") })
	waitConverged(t, bare, ds, a, b)
	b.edit(func() { add(b, "Active Warnings", "- Warning from B, turn 2."); hist(b, "- B: turn 2") })
	waitConverged(t, bare, ds, a, b)
	a.edit(func() { add(a, "Active Warnings", "- Warning from A, turn 3."); hist(a, "- A: turn 3") })
	waitConverged(t, bare, ds, a, b)

	// At once, twice: both write while neither daemon runs, then both run.
	for round := 1; round <= 2; round++ {
		for _, d := range ds {
			if err := d.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		a.edit(func() {
			add(a, "Architecture & Config Facts", fmt.Sprintf("- Fact from A, round %d.", round))
			add(a, "Architecture & Config Facts", fmt.Sprintf("- Second fact from A, round %d.", round))
			add(a, "Topic Files", fmt.Sprintf("- `a-%d.md`: from A.", round))
			hist(a, fmt.Sprintf("- A: at once, round %d", round))
		})
		b.edit(func() {
			add(b, "Architecture & Config Facts", fmt.Sprintf("- Fact from B, round %d.", round))
			add(b, "CRITICAL RULES", fmt.Sprintf("- Rule from B, round %d.", round))
			hist(b, fmt.Sprintf("- B: at once, round %d", round))
		})
		for _, d := range ds {
			if err := d.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		}
		waitConverged(t, bare, ds, a, b)
	}

	for _, w := range []*world{a, b} {
		got := w.read(projMD)
		if r := memorymd.InspectProject([]byte(got)); !r.InTemplate {
			t.Errorf("%s: MEMORY.md out of the template: %+v\n%s", w.repo, r, got)
		}
		for _, bl := range bullets {
			if n := strings.Count(got, bl+"\n"); n != 1 {
				t.Errorf("%s: bullet %q %d times in MEMORY.md:\n%s", w.repo, bl, n, got)
			}
		}
		h := w.read(projHist)
		for _, l := range lines {
			if n := strings.Count(h, l+"\n"); n != 1 {
				t.Errorf("%s: history line %q %d times:\n%s", w.repo, l, n, h)
			}
		}
		err := filepath.WalkDir(w.repo, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() && e.Name() == ".git" {
				return filepath.SkipDir
			}
			if strings.Contains(e.Name(), ".conflict-") {
				return fmt.Errorf("conflict copy %s", p)
			}
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", w.repo, err)
		}
		for _, bucket := range memd.Buckets {
			if _, err := os.Stat(w.path(string(bucket))); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: a PARA bucket %s appeared", w.repo, bucket)
			}
		}
	}
	// The at-once rounds merged on one machine or the other: the history has merge commits.
	if n := strings.Count(a.git("log", "--merges", "--format=%H"), "\n"); n < 2 {
		t.Errorf("%d merge commits, want one per at-once round at least", n)
	}
	// The status and metrics see the project memory: its lines, and no template warning.
	want := float64(strings.Count(a.read(projMD), "\n"))
	testutil.WaitFor(t, "memd_memory_md_lines to follow the merge", commitTimeout, func() bool {
		v, ok := da.Metric(`memd_memory_md_lines{path="proj/MEMORY.md"}`)
		return ok && v == want
	}, da.Describe)
	_, status, err := da.Get("/status.json")
	if err != nil || strings.Contains(status, "template") || strings.Contains(status, "conflict cop") {
		t.Errorf("status: %v\n%s", err, status)
	}
	for _, d := range ds {
		if code := d.Stop(); code != 0 {
			t.Errorf("SIGTERM: exit %d%s", code, d.Describe())
		}
	}
}
