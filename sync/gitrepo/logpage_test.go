package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// The page's history, asked for 3 entries at a time with at most 4 commits a request, is
// Log's answer in order; --at a commit between two renames reads the name it had there;
// restore finds the last deletion and stops there.
func TestLogPageAndVersionAt(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	var ids []string
	commit := func(msg string) {
		testutil.RunGit(t, dir, "add", "-A")
		testutil.RunGit(t, dir, "commit", "-qm", msg)
		ids = append(ids, strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD")))
	}
	testutil.WriteFile(t, dir, "areas/a.html", "v0\n")
	commit("add")
	for i := 1; i <= 4; i++ {
		testutil.WriteFile(t, dir, "areas/a.html", fmt.Sprintf("v%d\n", i))
		testutil.WriteFile(t, dir, "areas/other.html", fmt.Sprintf("o%d\n", i))
		commit("edit")
		testutil.WriteFile(t, dir, "areas/other.html", fmt.Sprintf("o%d'\n", i))
		commit("other")
	}
	testutil.RunGit(t, dir, "mv", "areas/a.html", "areas/b.html")
	commit("rename")
	testutil.WriteFile(t, dir, "areas/b.html", "v5\n")
	commit("edit b")
	os.Remove(filepath.Join(dir, "areas/b.html"))
	commit("delete b")

	all, err := r.History().Log("areas/b.html")
	if err != nil {
		t.Fatal(err)
	}
	var paged []LogEntry
	from := ""
	for req := 0; ; req++ {
		pg, err := r.History().LogPage("areas/b.html", from, 3, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(pg.Entries) > 3 || pg.Walked > 4 {
			t.Fatalf("page %d: %d entries over %d commits", req, len(pg.Entries), pg.Walked)
		}
		paged = append(paged, pg.Entries...)
		if from = pg.Next; from == "" {
			break
		}
	}
	if !reflect.DeepEqual(paged, all) || len(all) != 8 {
		t.Fatalf("pages:\n%+v\nLog:\n%+v", paged, all)
	}
	if _, err := r.History().LogPage("areas/b.html", "nonsense", 3, 4, 0); !errors.Is(err, ErrBadCursor) {
		t.Errorf("a made-up cursor: %v", err)
	}

	// ids[4] is the fourth commit, before the rename: the memory was areas/a.html then.
	v, err := r.History().VersionAt("areas/b.html", ids[4][:10])
	if err != nil || v.Path != "areas/a.html" || string(v.Data) != "v2\n" {
		t.Fatalf("VersionAt = %q %q %v", v.Path, v.Data, err)
	}
	target, v, err := r.History().PlanRestore("areas/b.html", "")
	if err != nil || target != "areas/b.html" || string(v.Data) != "v5\n" || v.Commit != ids[len(ids)-2] {
		t.Fatalf("PlanRestore = %q %q %s %v", target, v.Data, v.Commit, err)
	}
	if _, err := r.History().VersionAt("areas/b.html", strings.Repeat("ab", 20)); !errors.Is(err, ErrBadAt) {
		t.Errorf("--at a commit that is not there: %v", err)
	}
}

// A history walk runs beside the owner's commits (the page's history off the owner
// goroutine): neither waits for the other, and each walk sees a whole history, the newest
// entry of a head it read. Run under -race.
func TestLogWalkBesideCommits(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	testutil.WriteFile(t, dir, "areas/a.html", "v0\n")
	mustCommit(t, r, "areas/a.html")
	stop := make(chan struct{})
	done := make(chan error, 1)
	var walks atomic.Int64
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			log, err := r.History().Log("areas/a.html")
			if err != nil || len(log) == 0 || log[len(log)-1].Action != ActAdded {
				done <- fmt.Errorf("walk %d: %d entries, %v", walks.Load(), len(log), err)
				return
			}
			walks.Add(1)
		}
	}()
	for i := 1; i <= 30; i++ {
		testutil.WriteFile(t, dir, "areas/a.html", fmt.Sprintf("v%d\n", i))
		mustCommit(t, r, "areas/a.html")
		if i == 15 { // the walks run between the commits, not only before or after them
			testutil.WaitFor(t, "a walk", 30*time.Second, func() bool { return walks.Load() > 0 }, func() string { return "" })
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if log, err := r.History().Log("areas/a.html"); err != nil || len(log) != 31 {
		t.Fatalf("after the commits: %d entries, %v", len(log), err)
	}
}
