package metrics_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics"
)

// every metric of docs/ARCHITECTURE.md §6 with its type.
var designMetrics = map[string]string{
	"memd_build_info": "gauge", "memd_memories": "gauge", "memd_inbox_memories": "gauge",
	"memd_task_inbox_memories": "gauge", "memd_arcs": "gauge", "memd_invalid_memories": "gauge",
	"memd_ledger_records": "gauge", "memd_ledger_notes": "gauge", "memd_memory_md_lines": "gauge",
	"memd_memory_md_bytes": "gauge", "memd_watched_dirs": "gauge", "memd_pending_changes": "gauge",
	"memd_watch_events_total": "counter", "memd_watch_rescans_total": "counter", "memd_commits_total": "counter",
	"memd_commit_duration_seconds": "histogram", "memd_last_commit_timestamp_seconds": "gauge",
	"memd_syncs_total": "counter", "memd_sync_failures_total": "counter",
	"memd_last_successful_sync_timestamp_seconds": "gauge", "memd_commits_ahead": "gauge",
	"memd_commits_behind": "gauge", "memd_conflicts_total": "counter", "memd_sleep_runs_total": "counter",
	"memd_sleep_failures_total": "counter", "memd_sleep_duration_seconds": "histogram",
	"memd_sleep_last_success_timestamp_seconds": "gauge", "memd_archived_total": "counter",
	"memd_arcs_written_total": "counter", "memd_notes_drained_total": "counter",
	"memd_hook_runs_total": "counter",
}

