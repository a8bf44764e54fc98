package secrets

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/sync/gitrepo"
)

// BenchmarkCommitGuarded is the daemon's commit of one changed memory in a big repo with
// the secret scan and without, interleaved (each iteration one of each), on the repo at
// MEMD_BENCH_REPO (e.g. bench/daemon's 100k demo; it commits there). It reports both
// medians and their ratio (docs/ARCHITECTURE.md §11 target: the 100k commit figure within 1.1x), in wall
// time and in the committing thread's CPU time (on a shared machine the wall time of the
// scan's CPU work is multiplied by the load, the commit's fsyncs are not).
func BenchmarkCommitGuarded(b *testing.B) {
	dir := os.Getenv("MEMD_BENCH_REPO")
	if dir == "" {
		b.Skip("MEMD_BENCH_REPO names the repo to commit in")
	}
	r, err := gitrepo.Open(dir, gitrepo.Options{Author: gitrepo.Author{Name: "bench", Email: "bench@x"}})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	g := NewGuard(dir, "memory.jsonl", "")
	if _, err := g.Rules(); err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "areas", "*", "*.html"))
	if len(files) == 0 {
		b.Fatal("no memories under areas/")
	}
	runtime.LockOSThread() // RUSAGE_THREAD is this goroutine's CPU
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(1, &ru) // RUSAGE_THREAD
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	var with, without, withCPU, withoutCPU []time.Duration
	commit := func(i int, guard bool) {
		if guard {
			r.SetGuard(g)
		} else {
			r.SetGuard(nil)
		}
		f := files[i%len(files)]
		old, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(f, append(old, fmt.Sprintf("<p>edit %d %v</p>\n", i, guard)...), 0o644); err != nil {
			b.Fatal(err)
		}
		t0, c0 := time.Now(), threadCPU()
		res, err := r.CommitPaths([]string{f})
		d, c := time.Since(t0), threadCPU()-c0
		if err != nil || res.Hash == "" {
			b.Fatal(err, res)
		}
		if guard {
			with, withCPU = append(with, d), append(withCPU, c)
		} else {
			without, withoutCPU = append(without, d), append(withoutCPU, c)
		}
	}
	for i := 0; b.Loop(); i++ {
		commit(2*i, i%2 == 0)
		commit(2*i+1, i%2 != 0)
	}
	med := func(ds []time.Duration) float64 {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(with), "guard-ms")
	b.ReportMetric(med(without), "none-ms")
	b.ReportMetric(med(with)/med(without), "ratio")
	b.ReportMetric(med(withCPU), "guard-cpu-ms")
	b.ReportMetric(med(withoutCPU), "none-cpu-ms")
	b.ReportMetric(med(withCPU)/med(withoutCPU), "cpu-ratio")
}
