// Package metrics is memd's window: the Prometheus registry and collectors, the status document
// (re-exported from metrics/statusline), the SSE hub and the HTTP endpoints. It is the only
// package that imports client_golang.
//
// Nothing here touches git or the tree: the owner publishes immutable snapshots and events,
// and a scrape reads only those.
package metrics

import (
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/ledger"
)

// Label values known in advance; each is exported as 0 before its first event so a rate()
// or an alert has a series to read from the start.
var (
	Buckets       = memd.Names(memd.Buckets) // Snapshot.Memories keys: a status-document map
	NoteStates    = []string{ledger.NoteLive, ledger.NoteStale, ledger.NoteExpired}
	LedgerTypes   = []string{memd.RecordRule, memd.RecordLesson, memd.RecordNote}
	commitBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	sleepBuckets  = []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 120, 300, 600}
)

// NoteKey labels memd_ledger_notes. Mode is as the ledger wrote it, known or not.
type NoteKey struct {
	Mode  memd.LifecycleMode
	State string
}

// MDStat is one MEMORY.md file's size. Project marks the project-memory kind (which has caps).
type MDStat struct {
	Path         string
	Lines, Bytes int
	Project      bool
}

// Snapshot is what the owner knows about the tree and the remote, published after each job.
// It must not be changed after Publish: the collector reads it without a lock.
type Snapshot struct {
	Memories                        map[string]int // by bucket
	Inbox, TaskInbox, Arcs, Invalid int
	LedgerRecords                   map[string]int // by type
	LedgerNotes                     map[NoteKey]int
	MemoryMD                        []MDStat
	WatchedDirs, Pending            int
	Ahead, Behind                   int
	LastCommit, LastSync            time.Time
	SleepLastSuccess                map[memd.Phase]time.Time
	WatchEvents, WatchRescans       uint64 // the watcher's own counters
}

// Metrics owns memd's registry. All methods are safe for concurrent use.
type Metrics struct {
	reg  *prometheus.Registry
	snap atomic.Pointer[published]

	commits        *prometheus.CounterVec
	commitDuration prometheus.Histogram
	syncs          prometheus.Counter
	syncFailures   prometheus.Counter
	conflicts      prometheus.Counter
	sleepRuns      *prometheus.CounterVec
	sleepFailures  *prometheus.CounterVec
	sleepDuration  *prometheus.HistogramVec
	archived       prometheus.Counter
	arcsWritten    prometheus.Counter
	notesDrained   *prometheus.CounterVec
	hookRuns       *prometheus.CounterVec
	lockHeld       prometheus.Counter
	pushAttempts   prometheus.Counter
	held           heldMetrics // held.go

	// Timestamps from events; the collector exports the later of these and the snapshot's,
	// so a restart that reads them back from the repo does not report 0.
	mu           sync.Mutex
	lastCommit   time.Time
	lastSync     time.Time
	sleepSuccess map[memd.Phase]time.Time
}

