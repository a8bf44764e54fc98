package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/demo"
	"github.com/memd-dev/memd/metrics"
)

// BenchmarkScrapeByRepoSize is the target: a /metrics scrape at 100k files costs
// what it costs at 1k (the snapshot is counts, not files). The inventory is built from real
// demo repos; only the scrape is timed. 100k needs MEMD_LONG=1 (generating it takes ~30 s).
func BenchmarkScrapeByRepoSize(b *testing.B) {
	sizes := []int{1000, 10000}
	if os.Getenv("MEMD_LONG") != "" {
		sizes = append(sizes, 100000)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, n := range sizes {
		root := b.TempDir()
		if _, err := demo.Generate(root, demo.Options{Memories: n, Now: now, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		cfg := memd.DefaultConfig()
		cfg.Repo = root
		inv := newInventory(cfg)
		inv.scan(root, nil)
		snap := inv.snapshot(now).Snapshot
		m := metrics.New("bench")
		m.Publish(&snap)
		h := metrics.NewServer("127.0.0.1:0", m, nil, nil, false).Handler()
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("scrape: %d", rec.Code)
				}
			}
		})
	}
}
