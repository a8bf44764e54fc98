package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics/statusline"
)

// TestEventLogAcrossRestarts: ids go on from the last document's events, the ring keeps the
// newest MaxEvents, and a long text is cut.
func TestEventLogAcrossRestarts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	var l eventLog
	for i := 0; i < statusline.MaxEvents+7; i++ {
		l.add(t0, statusline.KindInfo, statusline.Part{Text: "e"})
	}
	if n, first, last := len(l.list()), l.list()[0].ID, l.list()[len(l.list())-1].ID; n != statusline.MaxEvents || first != 8 || last != 57 {
		t.Fatalf("ring: %d events, ids %d..%d", n, first, last)
	}
	doc := statusline.Compose(statusline.Facts{Now: t0, Events: l.list()})
	var next eventLog // a restarted memd reads the last status.json
	next.restore(&doc)
	next.add(t0, statusline.KindWarn, statusline.Part{Text: strings.Repeat("x", 2*maxEventText)})
	evs := next.list()
	if e := evs[len(evs)-1]; e.ID != 58 || len(evs) != statusline.MaxEvents || len(e.Text) > maxEventText+len("…") || e.Parts != nil {
		t.Fatalf("after restart: last %+v, %d events", e.ID, len(evs))
	}
}

// TestCommitHours: commits land in their clock hour; the window moves with the clock and
// survives a restart through the document.
func TestCommitHours(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 14, 10, 0, 0, time.UTC)
	var h commitHours
	h.add(t0, 1)
	h.add(t0.Add(20*time.Minute), 2) // 14:30, same hour
	h.add(t0.Add(time.Hour), 1)      // 15:10
	got := h.list(t0.Add(2 * time.Hour))
	if got[statusline.HoursKept-3] != 3 || got[statusline.HoursKept-2] != 1 || got[statusline.HoursKept-1] != 0 {
		t.Fatalf("hours = %v", got)
	}
	doc := statusline.Compose(statusline.Facts{Now: t0.Add(2 * time.Hour), CommitsPerHour: got})
	var r commitHours
	r.restore(&doc)
	if again := r.list(t0.Add(3 * time.Hour)); again[statusline.HoursKept-4] != 3 || again[statusline.HoursKept-3] != 1 {
		t.Fatalf("restored and moved an hour = %v", again)
	}
	if far := r.list(t0.Add(48 * time.Hour)); far[statusline.HoursKept-4] != 0 {
		t.Fatalf("two days later = %v", far)
	}
}

// TestEventTexts: what a conflict, a sleep run and a failed sleep say, whole and in parts.
func TestEventTexts(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	a := &Agent{now: func() time.Time { return t0 }}
	a.conflictEvents([]string{"areas/x.conflict-laptop-20261130T030000Z.html", "memory.conflicts.jsonl", "odd"})
	a.sleepEvent(map[string]int{"expired": 3, "arcs": 2, "archived": 0}, nil)
	a.sleepEvent(map[string]int{}, nil)
	a.sleepEvent(map[string]int{"arcs": 1}, []string{"archive: disk full"})
	want := []struct{ kind, text string }{
		{statusline.KindWarn, "conflict areas/x.html changed on both sides; ours kept as areas/x.conflict-laptop-20261130T030000Z.html"},
		{statusline.KindWarn, "conflict memory.jsonl changed on both sides; ours kept as memory.conflicts.jsonl"},
		{statusline.KindWarn, "conflict ? changed on both sides; ours kept as odd"},
		{statusline.KindInfo, "sleep: arcs 2, expired 3"},
		{statusline.KindInfo, "sleep: nothing to do"},
		{statusline.KindError, "sleep failed: archive: disk full (arcs 1)"},
	}
	evs := a.st.events.list()
	if len(evs) != len(want) {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	for i, w := range want {
		e := evs[i]
		var joined strings.Builder
		for _, p := range e.Parts {
			joined.WriteString(p.Text)
		}
		if e.Kind != w.kind || e.Text != w.text || joined.String() != e.Text || e.ID != uint64(i+1) || !e.At.Equal(t0) {
			t.Errorf("event %d = %+v, want %s %q", i, e, w.kind, w.text)
		}
	}
}

// TestNewRestoresFromLastDocument: a new Agent goes on from the status.json the last run
// wrote: its events (ids), commit hours and last sleep.
func TestNewRestoresFromLastDocument(t *testing.T) {
	isolateGit(t)
	cfg := memd.DefaultConfig()
	cfg.Repo = newRepo(t)
	t0 := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	hours := make([]int, statusline.HoursKept)
	hours[statusline.HoursKept-1] = 5
	prev := statusline.Compose(statusline.Facts{Now: t0, CommitsPerHour: hours,
		LastSleep: &statusline.SleepInfo{At: t0.Add(-11 * time.Hour), Counts: map[string]int{"arcs": 2}},
		Events:    []statusline.Event{{ID: 7, At: t0, Kind: statusline.KindInfo, Text: "sleep: arcs 2"}}})
	if err := statusline.Write(cfg.StateDir(), prev); err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Config: cfg, Now: func() time.Time { return t0.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer a.repo.Close()
	a.event(statusline.KindOK, statusline.Part{Text: "next"})
	evs := a.st.events.list()
	if len(evs) != 2 || evs[0].ID != 7 || evs[1].ID != 8 {
		t.Fatalf("events = %+v", evs)
	}
	if h := a.st.hours.list(t0.Add(time.Hour)); h[statusline.HoursKept-2] != 5 {
		t.Fatalf("hours = %v", h)
	}
	if s := a.st.lastSleep; s == nil || s.counts["arcs"] != 2 || !s.at.Equal(t0.Add(-11*time.Hour)) {
		t.Fatalf("last sleep = %+v", s)
	}
}
