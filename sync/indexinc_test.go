package sync

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	gosync "sync"
	"testing"
)

type syncBuf struct {
	mu gosync.Mutex
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
		writeFile(t, dir, fmt.Sprintf("areas/f%d.html", i), "x")
	}
	mustCommit(t, r, "areas")
	r.WaitIndexRefresh()
	for i := 0; i < 5; i++ {
		writeFile(t, dir, fmt.Sprintf("areas/f%d.html", i), strings.Repeat("y", i+1))
		mustCommit(t, r, fmt.Sprintf("areas/f%d.html", i))
		r.WaitIndexRefresh()
	}
	if out := runGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
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
	writeFile(t, dir, "areas/a.html", "a")
	runGit(t, dir, "add", "-A")
	runGit(t, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
	var logs syncBuf
	o := testOptions()
	o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := openTest(t, dir, o)
	r.testDuringRefresh = func() {
		r.testDuringRefresh = nil
		writeFile(t, dir, "areas/a.html", "during the first refresh")
		mustCommit(t, r, "areas/a.html")
	}
	if err := r.RefreshIndex(); err != nil { // the first: full
		t.Fatal(err)
	}
	r.WaitIndexRefresh() // the one the overlapping commit scheduled
	if out := runGit(t, dir, "status", "--porcelain", "-uall"); out != "" {
		t.Fatalf("status:\n%s", out)
	}
	if n := strings.Count(logs.String(), "incremental=true"); n != 1 {
		t.Fatalf("%d incremental refreshes after the overlapped one, want 1:\n%s", n, logs.String())
	}
}
