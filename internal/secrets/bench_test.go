package secrets

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system time: on a shared machine the wall time per op
// measures the neighbours, so the benchmarks also report cpu-ns/op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// tenKiB is ~10 KiB of memory prose; every dense-th line names what the generic rule's
// keywords look for (1: every line, the worst case).
func tenKiB(dense int) string { return prose(10<<10, dense) }

// prose is n bytes of memory prose with keywords every dense-th line.
func prose(n, dense int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		if i%dense == 0 {
			fmt.Fprintf(&b, "<p>Step %d: the deploy token and the api key come from the vault; rotate the secret and re-run the auth check.</p>\n", i)
			continue
		}
		fmt.Fprintf(&b, "<p>Step %d: the build runs on the small runner, then the tests, then the release notes are written.</p>\n", i)
	}
	return b.String()
}

// BenchmarkVetMemory10KiB is the scan cost a commit of a 10 KiB memory pays (docs/ARCHITECTURE.md §11
// budget: 2 ms).
func BenchmarkVetMemory10KiB(b *testing.B) {
	for _, dense := range []int{20, 1} {
		b.Run(fmt.Sprintf("keywords-every-%d-lines", dense), func(b *testing.B) { benchVetMemory(b, dense) })
	}
}

func benchVetMemory(b *testing.B, dense int) {
	g := NewGuard(b.TempDir(), "memory.jsonl", "")
	if _, err := g.Rules(); err != nil {
		b.Fatal(err)
	}
	content := []byte(tenKiB(dense))
	none := func() ([]byte, error) { return nil, nil }
	b.SetBytes(int64(len(content)))
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		if v, err := g.Vet("areas/notes.html", content, none); err != nil || v.Hold {
			b.Fatal(err, v)
		}
	}
}

// BenchmarkVetLedger10KiB: 10 KiB of new records appended to a 1 MiB ledger; only the new
// records are scanned.
func BenchmarkVetLedger10KiB(b *testing.B) {
	for _, dense := range []int{20, 1} {
		b.Run(fmt.Sprintf("keywords-every-%d-records", dense), func(b *testing.B) { benchVetLedger(b, dense) })
	}
}

func benchVetLedger(b *testing.B, dense int) {
	g := NewGuard(b.TempDir(), "memory.jsonl", "")
	if _, err := g.Rules(); err != nil {
		b.Fatal(err)
	}
	rec := func(i int) string {
		if i%dense == 0 {
			return fmt.Sprintf(`{"id":"r%d","type":"note","text":"the deploy token and the api key come from the vault, step %d"}`+"\n", i, i)
		}
		return fmt.Sprintf(`{"id":"r%d","type":"note","text":"the build runs on the small runner, then the tests, step %d"}`+"\n", i, i)
	}
	var old, add strings.Builder
	for i := 0; old.Len() < 1<<20; i++ {
		old.WriteString(rec(i))
	}
	for i := 1 << 20; add.Len() < 10<<10; i++ {
		add.WriteString(rec(i))
	}
	head := []byte(old.String())
	content := []byte(old.String() + add.String())
	b.SetBytes(int64(add.Len()))
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		if v, err := g.Vet("memory.jsonl", content, func() ([]byte, error) { return head, nil }); err != nil || len(v.Findings) > 0 {
			b.Fatal(err, v)
		}
	}
}

// BenchmarkLoadDefault is what the daemon pays once, at start: compiling gitleaks' rules.
func BenchmarkLoadDefault(b *testing.B) {
	for b.Loop() {
		if _, err := parse(defaultTOML, "default", 0); err != nil {
			b.Fatal(err)
		}
	}
}
