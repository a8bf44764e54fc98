package gitrepo

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// BenchmarkCommitBigDir: one changed file in a directory of -bigdir files (the demo's
// largest folder at 100k memories holds ~24k, a 2.1 MB tree object), the hot path of
// memd run at 100k files: the tree was written by memd's previous commit.
//
//	go test -run '^$' -bench CommitBigDir -benchtime 40x ./sync/
func BenchmarkCommitBigDir(b *testing.B) {
	n := 24000
	if s := os.Getenv("MEMD_BIGDIR"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	// Its own temp dir, removed after the repo is closed (the index refresh it schedules
	// may still be writing when b's cleanups run).
	dir, err := os.MkdirTemp("", "memd-bigdir-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	testutil.RunGit(b, dir, "init", "-q", "-b", "main")
	for i := range n {
		name := fmt.Sprintf("big/2023%04d-checkout-api-latency-spike-during-the-evening-peak-%d.html", i/20, i)
		p := filepath.Join(dir, filepath.FromSlash(name))
		if i == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte("<p>"+name+"</p>\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	testutil.WriteFile(b, dir, "small/a.html", "a\n")
	testutil.RunGit(b, dir, "add", "-A")
	testutil.RunGit(b, dir, "commit", "-q", "-m", "init")
	opts := testOptions()
	if os.Getenv("MEMD_BENCH_LOG") != "" { // the commit's phases (stage, trees, fsync, ref)
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	r, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	target := filepath.Join(dir, "big", fmt.Sprintf("2023%04d-checkout-api-latency-spike-during-the-evening-peak-%d.html", (n/2)/20, n/2))
	appendTo := func(i int) {
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(f, "<!-- %d -->\n", i)
		f.Close()
	}
	appendTo(-1)
	if _, err := r.CommitPaths([]string{target}); err != nil { // warm: the tree becomes hot
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		appendTo(i)
		b.StartTimer()
		res, err := r.CommitPaths([]string{target})
		if err != nil || res.Hash == "" {
			b.Fatal(res, err)
		}
	}
	b.StopTimer()
	testutil.RunGit(b, dir, "fsck", "--no-progress")
}