// New builds the registry: Go and process collectors, build info, the event metrics and the
// snapshot collector, with every known label value at 0.
func New(version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "memd_build_info",
		Help:        "memd build information; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	}, func() float64 { return 1 }))

	m.commits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memd_commits_total", Help: "Commits memd made, by kind."}, []string{"kind"})
	m.commitDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "memd_commit_duration_seconds", Help: "Time to stage and write one commit.", Buckets: commitBuckets})
	m.syncs = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_syncs_total", Help: "Sync attempts with the remote."})
	m.syncFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_sync_failures_total", Help: "Sync attempts that failed."})
	m.conflicts = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_conflicts_total", Help: "Conflict copies kept by merges."})
	m.sleepRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memd_sleep_runs_total", Help: "Sleep phase runs, by phase."}, []string{"phase"})
	m.sleepFailures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memd_sleep_failures_total", Help: "Sleep phase runs that failed, by phase."}, []string{"phase"})
	m.sleepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "memd_sleep_duration_seconds", Help: "Time one sleep phase took.", Buckets: sleepBuckets}, []string{"phase"})
	m.archived = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_archived_total", Help: "Memory files moved into the archive."})
	m.arcsWritten = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_arcs_written_total", Help: "Arc files written or rewritten."})
	m.notesDrained = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memd_notes_drained_total", Help: "Ledger notes drained, by lifecycle mode."}, []string{"mode"})
	m.hookRuns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "memd_hook_runs_total", Help: "Hook runs (hooks: in the config), by hook and result (ok, error, timeout)."}, []string{"hook", "result"})
	m.lockHeld = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_writer_lock_held_seconds_total", Help: "Time memd held the writer lock (.memory.lock)."})
	m.pushAttempts = prometheus.NewCounter(prometheus.CounterOpts{Name: "memd_push_attempts_total", Help: "Pushes tried, rejected ones included."})

	m.sleepSuccess = map[memd.Phase]time.Time{}
	m.reg.MustRegister(m.commits, m.commitDuration, m.syncs, m.syncFailures,
		m.conflicts, m.sleepRuns, m.sleepFailures, m.sleepDuration, m.archived,
		m.arcsWritten, m.notesDrained, m.hookRuns, m.lockHeld, m.pushAttempts, (*snapshotCollector)(m))

	for _, k := range memd.CommitKinds {
		m.commits.WithLabelValues(string(k))
	}
	for _, p := range memd.SleepPhases {
		m.sleepRuns.WithLabelValues(string(p))
		m.sleepFailures.WithLabelValues(string(p))
		m.sleepDuration.WithLabelValues(string(p))
	}
	for _, md := range memd.LifecycleModes {
		m.notesDrained.WithLabelValues(string(md))
	}
	for _, h := range memd.HookNames {
		for _, r := range memd.HookResults {
			m.hookRuns.WithLabelValues(h, r)
		}
	}
	m.held = newHeldMetrics(m.reg)
	m.snap.Store(&published{s: &Snapshot{}})
	return m
}

// Registry is what /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Publish replaces the snapshot the gauges read. s must not change afterwards.
func (m *Metrics) Publish(s *Snapshot) {
	if s == nil {
		s = &Snapshot{}
	}
	m.snap.Store(&published{s: s})
}

// CommitDone records one commit of kind (change, sleep, merge).
func (m *Metrics) CommitDone(kind memd.CommitKind, d time.Duration, at time.Time) {
	if c, err := m.commits.GetMetricWithLabelValues(string(kind)); err == nil {
		c.Inc()
	}
	m.commitDuration.Observe(d.Seconds())
	m.mu.Lock()
	m.lastCommit = later(m.lastCommit, at)
	m.mu.Unlock()
}

// SyncDone records one sync attempt; err nil is a success.
func (m *Metrics) SyncDone(err error, at time.Time) {
	m.syncs.Inc()
	if err != nil {
		m.syncFailures.Inc()
		return
	}
	m.mu.Lock()
	m.lastSync = later(m.lastSync, at)
	m.mu.Unlock()
}

// LockHeld adds time memd held the writer lock.
func (m *Metrics) LockHeld(d time.Duration) {
	if d > 0 {
		m.lockHeld.Add(d.Seconds())
	}
}

// PushAttempts adds pushes tried.
func (m *Metrics) PushAttempts(n int) { addN(m.pushAttempts, n) }

// Conflicts adds conflict copies a merge kept.
func (m *Metrics) Conflicts(n int) { addN(m.conflicts, n) }

// SleepPhase records one phase run.
func (m *Metrics) SleepPhase(phase memd.Phase, d time.Duration, err error, at time.Time) {
	label := string(phase)
	if !utf8.ValidString(label) { // a label value that would panic client_golang
		return
	}
	m.sleepRuns.WithLabelValues(label).Inc()
	m.sleepDuration.WithLabelValues(label).Observe(d.Seconds())
	if err != nil {
		m.sleepFailures.WithLabelValues(label).Inc()
		return
	}
	m.mu.Lock()
	m.sleepSuccess[phase] = later(m.sleepSuccess[phase], at)
	m.mu.Unlock()
}

// Archived adds files moved into the archive.
func (m *Metrics) Archived(n int) { addN(m.archived, n) }

