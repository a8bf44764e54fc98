package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGlobalExcludesNeverCommitted: git's default core.excludesFile
// ($XDG_CONFIG_HOME/git/ignore) with .DS_Store and *.orig. Files matching it, written
// before memd starts (the reconcile) and while it runs (the watcher), are never committed;
// a tracked *.orig stays tracked; the user's `git status` in the same HOME shows nothing.
func TestGlobalExcludesNeverCommitted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	excl := filepath.Join(w.home, ".config", "git", "ignore")
	must(t, os.MkdirAll(filepath.Dir(excl), 0o755))
	must(t, os.WriteFile(excl, []byte(".DS_Store\n*.orig\n"), 0o644))
	w.write("areas/kept.orig", "tracked before\n")
	w.git("add", "-f", "areas/kept.orig")
	w.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a tracked .orig")
	w.write(".DS_Store", "finder\n")
	w.write("areas/before.html.orig", "offline\n")
	d := w.start()
	w.write("areas/.DS_Store", "finder\n")
	w.write("projects/p/.DS_Store", "finder\n")
	w.write("projects/p/a.html", "a\n")
	w.write("projects/p/a.html.orig", "merge leftover\n")
	w.write("areas/kept.orig", "tracked after\n")
	w.checkClean(d)
	if got, _ := w.committed("projects/p/a.html"); got != "a\n" {
		t.Fatalf("HEAD:projects/p/a.html = %q", got)
	}
	if got, _ := w.committed("areas/kept.orig"); got != "tracked after\n" {
		t.Fatalf("a tracked path stays tracked: HEAD:areas/kept.orig = %q", got)
	}
	for _, p := range []string{".DS_Store", "areas/.DS_Store", "projects/p/.DS_Store", "areas/before.html.orig", "projects/p/a.html.orig"} {
		w.neverCommitted(p)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}
}
