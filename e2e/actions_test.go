package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestResolveAndRestoreBesideRunningDaemon: with `memd run` up, `memd conflicts --json` lists
// a conflict copy with git's blob ids, `memd resolve --keep ours` ends it as one commit with
// the resolve trailer and the daemon's document shows the event and no conflict; `memd
// restore` brings a deleted memory back as a new commit. The daemon commits nothing twice and
// the tree ends clean.
func TestResolveAndRestoreBesideRunningDaemon(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	d := w.start()
	w.write("areas/n/x.html", "<p>theirs</p>\n")
	w.write("areas/n/x.conflict-laptop-20261130T143135Z.html", "<p>ours</p>\n")
	w.waitCommitted(d)

	out, code := w.memd("conflicts", "--json", "--config", w.config, "--repo", w.repo)
	var list []struct{ Path, Copy, Machine, Ours, Theirs string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("memd conflicts --json (exit %d):\n%s", code, out)
	}
	if ours := strings.TrimSpace(w.git("rev-parse", "HEAD:areas/n/x.conflict-laptop-20261130T143135Z.html")); ours != list[0].Ours || list[0].Machine != "laptop" {
		t.Errorf("conflict %+v, git has %s", list[0], ours)
	}
	last := uint64(0)
	if evs := w.events(); len(evs) > 0 {
		last = evs[len(evs)-1].ID
	}
	before := w.head()
	if out, code := w.memd("resolve", "areas/n/x.html", "--keep", "ours", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd resolve (exit %d):\n%s", code, out)
	}
	if got := w.git("show", "HEAD:areas/n/x.html"); got != "<p>ours</p>\n" {
		t.Errorf("HEAD:areas/n/x.html = %q", got)
	}
	if msg := w.git("log", "-1", "--format=%B", "HEAD"); !strings.Contains(msg, "Memd-Action: resolve") || w.git("rev-parse", "HEAD^") != w.git("rev-parse", before) {
		t.Errorf("resolve is not one commit on %s with its trailer:\n%s", before, msg)
	}
	w.waitEvent(d, "resolved areas/n/x.html", last)
	testutil.WaitFor(t, "the document to list no conflict", commitTimeout, func() bool {
		out, _ := w.memd("status", "--config", w.config, "--repo", w.repo, "--format", "json")
		return strings.Contains(out, `"conflicts":[]`)
	}, d.Describe)

	w.sh("rm " + w.path("areas/n/x.html"))
	w.waitCommitted(d)
	if out, code := w.memd("restore", "areas/n/x.html", "--config", w.config, "--repo", w.repo); code != 0 {
		t.Fatalf("memd restore (exit %d):\n%s", code, out)
	}
	if got := w.git("show", "HEAD:areas/n/x.html"); got != "<p>ours</p>\n" {
		t.Errorf("restored HEAD:areas/n/x.html = %q", got)
	}
	out, code = w.memd("log", "--json", "areas/n/x.html", "--config", w.config, "--repo", w.repo)
	var log []struct{ Action, By string }
	if code != 0 || json.Unmarshal([]byte(out), &log) != nil || len(log) < 3 || log[0].By != "restore" || log[1].Action != "deleted" {
		t.Errorf("memd log --json (exit %d):\n%s", code, out)
	}
	w.checkClean(d)
}