// ArcsWritten adds arcs written.
func (m *Metrics) ArcsWritten(n int) { addN(m.arcsWritten, n) }

// NotesDrained adds drained notes of one lifecycle mode.
func (m *Metrics) NotesDrained(mode memd.LifecycleMode, n int) {
	if n > 0 {
		if c, err := m.notesDrained.GetMetricWithLabelValues(string(mode)); err == nil { // mode comes from the ledger
			c.Add(float64(n))
		}
	}
}

// HookRun records one run of a hook with its result (ok, error, timeout).
func (m *Metrics) HookRun(hook, result string) {
	if c, err := m.hookRuns.GetMetricWithLabelValues(hook, result); err == nil {
		c.Inc()
	}
}

func addN(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// unix is a timestamp gauge's value: 0 for "never".
func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

// published is a snapshot and, built by the first scrape that reads it, its const metrics:
// they are immutable, so later scrapes of the same snapshot only replay them.
type published struct {
	s       *Snapshot
	once    sync.Once
	metrics []prometheus.Metric
}

// snapshotCollector exposes the published snapshot as const metrics at scrape time.
type snapshotCollector Metrics

var (
	descMemories     = prometheus.NewDesc("memd_memories", "Memory files, by PARA bucket.", []string{"bucket"}, nil)
	descInbox        = prometheus.NewDesc("memd_inbox_memories", "Memories waiting in areas/inbox/ (warn above 20).", nil, nil)
	descTaskInbox    = prometheus.NewDesc("memd_task_inbox_memories", "Tasks waiting in areas/inbox/tasks/ (warn above 10).", nil, nil)
	descArcs         = prometheus.NewDesc("memd_arcs", "Arc files under areas/arcs/.", nil, nil)
	descInvalid      = prometheus.NewDesc("memd_invalid_memories", "Memory files that break the memhtml format.", nil, nil)
	descLedger       = prometheus.NewDesc("memd_ledger_records", "memory.jsonl records, by type.", []string{"type"}, nil)
	descNotes        = prometheus.NewDesc("memd_ledger_notes", "Ledger notes, by lifecycle mode and state.", []string{"mode", "state"}, nil)
	descMDLines      = prometheus.NewDesc("memd_memory_md_lines", "Lines in each MEMORY.md file.", []string{"path"}, nil)
	descMDBytes      = prometheus.NewDesc("memd_memory_md_bytes", "Bytes in each MEMORY.md file.", []string{"path"}, nil)
	descWatchedDirs  = prometheus.NewDesc("memd_watched_dirs", "Directories the watcher watches.", nil, nil)
	descPending      = prometheus.NewDesc("memd_pending_changes", "Changed paths waiting for the next commit.", nil, nil)
	descWatchEvents  = prometheus.NewDesc("memd_watch_events_total", "File system events the watcher read.", nil, nil)
	descWatchRescans = prometheus.NewDesc("memd_watch_rescans_total", "Full rescans after a watcher overflow.", nil, nil)
	descAhead        = prometheus.NewDesc("memd_commits_ahead", "Local commits not yet on the remote.", nil, nil)
	descBehind       = prometheus.NewDesc("memd_commits_behind", "Remote commits not yet merged.", nil, nil)
	descLastCommit   = prometheus.NewDesc("memd_last_commit_timestamp_seconds", "Unix time of memd's last commit; 0 before the first.", nil, nil)
	descLastSync     = prometheus.NewDesc("memd_last_successful_sync_timestamp_seconds", "Unix time of the last successful sync; 0 before the first.", nil, nil)
	descSleepSuccess = prometheus.NewDesc("memd_sleep_last_success_timestamp_seconds", "Unix time of each sleep phase's last successful run; 0 before the first.", []string{"phase"}, nil)
)

func (c *snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemories, descInbox, descTaskInbox, descArcs, descInvalid, descLedger,
		descNotes, descMDLines, descMDBytes, descWatchedDirs, descPending, descWatchEvents, descWatchRescans, descAhead, descBehind,
		descLastCommit, descLastSync, descSleepSuccess} {
		ch <- d
	}
}

