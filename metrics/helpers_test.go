package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memd-dev/memd/metrics"
)

// needTool finds an external tool, skipping the test when it is absent, unless CI is set.
func needTool(t testing.TB, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%v not installed (CI is set: install it, see configs/statusline/README.md)", names)
	}
	t.Skipf("%v not installed", names)
	return ""
}

// bigSnapshot has n MEMORY.md files and n of each count, for lint, promtool and benchmarks.
func bigSnapshot(n int) *metrics.Snapshot {
	s := &metrics.Snapshot{
		Memories: map[string]int{"projects": n, "areas": n, "resources": n, "archive": n},
		Inbox:    n, TaskInbox: n, Arcs: n,
		LedgerRecords: map[string]int{"rule": n, "lesson": n, "note": n},
		LedgerNotes:   map[metrics.NoteKey]int{{Mode: "persistent", State: "live"}: n},
		WatchedDirs:   n, Pending: 1, LastCommit: time.Unix(1764513125, 0), LastSync: time.Unix(1764513125, 0),
		WatchEvents: uint64(n), WatchRescans: 1,
	}
	for i := 0; i < n; i++ {
		s.MemoryMD = append(s.MemoryMD, metrics.MDStat{Path: fmt.Sprintf("projects/p%06d/MEMORY.md", i), Lines: 100 + i%50, Bytes: 4000 + i})
	}
	return s
}

func scrape(t testing.TB, m *metrics.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(metrics.NewServer("127.0.0.1:0", m, nil, nil, false).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func find(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return mt
		}
	}
	t.Fatalf("no %s %v", name, labels)
	return nil
}

func gaugeValue(t *testing.T, m *metrics.Metrics, name string) float64 {
	return find(t, m, name, nil).GetGauge().GetValue()
}

func histCount(t *testing.T, m *metrics.Metrics, name string) uint64 {
	return find(t, m, name, nil).GetHistogram().GetSampleCount()
}

// noteGauge wraps one memd_ledger_notes series as a collector for testutil.ToFloat64.
func noteGauge(t *testing.T, m *metrics.Metrics, mode, state string) prometheus.Collector {
	v := find(t, m, "memd_ledger_notes", map[string]string{"mode": mode, "state": state}).GetGauge().GetValue()
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x", Help: "x"}, func() float64 { return v })
}
