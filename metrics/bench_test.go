package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// BenchmarkScrape serves /metrics from a snapshot with n MEMORY.md series (two metrics each),
// through the real handler: gather, sort, encode. It never touches a tree, so its cost is the
// series count, not the repo size.
//
//	go test -run '^$' -bench Scrape -benchmem ./metrics/
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{10, 1000, 100000} {
		b.Run(fmt.Sprintf("memory_md=%d", n), func(b *testing.B) {
			m := metrics.New("bench")
			m.Publish(bigSnapshot(n))
			m.CommitDone("change", time.Millisecond, time.Now())
			h := metrics.NewServer("127.0.0.1:0", m, nil, nil, false).Handler()
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			b.ReportAllocs()
			b.ResetTimer()
			var size int
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
}

// BenchmarkPublish is the owner's cost to publish a status document to the hub with 100
// subscribers that never read (the drop-oldest path).
func BenchmarkPublish(b *testing.B) {
	hub := metrics.NewHub()
	for i := 0; i < 100; i++ {
		_, cancel := hub.Subscribe()
		defer cancel()
	}
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateWarn])
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		hub.Publish(d)
	}
}

// BenchmarkWriteStatus is the cost of publishing status.json and the eight line files.
func BenchmarkWriteStatus(b *testing.B) {
	dir := b.TempDir()
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateOK])
	for i := 0; i < b.N; i++ {
		if err := statusline.Write(dir, d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStatusWithEvents is what a full event ring (statusline.MaxEvents) adds to a publish:
// Compose, status.json and the line files, and the hub's encoding, against the fixture's one
// event, in the same run.
//
//	go test -run '^$' -bench StatusWithEvents -benchtime 200x ./metrics/
func BenchmarkStatusWithEvents(b *testing.B) {
	full := statuslinetest.Fixtures()[statusline.StateConflict]
	for i := len(full.Events); i < statusline.MaxEvents; i++ {
		e := full.Events[len(full.Events)-1]
		e.ID++
		full.Events = append(full.Events, e)
	}
	for _, c := range []struct {
		name string
		f    statusline.Facts
	}{{"events=1", statuslinetest.Fixtures()[statusline.StateOK]}, {fmt.Sprintf("events=%d", statusline.MaxEvents), full}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			hub := metrics.NewHub()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				d := statusline.Compose(c.f)
				if err := statusline.Write(dir, d); err != nil {
					b.Fatal(err)
				}
				hub.Publish(d)
			}
		})
	}
}
