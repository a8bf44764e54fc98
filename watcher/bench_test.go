package watcher_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/watcher"
)

// benchRepo is a committed repo of base files, the data both sides of a comparison see.
func benchRepo(b *testing.B, dirs, perDir int) string {
	b.Helper()
	root := newRepo(b)
	for d := 0; d < dirs; d++ {
		for f := 0; f < perDir; f++ {
			testutil.WriteFile(b, root, fmt.Sprintf("areas/d%03d/%04d-note.html", d, f), "<html>base</html>")
		}
	}
	testutil.WriteFile(b, root, ".gitignore", "*.log\nbuild/\n")
	testutil.RunGit(b, root, "add", "-A")
	testutil.RunGit(b, root, "commit", "-q", "-m", "base")
	return root
}

const burst = 1000

func writeBurst(b *testing.B, root string, i int) (dir string) {
	dir = fmt.Sprintf("resources/burst%04d", i)
	for f := 0; f < burst; f++ {
		testutil.WriteFile(b, root, fmt.Sprintf("%s/%04d.html", dir, f), "new")
	}
	return dir
}

// BenchmarkDetectBurst: once 1000 new files are written (untimed), the time until every
// dirty path is known, on a 5,000-file committed repo. "watcher" waits for its batches
// (the 10ms quiet included; it handled the events while the files were written);
// "git-status" runs `git status --porcelain -uall`, the way a poller would. Compare the
// two ns/op of the same run.
func BenchmarkDetectBurst(b *testing.B) {
	root := benchRepo(b, 100, 50)
	b.Run("watcher", func(b *testing.B) {
		w, err := watcher.New(root, watcher.Options{Quiet: 10 * time.Millisecond, MaxDelay: time.Second})
		if err != nil {
			b.Fatal(err)
		}
		ch := runBench(b, w)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := writeBurst(b, root, i)
			b.StartTimer()
			seen := 0
			for seen < burst {
				bt := <-ch
				for _, p := range bt.Paths {
					if strings.HasPrefix(p, dir+"/") {
						seen++
					}
				}
			}
			b.StopTimer()
			os.RemoveAll(filepath.Join(root, dir))
			for drained := false; !drained; {
				bt := <-ch
				for _, p := range bt.Paths {
					drained = drained || p == dir
				}
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/file")
	})
	b.Run("git-status", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := writeBurst(b, root, i)
			b.StartTimer()
			cmd := exec.Command("git", "status", "--porcelain", "-uall")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
			out, err := cmd.Output()
			if err != nil {
				b.Fatal(err)
			}
			if n := strings.Count(string(out), "\n"); n != burst {
				b.Fatalf("git status listed %d paths, want %d", n, burst)
			}
			b.StopTimer()
			os.RemoveAll(filepath.Join(root, dir))
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/file")
	})
}

// BenchmarkNewWatch: setting up the watches of a 5,000-file, 100-directory repo, against
// one `git status` of the same repo (what a reconcile costs with git installed).
func BenchmarkNewWatch(b *testing.B) {
	root := benchRepo(b, 100, 50)
	b.Run("watcher.New", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			w, err := watcher.New(root, watcher.Options{})
			if err != nil {
				b.Fatal(err)
			}
			w.Close()
		}
	})
	b.Run("git-status", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cmd := exec.Command("git", "status", "--porcelain")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null")
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func runBench(b *testing.B, w *watcher.Watcher) <-chan watcher.Batch {
	ctx, cancel := contextWithCancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		for range w.Batches() {
		}
		<-done
	})
	return w.Batches()
}
