package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics/statusline"
)

// cutRepo is a repo with three memories committed, then what a power cut leaves of the
// two whose writer did not fsync: a.html empty, b.html its size in zero bytes, both with
// their old mtimes. c.html is a new empty file (HEAD has none), d.html was empty in HEAD.
func cutRepo(t *testing.T, unclean bool) string {
	t.Helper()
	isolateGit(t)
	dir := newRepo(t)
	testutil.WriteFile(t, dir, "areas/cut/a.html", "<p>memory a</p>\n")
	testutil.WriteFile(t, dir, "areas/cut/b.html", "<p>memory b</p>\n")
	testutil.WriteFile(t, dir, "areas/cut/d.html", "")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "memories")
	old := time.Now().Add(-time.Minute)
	for rel, data := range map[string]string{"areas/cut/a.html": "", "areas/cut/b.html": strings.Repeat("\x00", 16)} {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		must(t, os.WriteFile(p, []byte(data), 0o644))
		must(t, os.Chtimes(p, old, old))
	}
	testutil.WriteFile(t, dir, "areas/cut/c.html", "")
	doc := statusline.Compose(statusline.Facts{Now: time.Now(), Repo: dir}) // memd run's, mid-run
	if !unclean {
		doc.State = statusline.StateStopped
	}
	must(t, statusline.Write(memd.StateDir(dir), doc))
	return dir
}

func headHas(t *testing.T, dir, rel, want string) {
	t.Helper()
	out, err := hostGit.Run(dir, nil, "show", "HEAD:"+rel)
	if err != nil || out != want {
		t.Fatalf("HEAD:%s = %q (%v), want %q", rel, out, err, want)
	}
}

// After an unclean stop the files a power cut emptied are held, HEAD keeps the memories,
// everything else is committed; a write ends the hold. After a clean stop an empty file is
// a writer's edit and is committed as it is.
func TestCutEmptiedFilesHeld(t *testing.T) {
	dir := cutRepo(t, true)
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	s, err := Open(context.Background(), cfg, OpenOptions{Who: "memd sync"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CommitChanges(context.Background()); err != nil {
		t.Fatal(err)
	}
	headHas(t, dir, "areas/cut/a.html", "<p>memory a</p>\n")
	headHas(t, dir, "areas/cut/b.html", "<p>memory b</p>\n")
	headHas(t, dir, "areas/cut/c.html", "")
	if got := strings.Join(s.CutHeld(), " "); got != "areas/cut/a.html areas/cut/b.html" {
		t.Fatalf("held %q, want a.html and b.html", got)
	}
	// A second look holds them still (nothing written); a write to a.html lets it through.
	testutil.WriteFile(t, dir, "areas/cut/a.html", "<p>written again</p>\n")
	if _, err := s.CommitChanges(context.Background()); err != nil {
		t.Fatal(err)
	}
	headHas(t, dir, "areas/cut/a.html", "<p>written again</p>\n")
	headHas(t, dir, "areas/cut/b.html", "<p>memory b</p>\n")
	if got := strings.Join(s.CutHeld(), " "); got != "areas/cut/b.html" {
		t.Fatalf("held %q after a.html was written, want b.html", got)
	}
	// git's own way back: HEAD's version checked out, nothing left to hold or commit.
	testutil.RunGit(t, dir, "checkout", "--", "areas/cut/b.html")
	if _, err := s.CommitChanges(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.CutHeld(); len(got) != 0 {
		t.Fatalf("held %v after git checkout", got)
	}

	clean := cutRepo(t, false)
	cfg.Repo = clean
	s2, err := Open(context.Background(), cfg, OpenOptions{Who: "memd sync"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.CommitChanges(context.Background()); err != nil {
		t.Fatal(err)
	}
	headHas(t, clean, "areas/cut/a.html", "")
	if got := s2.CutHeld(); len(got) != 0 {
		t.Fatalf("held %v after a clean stop", got)
	}
}

// memd run after an unclean stop: the emptied memory is in the status document's held list
// (reason cut) and the gauge, with one event; the remote keeps the memory; a write to the
// file commits and pushes it and ends the hold.
func TestRunHoldsCutEmptiedFiles(t *testing.T) {
	dir := cutRepo(t, true)
	remote := filepath.Join(t.TempDir(), "r.git")
	testutil.RunGit(t, dir, "init", "-q", "--bare", "-b", "main", remote)
	testutil.RunGit(t, dir, "remote", "add", "origin", remote)
	testutil.RunGit(t, dir, "push", "-q", "origin", "main")
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(50 * time.Millisecond)
	cfg.Watch.MaxDelay = memd.Duration(500 * time.Millisecond)
	cfg.Sleep.CatchUp = false
	a, logs, stop := startAgent(t, cfg)
	defer stop()
	heldNow := func() []statusline.Held {
		doc, err := statusline.Read(memd.StateDir(dir))
		if err != nil {
			return nil
		}
		return doc.Held
	}
	testutil.WaitFor(t, "a.html and b.html held, reason cut", 20*time.Second, func() bool {
		h := heldNow()
		return len(h) == 2 && h[0].Reason == statusline.HeldCut && h[1].Reason == statusline.HeldCut
	}, logs.String)
	onRemote := func(rel string) string {
		out, _ := hostGit.Run(remote, nil, "show", "main:"+rel)
		return out
	}
	testutil.WaitFor(t, "c.html pushed", 20*time.Second, func() bool {
		a.KickSync()
		_, err := hostGit.Run(remote, nil, "cat-file", "-e", "main:areas/cut/c.html")
		return err == nil
	}, logs.String)
	if got := onRemote("areas/cut/a.html"); got != "<p>memory a</p>\n" {
		t.Fatalf("the remote's a.html is %q: the cut's empty file went out", got)
	}
	testutil.WriteFile(t, dir, "areas/cut/a.html", "<p>written again</p>\n")
	testutil.WaitFor(t, "a.html written again pushed, b.html alone held", 20*time.Second, func() bool {
		a.KickSync()
		h := heldNow()
		return onRemote("areas/cut/a.html") == "<p>written again</p>\n" && len(h) == 1 && h[0].Path == "areas/cut/b.html"
	}, logs.String)
	doc, err := statusline.Read(memd.StateDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for _, e := range doc.Events {
		if strings.Contains(e.Text, "emptied by a power cut") {
			events++
		}
	}
	if events != 2 {
		t.Fatalf("%d held events for the cut, want one per file (2): %+v", events, doc.Events)
	}
	if err := promtest.GatherAndCompare(a.metrics.Registry(), strings.NewReader(`
# HELP memd_held_files Files memd holds back from commits now, by reason (secret, size, hook, filter, cut).
# TYPE memd_held_files gauge
memd_held_files{reason="cut"} 1
memd_held_files{reason="filter"} 0
memd_held_files{reason="hook"} 0
memd_held_files{reason="secret"} 0
memd_held_files{reason="size"} 0
`), "memd_held_files"); err != nil {
		t.Error(err)
	}
}
