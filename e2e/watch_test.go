package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// One `memd run` watches one repo while scenarios change it the way writers, editors and
// shells do. After each scenario HEAD must equal the disk, `git status` must be empty and
// `git fsck --full` clean.
func TestWatchAndCommit(t *testing.T) {
	w := newWorld(t)
	d := w.start()
	// The scenarios share the daemon and run in order; each points the world's helpers at
	// its own *testing.T (w.t = t) so a failure is reported where it happened.

	t.Run("nested mkdir", func(t *testing.T) {
		w.t = t
		w.sh("mkdir -p a/b/c && echo x > a/b/c/m.html")
		w.checkClean(d)
		if got, ok := w.committed("a/b/c/m.html"); !ok || got != "x\n" {
			t.Fatalf("HEAD:a/b/c/m.html = %q, %v", got, ok)
		}
		host, _ := os.Hostname()
		if msg := w.git("log", "-1", "--format=%B"); msg != "memd: +1 ~0 -0\n\nA a/b/c/m.html\n\nMemd-Host: "+host+"\n\n" {
			t.Fatalf("commit message %q", msg)
		}
		// No identity in any git config here: memd signs as itself.
		if who := strings.TrimSpace(w.git("log", "-1", "--format=%an <%ae>")); who != "memd <memd@"+host+">" {
			t.Fatalf("author %q, want memd <memd@%s>", who, host)
		}
	})

	t.Run("spaces and non-ASCII names", func(t *testing.T) {
		w.t = t
		names := []string{
			"areas/notes with spaces/a memory.html",
			"resources/people/José Ñúñez.html",
			"projects/日本語/メモ.html",
			"areas/inbox/tab\tand 'quote\".html",
		}
		for i, n := range names {
			w.write(n, fmt.Sprintf("<p>%d %s</p>\n", i, n))
		}
		w.checkClean(d)
		for _, n := range names {
			if got, ok := w.committed(n); !ok || got != w.read(n) {
				t.Fatalf("HEAD:%q = %q, %v; disk %q", n, got, ok, w.read(n))
			}
		}
	})

	t.Run("directory rename", func(t *testing.T) {
		w.t = t
		for i := range 5 {
			w.write(fmt.Sprintf("projects/old/sub/f%d.html", i), fmt.Sprintf("f%d\n", i))
		}
		w.checkClean(d)
		w.sh("mv projects/old projects/new")
		w.checkClean(d)
		if subj := strings.TrimSpace(w.git("log", "-1", "--format=%s")); subj != "memd: +5 ~0 -5" {
			t.Fatalf("rename commit %q, want one commit memd: +5 ~0 -5", subj)
		}
		for i := range 5 {
			if _, ok := w.committed(fmt.Sprintf("projects/old/sub/f%d.html", i)); ok {
				t.Fatalf("old path f%d still in HEAD", i)
			}
			if got, ok := w.committed(fmt.Sprintf("projects/new/sub/f%d.html", i)); !ok || got != fmt.Sprintf("f%d\n", i) {
				t.Fatalf("HEAD:projects/new/sub/f%d.html = %q, %v", i, got, ok)
			}
		}
		// A file written into the renamed directory is seen: its watch moved with it.
		w.write("projects/new/sub/later.html", "later\n")
		w.checkClean(d)
	})

	t.Run("directory moved out of and into the repo", func(t *testing.T) {
		w.t = t
		w.write("projects/leaving/a.html", "a\n")
		w.write("projects/leaving/deep/b.html", "b\n")
		w.checkClean(d)
		outside := filepath.Join(w.home, "moved-out")
		must(t, os.Rename(w.path("projects/leaving"), outside))
		w.checkClean(d)
		if _, ok := w.committed("projects/leaving/deep/b.html"); ok {
			t.Fatal("a directory moved out of the repo is still in HEAD")
		}
		// Changes outside the repo are not watched any more; moved back, it is all there.
		must(t, os.WriteFile(filepath.Join(outside, "deep", "b.html"), []byte("b changed outside\n"), 0o644))
		must(t, os.Rename(outside, w.path("areas/returned")))
		w.checkClean(d)
		if got, _ := w.committed("areas/returned/deep/b.html"); got != "b changed outside\n" {
			t.Fatalf("HEAD:areas/returned/deep/b.html = %q", got)
		}
	})

	t.Run("atomic save", func(t *testing.T) {
		w.t = t
		w.write("areas/atomic.html", "v1\n")
		w.checkClean(d)
		// Write a temp file beside the target, then rename it over the target: the way
		// most agents and editors save. Two temp names: one memd ignores (*.tmp), one it
		// cannot know about.
		for i, tmp := range []string{"areas/.atomic.html.tmp", "areas/.atomic.html.x7Qz"} {
			if err := os.WriteFile(w.path(tmp), fmt.Appendf(nil, "v%d\n", i+2), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(w.path(tmp), w.path("areas/atomic.html")); err != nil {
				t.Fatal(err)
			}
			w.checkClean(d)
			if got, _ := w.committed("areas/atomic.html"); got != fmt.Sprintf("v%d\n", i+2) {
				t.Fatalf("HEAD:areas/atomic.html = %q", got)
			}
			w.neverCommitted(tmp)
		}
	})

	t.Run("vim-style backup save", func(t *testing.T) {
		w.t = t
		w.write("areas/vim.html", "old\n")
		w.checkClean(d)
		// What vim does with backupcopy=no: a swap file while editing, a 4913 probe, the
		// original renamed to a backup, a fresh file written, the backup removed.
		f := w.path("areas/vim.html")
		must(t, os.WriteFile(w.path("areas/.vim.html.swp"), []byte("swap"), 0o644))
		must(t, os.WriteFile(w.path("areas/4913"), nil, 0o644))
		must(t, os.Remove(w.path("areas/4913")))
		must(t, os.Rename(f, f+"~"))
		must(t, os.WriteFile(f, []byte("new\n"), 0o644))
		must(t, os.Remove(f+"~"))
		must(t, os.Remove(w.path("areas/.vim.html.swp")))
		w.checkClean(d)
		if got, _ := w.committed("areas/vim.html"); got != "new\n" {
			t.Fatalf("HEAD:areas/vim.html = %q", got)
		}
		for _, p := range []string{"areas/vim.html~", "areas/4913", "areas/.vim.html.swp"} {
			w.neverCommitted(p)
		}
		// The file never went missing from a commit on the way.
		if out := strings.TrimSpace(w.git("log", "--format=%H", "--diff-filter=D", "--", "areas/vim.html")); out != "" {
			t.Fatalf("a commit deleted areas/vim.html mid-save: %s", out)
		}
	})

	t.Run("vim swap file left while editing is never committed", func(t *testing.T) {
		w.t = t
		must(t, os.WriteFile(w.path("areas/.open.html.swp"), []byte("swap"), 0o644))
		w.write("areas/open.html", "editing\n")
		// treeDiff would list the swap file as untracked; wait on the real file instead.
		testutil.WaitFor(t, "areas/open.html committed", commitTimeout, func() bool {
			got, ok := w.committed("areas/open.html")
			return ok && got == "editing\n"
		}, d.Describe)
		must(t, os.Remove(w.path("areas/.open.html.swp")))
		w.checkClean(d)
		w.neverCommitted("areas/.open.html.swp")
	})

	t.Run("delete", func(t *testing.T) {
		w.t = t
		w.write("areas/gone.html", "bye\n")
		w.write("areas/gone-dir/x/y.html", "y\n")
		w.write("areas/gone-dir/z.html", "z\n")
		w.checkClean(d)
		must(t, os.Remove(w.path("areas/gone.html")))
		must(t, os.RemoveAll(w.path("areas/gone-dir")))
		w.checkClean(d)
		for _, p := range []string{"areas/gone.html", "areas/gone-dir/x/y.html", "areas/gone-dir/z.html"} {
			if _, ok := w.committed(p); ok {
				t.Fatalf("%s still in HEAD after delete", p)
			}
		}
	})

	t.Run("touch without change makes no commit", func(t *testing.T) {
		w.t = t
		w.write("areas/still.html", "same\n")
		w.checkClean(d)
		before := w.commitCount()
		future := time.Now().Add(time.Hour)
		must(t, os.Chtimes(w.path("areas/still.html"), future, future))
		w.write("areas/still.html", "same\n") // rewritten with the same bytes
		w.sh("touch areas/still.html")
		// A later real change is the marker that memd has handled the touches: the events
		// arrive in order, so once the marker is committed the touches were seen.
		w.write("areas/marker.html", "marker\n")
		w.checkClean(d)
		after := w.commitCount()
		if after != before+1 {
			t.Fatalf("commits %d → %d: want exactly one (the marker)", before, after)
		}
		if names := w.namesInCommit("HEAD"); !slices.Equal(names, []string{"areas/marker.html"}) {
			t.Fatalf("HEAD changed %q, want only the marker", names)
		}
	})

	t.Run("symlinks committed as links", func(t *testing.T) {
		w.t = t
		w.write("resources/target.html", "target\n")
		must(t, os.MkdirAll(w.path("resources/dir-target"), 0o755))
		w.write("resources/dir-target/inside.html", "inside\n")
		must(t, os.Symlink("target.html", w.path("resources/link.html")))
		must(t, os.Symlink("dir-target", w.path("resources/dir-link")))
		must(t, os.Symlink("/nonexistent/dangling.html", w.path("resources/dangling.html")))
		w.checkClean(d)
		for link, target := range map[string]string{
			"resources/link.html":     "target.html",
			"resources/dir-link":      "dir-target",
			"resources/dangling.html": "/nonexistent/dangling.html",
		} {
			out := w.git("ls-tree", "HEAD", "--", link)
			if !strings.HasPrefix(out, "120000 blob ") {
				t.Fatalf("%s in HEAD: %q, want a symlink (mode 120000)", link, out)
			}
			if got, _ := w.committed(link); got != target {
				t.Fatalf("link %s → %q, want %q", link, got, target)
			}
		}
		// Never followed: nothing is committed under the directory link.
		if out := w.git("ls-tree", "-r", "--name-only", "HEAD", "--", "resources/dir-link/"); strings.TrimSpace(out) != "" {
			t.Fatalf("followed a directory symlink: %q", out)
		}
		// Retargeting a link is a change of the link, not of its target.
		must(t, os.Remove(w.path("resources/link.html")))
		must(t, os.Symlink("dir-target/inside.html", w.path("resources/link.html")))
		w.checkClean(d)
		if got, _ := w.committed("resources/link.html"); got != "dir-target/inside.html" {
			t.Fatalf("retargeted link → %q", got)
		}
	})

	t.Run("2000 files in one burst", func(t *testing.T) {
		w.t = t
		before := w.commitCount()
		for i := range 2000 {
			p := w.path(fmt.Sprintf("resources/burst/d%02d/m%04d.html", i%40, i))
			if i < 40 {
				must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			}
			must(t, os.WriteFile(p, fmt.Appendf(nil, "<p>burst %d</p>\n", i), 0o644))
		}
		w.checkClean(d)
		n, err := w.gitRun(nil, "ls-tree", "-r", "--name-only", "HEAD", "--", "resources/burst/")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(n, "\n"); got != 2000 {
			t.Fatalf("HEAD has %d burst files, want 2000", got)
		}
		commits := w.commitCount() - before
		// One commit for a burst that fits in max_delay; a slow disk may split it, but
		// never into one commit per file.
		if commits < 1 || commits > 5 {
			t.Fatalf("burst of 2000 files made %d commits, want 1..5", commits)
		}
		t.Logf("2000-file burst: %d commit(s)", commits)
	})

	t.Run("continuous edits longer than max_delay", func(t *testing.T) {
		w.t = t
		w.write("areas/busy.html", "0\n")
		w.checkClean(d)
		start := w.head()
		// Edit every 50 ms (well inside the 200 ms quiet window) for up to 3x max_delay.
		// The quiet window never closes, so only max_delay can bring a commit: it must
		// appear while the edits go on.
		deadline := time.Now().Add(6 * time.Second)
		sawCommit := false
		i := 0
		for time.Now().Before(deadline) {
			i++
			w.write("areas/busy.html", fmt.Sprintf("%d\n", i))
			time.Sleep(50 * time.Millisecond) // the writer's pace, not a wait for memd
			if h := w.head(); h != start {
				sawCommit = true
				break
			}
		}
		if !sawCommit {
			t.Fatalf("no commit during %d edits over 6s with max_delay 2s%s", i, d.Describe())
		}
		// Keep editing a little after the first commit so the final state comes later.
		for j := 0; j < 5; j++ {
			i++
			w.write("areas/busy.html", fmt.Sprintf("%d\n", i))
			time.Sleep(50 * time.Millisecond)
		}
		w.checkClean(d)
		if got, _ := w.committed("areas/busy.html"); got != fmt.Sprintf("%d\n", i) {
			t.Fatalf("HEAD:areas/busy.html = %q, want the last edit %d", got, i)
		}
	})

	w.t = t
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}
	w.checkClean(d)
	// Every commit memd made says what it changed the documented way.
	for _, subj := range strings.Split(strings.TrimSpace(w.git("log", "--format=%s")), "\n") {
		if !strings.HasPrefix(subj, "memd: ") {
			t.Fatalf("commit subject %q does not start with \"memd: \"", subj)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
