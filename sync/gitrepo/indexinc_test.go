package gitrepo

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// After the first refresh, each commit's refresh splices: it never walks HEAD's tree.
func TestIndexRefreshAfterCommitIsIncremental(t *testing.T) {
	dir := newGitDir(t)
	var logs syncBuf
	o := testOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := openTest(t, dir, o)
	for i := 0; i < 20; i++ {
		testutil.WriteFile(t, dir, fmt.Sprintf("areas/f%d.html", i), "x")
	}
	mustCommit(t, r, "areas")
	r.WaitIndexRefresh()
	for i := 0; i < 5; i++ {
		testutil.WriteFile(t, dir, fmt.Sprintf("areas/f%d.html", i), strings.Repeat("y", i+1))
		mustCommit(t, r, fmt.Sprintf("areas/f%d.html", i))
		r.WaitIndexRefresh()
	}
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("status:\n%s", out)
	}
	if n := strings.Count(logs.String(), "incremental=true"); n != 5 {
		t.Fatalf("%d incremental refreshes, want 5:\n%s", n, logs.String())
	}
}

// A refresh that a commit overlaps (at 100k files a full refresh takes longer than the gap
// between commits) leaves the next one incremental; before, every refresh stayed full.
func TestIndexRefreshOverlappedByCommitStaysIncremental(t *testing.T) {
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "areas/a.html", "a")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
	var logs syncBuf
	o := testOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := openTest(t, dir, o)
	r.testDuringRefresh = func() {
		r.testDuringRefresh = nil
		testutil.WriteFile(t, dir, "areas/a.html", "during the first refresh")
		mustCommit(t, r, "areas/a.html")
	}
	if err := r.RefreshIndex(); err != nil { // the first: full
		t.Fatal(err)
	}
	r.WaitIndexRefresh() // the one the overlapping commit scheduled
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("status:\n%s", out)
	}
	if n := strings.Count(logs.String(), "incremental=true"); n != 1 {
		t.Fatalf("%d incremental refreshes after the overlapped one, want 1:\n%s", n, logs.String())
	}
}

// A refresh whose HEAD a commit superseded before its lookups starts again from the new
// HEAD (whose trees that commit left hot) instead of splicing the old one: at 100k files the
// old head's big tree is cold, and decoding it under r.mu held up the next commit. So the
// commit that overlaps a refresh costs one index write, not two.
func TestIndexRefreshSupersededByCommitSplicesTheNewHead(t *testing.T) {
	dir := newGitDir(t)
	var logs syncBuf
	o := testOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := openTest(t, dir, o)
	for i := 0; i < 20; i++ {
		testutil.WriteFile(t, dir, fmt.Sprintf("areas/f%d.html", i), "x")
	}
	mustCommit(t, r, "areas")
	r.WaitIndexRefresh()
	before := strings.Count(logs.String(), "msg=\"index refreshed\"")
	r.testDuringRefresh = func() { // after the refresh read HEAD, before its lookups
		r.testDuringRefresh = nil
		testutil.WriteFile(t, dir, "areas/f1.html", "during the refresh")
		mustCommit(t, r, "areas/f1.html")
	}
	testutil.WriteFile(t, dir, "areas/f0.html", "first")
	mustCommit(t, r, "areas/f0.html")
	r.WaitIndexRefresh()
	if out := testutil.RunGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("status:\n%s", out)
	}
	if !strings.Contains(logs.String(), "superseded by a commit") {
		t.Fatalf("the refresh did not see HEAD move under it:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), "msg=\"index refreshed\"") - before; n != 1 {
		t.Fatalf("%d index writes for two commits overlapping one refresh, want 1 (the superseded head's spliced too?):\n%s", n, logs.String())
	}
}