func TestAllMetricsPresentBeforeFirstEvent(t *testing.T) {
	m := metrics.New("v1.2.3")
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, mf := range mfs {
		seen[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	for name, typ := range designMetrics {
		if name == "memd_memory_md_lines" || name == "memd_memory_md_bytes" {
			continue // one series per MEMORY.md file: none before the first snapshot
		}
		if seen[name] != typ {
			t.Errorf("%s: type %q, want %q", name, seen[name], typ)
		}
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total"} {
		if seen[name] == "" {
			t.Errorf("missing %s", name)
		}
	}
	// Known label values are there at 0.
	want := `
# HELP memd_commits_total Commits memd made, by kind.
# TYPE memd_commits_total counter
memd_commits_total{kind="change"} 0
memd_commits_total{kind="merge"} 0
memd_commits_total{kind="sleep"} 0
# HELP memd_memories Memory files, by PARA bucket.
# TYPE memd_memories gauge
memd_memories{bucket="archive"} 0
memd_memories{bucket="areas"} 0
memd_memories{bucket="projects"} 0
memd_memories{bucket="resources"} 0
# HELP memd_notes_drained_total Ledger notes drained, by lifecycle mode.
# TYPE memd_notes_drained_total counter
memd_notes_drained_total{mode="hard-expiry"} 0
memd_notes_drained_total{mode="persistent"} 0
memd_notes_drained_total{mode="read-count"} 0
memd_notes_drained_total{mode="soft-expiry"} 0
# HELP memd_sleep_last_success_timestamp_seconds Unix time of each sleep phase's last successful run; 0 before the first.
# TYPE memd_sleep_last_success_timestamp_seconds gauge
memd_sleep_last_success_timestamp_seconds{phase="arcs"} 0
memd_sleep_last_success_timestamp_seconds{phase="archive"} 0
memd_sleep_last_success_timestamp_seconds{phase="expire"} 0
memd_sleep_last_success_timestamp_seconds{phase="tidy"} 0
# HELP memd_sleep_runs_total Sleep phase runs, by phase.
# TYPE memd_sleep_runs_total counter
memd_sleep_runs_total{phase="arcs"} 0
memd_sleep_runs_total{phase="archive"} 0
memd_sleep_runs_total{phase="expire"} 0
memd_sleep_runs_total{phase="tidy"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"memd_commits_total", "memd_memories", "memd_notes_drained_total", "memd_sleep_last_success_timestamp_seconds", "memd_sleep_runs_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), "memd_ledger_notes"); n != 12 {
		t.Errorf("memd_ledger_notes series = %d, want 4 modes x 3 states", n)
	}
	if n := testutil.CollectAndCount(m.Registry(), "memd_build_info"); n != 1 {
		t.Errorf("build info series %d", n)
	}
}

func TestAllMetricsPresentAfterSnapshot(t *testing.T) {
	m := metrics.New("dev")
	m.Publish(bigSnapshot(2))
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, mf := range mfs {
		seen[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}
	for name, typ := range designMetrics {
		if seen[name] != typ {
			t.Errorf("%s: type %q, want %q", name, seen[name], typ)
		}
	}
}

func TestGatherAndLint(t *testing.T) {
	m := metrics.New("dev")
	m.Publish(bigSnapshot(3))
	m.CommitDone("change", 30*time.Millisecond, time.Unix(1700000000, 0))
	m.SleepPhase("arcs", time.Second, nil, time.Unix(1700000000, 0))
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestValuesAfterEvents(t *testing.T) {
	m := metrics.New("dev")
	at := time.Unix(1764513125, 0) // 2025-11-30T14:32:05Z
	m.CommitDone("change", 20*time.Millisecond, at)
	m.CommitDone("change", 40*time.Millisecond, at.Add(-time.Hour)) // older: the gauge does not go back
	m.CommitDone("merge", 0, at)
	m.SyncDone(nil, at)
	m.SyncDone(errors.New("offline"), at.Add(time.Minute)) // a failure does not move the success time
	m.Conflicts(2)
	m.Conflicts(0)
	m.SleepPhase("expire", 2*time.Second, nil, at)
	m.SleepPhase("arcs", time.Second, errors.New("boom"), at)
	m.Archived(14)
	m.ArcsWritten(2)
	m.NotesDrained("hard-expiry", 3)
	m.NotesDrained("read-count", 0)
	m.Publish(&metrics.Snapshot{
		Memories: map[string]int{"projects": 5, "areas": 7, "resources": 1, "archive": 40},
		Inbox:    23, TaskInbox: 2, Arcs: 3, Invalid: 1,
		LedgerRecords: map[string]int{"rule": 4, "note": 9},
		LedgerNotes:   map[metrics.NoteKey]int{{Mode: "soft-expiry", State: "stale"}: 2},
		MemoryMD:      []metrics.MDStat{{Path: "MEMORY.md", Lines: 120, Bytes: 9000}},
		WatchedDirs:   11, Pending: 3, Ahead: 1, Behind: 2,
		SleepLastSuccess: map[memd.Phase]time.Time{"tidy": at.Add(-time.Hour)},
		WatchEvents:      99, WatchRescans: 1,
	})
	want := `
# HELP memd_commits_total Commits memd made, by kind.
# TYPE memd_commits_total counter
memd_commits_total{kind="change"} 2
memd_commits_total{kind="merge"} 1
memd_commits_total{kind="sleep"} 0
# HELP memd_last_commit_timestamp_seconds Unix time of memd's last commit; 0 before the first.
# TYPE memd_last_commit_timestamp_seconds gauge
memd_last_commit_timestamp_seconds 1.764513125e+09
# HELP memd_syncs_total Sync attempts with the remote.
# TYPE memd_syncs_total counter
memd_syncs_total 2
# HELP memd_sync_failures_total Sync attempts that failed.
# TYPE memd_sync_failures_total counter
memd_sync_failures_total 1
# HELP memd_last_successful_sync_timestamp_seconds Unix time of the last successful sync; 0 before the first.
# TYPE memd_last_successful_sync_timestamp_seconds gauge
memd_last_successful_sync_timestamp_seconds 1.764513125e+09
# HELP memd_conflicts_total Conflict copies kept by merges.
# TYPE memd_conflicts_total counter
memd_conflicts_total 2
# HELP memd_sleep_failures_total Sleep phase runs that failed, by phase.
# TYPE memd_sleep_failures_total counter
memd_sleep_failures_total{phase="archive"} 0
memd_sleep_failures_total{phase="arcs"} 1
memd_sleep_failures_total{phase="expire"} 0
memd_sleep_failures_total{phase="tidy"} 0
# HELP memd_sleep_last_success_timestamp_seconds Unix time of each sleep phase's last successful run; 0 before the first.
# TYPE memd_sleep_last_success_timestamp_seconds gauge
memd_sleep_last_success_timestamp_seconds{phase="arcs"} 0
memd_sleep_last_success_timestamp_seconds{phase="archive"} 0
memd_sleep_last_success_timestamp_seconds{phase="expire"} 1.764513125e+09
memd_sleep_last_success_timestamp_seconds{phase="tidy"} 1.764509525e+09
# HELP memd_archived_total Memory files moved into the archive.
# TYPE memd_archived_total counter
memd_archived_total 14
# HELP memd_arcs_written_total Arc files written or rewritten.
# TYPE memd_arcs_written_total counter
memd_arcs_written_total 2
# HELP memd_notes_drained_total Ledger notes drained, by lifecycle mode.
# TYPE memd_notes_drained_total counter
memd_notes_drained_total{mode="hard-expiry"} 3
memd_notes_drained_total{mode="persistent"} 0
memd_notes_drained_total{mode="read-count"} 0
memd_notes_drained_total{mode="soft-expiry"} 0
# HELP memd_memories Memory files, by PARA bucket.
# TYPE memd_memories gauge
memd_memories{bucket="archive"} 40
memd_memories{bucket="areas"} 7
memd_memories{bucket="projects"} 5
memd_memories{bucket="resources"} 1
# HELP memd_inbox_memories Memories waiting in areas/inbox/ (warn above 20).
# TYPE memd_inbox_memories gauge
memd_inbox_memories 23
# HELP memd_task_inbox_memories Tasks waiting in areas/inbox/tasks/ (warn above 10).
# TYPE memd_task_inbox_memories gauge
memd_task_inbox_memories 2
# HELP memd_arcs Arc files under areas/arcs/.
# TYPE memd_arcs gauge
memd_arcs 3
# HELP memd_invalid_memories Memory files that break the memhtml format.
# TYPE memd_invalid_memories gauge
memd_invalid_memories 1
# HELP memd_ledger_records memory.jsonl records, by type.
# TYPE memd_ledger_records gauge
memd_ledger_records{type="lesson"} 0
memd_ledger_records{type="note"} 9
memd_ledger_records{type="rule"} 4
# HELP memd_memory_md_lines Lines in each MEMORY.md file.
# TYPE memd_memory_md_lines gauge
memd_memory_md_lines{path="MEMORY.md"} 120
# HELP memd_memory_md_bytes Bytes in each MEMORY.md file.
# TYPE memd_memory_md_bytes gauge
memd_memory_md_bytes{path="MEMORY.md"} 9000
# HELP memd_watched_dirs Directories the watcher watches.
# TYPE memd_watched_dirs gauge
memd_watched_dirs 11
# HELP memd_pending_changes Changed paths waiting for the next commit.
# TYPE memd_pending_changes gauge
memd_pending_changes 3
# HELP memd_watch_events_total File system events the watcher read.
# TYPE memd_watch_events_total counter
memd_watch_events_total 99
# HELP memd_watch_rescans_total Full rescans after a watcher overflow.
# TYPE memd_watch_rescans_total counter
memd_watch_rescans_total 1
# HELP memd_commits_ahead Local commits not yet on the remote.
# TYPE memd_commits_ahead gauge
memd_commits_ahead 1
# HELP memd_commits_behind Remote commits not yet merged.
# TYPE memd_commits_behind gauge
memd_commits_behind 2
`
	names := []string{}
	for _, l := range strings.Split(want, "\n") {
		if strings.HasPrefix(l, "# TYPE ") {
			names = append(names, strings.Fields(l)[2])
		}
	}
	if err := testutil.CollectAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(noteGauge(t, m, "soft-expiry", "stale")); got != 2 {
		t.Errorf("soft-expiry/stale = %v", got)
	}
	// Histograms counted every observation.
	if n := histCount(t, m, "memd_commit_duration_seconds"); n != 3 {
		t.Errorf("commit duration count %d", n)
	}
	// A later snapshot replaces the earlier one: MEMORY.md series that vanished are gone.
	m.Publish(&metrics.Snapshot{})
	if n := testutil.CollectAndCount(m.Registry(), "memd_memory_md_lines"); n != 0 {
		t.Errorf("stale MEMORY.md series: %d", n)
	}
	// And the timestamps keep the later of events and snapshot.
	m.Publish(&metrics.Snapshot{LastCommit: at.Add(time.Hour)})
	if v := gaugeValue(t, m, "memd_last_commit_timestamp_seconds"); v != float64(at.Add(time.Hour).Unix()) {
		t.Errorf("snapshot last commit %v", v)
	}
}

func TestPromtoolCheckMetrics(t *testing.T) {
	promtool := needTool(t, "promtool")
	m := metrics.New("dev")
	m.Publish(bigSnapshot(10))
	m.CommitDone("change", time.Millisecond, time.Now())
	body := scrape(t, m)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool := needTool(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", "../configs/prometheus/alerts.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(promtool, "check", "config", "../configs/prometheus/scrape.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	// The alert rules' own unit tests: each alert fires when it should and not before.
	out, err = exec.Command(promtool, "test", "rules", "../configs/prometheus/alerts_test.yml").CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// TestConfigsUseRealMetrics: every memd_* name in the alerts and the Grafana dashboard is one
// the registry exports (a renamed metric must not leave a dashboard panel empty).
func TestConfigsUseRealMetrics(t *testing.T) {
	names := map[string]bool{}
	m := metrics.New("dev")
	m.Publish(bigSnapshot(1))
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+suf] = true
			}
		}
	}
	re := regexp.MustCompile(`\b(memd|go|process)_[a-z_]+`)
	for _, f := range []string{"../configs/prometheus/alerts.yml", "../configs/grafana/memd.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, n := range re.FindAllString(string(b), -1) {
			used++
			if !names[n] {
				t.Errorf("%s uses %s, which memd does not export", f, n)
			}
		}
		if used < 5 {
			t.Errorf("%s: only %d metric names found", f, used)
		}
	}
	// The dashboard is valid JSON with panels.
	var dash struct {
		Panels []struct{ Title string } `json:"panels"`
	}
	b, _ := os.ReadFile("../configs/grafana/memd.json")
	if err := json.Unmarshal(b, &dash); err != nil || len(dash.Panels) < 10 {
		t.Errorf("dashboard: %v, %d panels", err, len(dash.Panels))
	}
}

// TestConcurrentScrapeAndPublish: scrapes read whatever snapshot is current while the owner
// publishes and records events (run with -race).
func TestConcurrentScrapeAndPublish(t *testing.T) {
	m := metrics.New("dev")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			m.Publish(bigSnapshot(i % 7))
			m.CommitDone("change", time.Millisecond, time.Unix(int64(1700000000+i), 0))
			m.SleepPhase("tidy", time.Millisecond, nil, time.Unix(int64(1700000000+i), 0))
		}
	}()
	for i := 0; i < 50; i++ {
		if _, err := m.Registry().Gather(); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	// The snapshots carry a later commit time (bigSnapshot) than the events: the later wins.
	if v := gaugeValue(t, m, "memd_last_commit_timestamp_seconds"); v != 1764513125 {
		t.Errorf("last commit %v", v)
	}
}

// TestBadLabelValues: label values come from the tree and the ledger; invalid UTF-8 and
// duplicates must not break (or panic) a scrape.
func TestBadLabelValues(t *testing.T) {
	m := metrics.New("dev")
	m.Publish(&metrics.Snapshot{
		LedgerRecords: map[string]int{"rule": 1, "bad\xff": 2, "custom": 3},
		MemoryMD:      []metrics.MDStat{{Path: "a/MEMORY.md", Lines: 1}, {Path: "a/MEMORY.md", Lines: 2}, {Path: "b\xfe/MEMORY.md"}},
	})
	body := scrape(t, m)
	if !strings.Contains(body, `memd_memory_md_lines{path="a/MEMORY.md"} 1`) || !strings.Contains(body, `memd_ledger_records{type="custom"} 3`) {
		t.Errorf("scrape:\n%s", body)
	}
	if strings.Contains(body, "bad") || strings.Count(body, `path="a/MEMORY.md"`) != 2 {
		t.Errorf("bad or duplicate series exported")
	}
	if _, err := m.Registry().Gather(); err != nil {
		t.Errorf("gather: %v", err)
	}
}

func TestBadEventLabels(t *testing.T) {
	m := metrics.New("dev")
	m.NotesDrained("mode\xff", 2)
	m.SleepPhase("phase\xff", time.Second, nil, time.Now())
	m.CommitDone("kind\xff", time.Second, time.Now())
	m.NotesDrained("custom", 1)
	if n := testutil.CollectAndCount(m.Registry(), "memd_notes_drained_total"); n != 5 {
		t.Errorf("notes drained series %d, want the 4 known + custom", n)
	}
	if _, err := m.Registry().Gather(); err != nil {
		t.Error(err)
	}
}

// memd_hook_runs_total has every known hook and result at 0 from the start, counts runs, and
// drops a label value that would break the scrape.
func TestHookRuns(t *testing.T) {
	m := metrics.New("dev")
	if n := testutil.CollectAndCount(m.Registry(), "memd_hook_runs_total"); n != len(memd.HookNames)*len(memd.HookResults) {
		t.Errorf("hook series before any run: %d", n)
	}
	m.HookRun("after_sync", "ok")
	m.HookRun("after_sync", "ok")
	m.HookRun("after_sleep", "timeout")
	m.HookRun("after\xff", "ok")
	body := scrape(t, m)
	for _, want := range []string{`memd_hook_runs_total{hook="after_sync",result="ok"} 2`,
		`memd_hook_runs_total{hook="after_sleep",result="timeout"} 1`, `memd_hook_runs_total{hook="after_commit",result="error"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if _, err := m.Registry().Gather(); err != nil {
		t.Error(err)
	}
}