func (c *snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.snap.Load()
	p.once.Do(func() { p.metrics = snapshotMetrics(p.s) })
	for _, m := range p.metrics {
		ch <- m
	}
	s := p.s
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	// The timestamps move with events between snapshots, so they are built per scrape.
	c.mu.Lock()
	lastCommit, lastSync := later(c.lastCommit, s.LastCommit), later(c.lastSync, s.LastSync)
	success := make(map[memd.Phase]time.Time, len(c.sleepSuccess)+len(s.SleepLastSuccess))
	for ph, t := range c.sleepSuccess {
		success[ph] = t
	}
	c.mu.Unlock()
	for ph, t := range s.SleepLastSuccess {
		success[ph] = later(success[ph], t)
	}
	gauge(descLastCommit, unix(lastCommit))
	gauge(descLastSync, unix(lastSync))
	for _, ph := range withKnown(memd.SleepPhases, success) {
		gauge(descSleepSuccess, unix(success[ph]), string(ph))
	}
}

// snapshotMetrics turns a snapshot into its const metrics, known label values first.
func snapshotMetrics(s *Snapshot) []prometheus.Metric {
	out := make([]prometheus.Metric, 0, 40+2*len(s.MemoryMD))
	// Label values come from the tree and the ledger (a path, a record type): one that is not
	// valid UTF-8 is dropped rather than allowed to panic the scrape.
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...); err == nil {
			out = append(out, m)
		}
	}
	for _, b := range withKnown(Buckets, s.Memories) {
		gauge(descMemories, float64(s.Memories[b]), b)
	}
	gauge(descInbox, float64(s.Inbox))
	gauge(descTaskInbox, float64(s.TaskInbox))
	gauge(descArcs, float64(s.Arcs))
	gauge(descInvalid, float64(s.Invalid))
	for _, t := range withKnown(LedgerTypes, s.LedgerRecords) {
		gauge(descLedger, float64(s.LedgerRecords[t]), t)
	}
	for _, k := range noteKeys(s.LedgerNotes) {
		gauge(descNotes, float64(s.LedgerNotes[k]), string(k.Mode), k.State)
	}
	seen := make(map[string]bool, len(s.MemoryMD))
	for _, md := range s.MemoryMD {
		if seen[md.Path] { // a duplicate series would fail the whole scrape
			continue
		}
		seen[md.Path] = true
		gauge(descMDLines, float64(md.Lines), md.Path)
		gauge(descMDBytes, float64(md.Bytes), md.Path)
	}
	gauge(descWatchedDirs, float64(s.WatchedDirs))
	gauge(descPending, float64(s.Pending))
	out = append(out, prometheus.MustNewConstMetric(descWatchEvents, prometheus.CounterValue, float64(s.WatchEvents)),
		prometheus.MustNewConstMetric(descWatchRescans, prometheus.CounterValue, float64(s.WatchRescans)))
	gauge(descAhead, float64(s.Ahead))
	gauge(descBehind, float64(s.Behind))
	return out
}

// withKnown is the known label values followed by any others the snapshot has, sorted.
func withKnown[K ~string, V any](known []K, m map[K]V) []K {
	out := slices.Clone(known)
	var extra []K
	for k := range m {
		if !slices.Contains(known, k) {
			extra = append(extra, k)
		}
	}
	slices.Sort(extra)
	return append(out, extra...)
}

func noteKeys(m map[NoteKey]int) []NoteKey {
	var out []NoteKey
	for _, md := range memd.LifecycleModes {
		for _, st := range NoteStates {
			out = append(out, NoteKey{md, st})
		}
	}
	var extra []NoteKey
	for k := range m {
		if !k.Mode.Known() || !slices.Contains(NoteStates, k.State) {
			extra = append(extra, k)
		}
	}
	sort.Slice(extra, func(i, j int) bool {
		if extra[i].Mode != extra[j].Mode {
			return extra[i].Mode < extra[j].Mode
		}
		return extra[i].State < extra[j].State
	})
	return append(out, extra...)
}
