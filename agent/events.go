package agent

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics/statusline"
)

// eventLog is the status document's `events`: the last statusline.MaxEvents things that
// happened, oldest first. It is restored from the last status.json at start, so ids keep
// increasing across restarts and a reader (the Claude Code mod's stream, the page's log)
// shows each event exactly once. Owner-goroutine only.
type eventLog struct {
	evs  []statusline.Event
	last uint64
}

// maxEventText bounds one event's text: a long error message must not grow status.json.
const maxEventText = 400

func (l *eventLog) restore(d *statusline.Document) {
	if d == nil {
		return
	}
	for _, e := range d.Events {
		if e.ID > l.last {
			l.last = e.ID
			l.evs = append(l.evs, e)
		}
	}
	l.trim()
}

// add records one event; parts, when given, must join to the whole text.
func (l *eventLog) add(at time.Time, kind string, parts ...statusline.Part) {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	text := b.String()
	if len(text) > maxEventText {
		text, parts = text[:maxEventText]+"…", nil
	}
	l.last++
	l.evs = append(l.evs, statusline.Event{ID: l.last, At: at.UTC().Truncate(time.Second), Kind: kind, Text: text, Parts: parts})
	l.trim()
}

func (l *eventLog) trim() {
	if n := len(l.evs) - statusline.MaxEvents; n > 0 {
		l.evs = append([]statusline.Event(nil), l.evs[n:]...)
	}
}

func (l *eventLog) list() []statusline.Event { return l.evs }

// commitHours counts memd's commits per clock hour over the last day (status
// `commits_per_hour`), restored from the last status.json at start.
type commitHours struct {
	newest time.Time // start of the hour counts[len-1] covers; zero before the first commit
	counts [statusline.HoursKept]int
}

func (h *commitHours) restore(d *statusline.Document) {
	if d == nil || len(d.CommitsPerHour) == 0 || d.UpdatedAt.IsZero() {
		return
	}
	src := d.CommitsPerHour
	if len(src) > statusline.HoursKept {
		src = src[len(src)-statusline.HoursKept:]
	}
	copy(h.counts[statusline.HoursKept-len(src):], src)
	h.newest = d.UpdatedAt.UTC().Truncate(time.Hour)
}

// shift moves the window so its newest hour is now's.
func (h *commitHours) shift(now time.Time) {
	hour := now.UTC().Truncate(time.Hour)
	if h.newest.IsZero() {
		h.newest = hour
		return
	}
	n := int(hour.Sub(h.newest) / time.Hour)
	if n <= 0 {
		return // the clock went back: keep counting into the newest hour
	}
	if n >= statusline.HoursKept {
		h.counts = [statusline.HoursKept]int{}
	} else {
		copy(h.counts[:], h.counts[n:])
		for i := statusline.HoursKept - n; i < statusline.HoursKept; i++ {
			h.counts[i] = 0
		}
	}
	h.newest = hour
}

func (h *commitHours) add(now time.Time, n int) {
	h.shift(now)
	h.counts[statusline.HoursKept-1] += n
}

func (h *commitHours) list(now time.Time) []int {
	h.shift(now)
	return append([]int(nil), h.counts[:]...)
}

// event records one event at the agent's clock.
func (a *Agent) event(kind string, parts ...statusline.Part) {
	a.st.events.add(a.now(), kind, parts...)
}

// conflictEvents: one event per conflict copy, naming the file and the copy beside it.
func (a *Agent) conflictEvents(copies []string) {
	for _, cp := range copies {
		orig, ok := memd.ConflictCopyOriginal(cp)
		if !ok && strings.HasSuffix(cp, ".conflicts.jsonl") {
			orig, ok = strings.TrimSuffix(cp, ".conflicts.jsonl")+".jsonl", true
		}
		if !ok {
			orig = "?"
		}
		a.event(statusline.KindWarn, statusline.Part{Text: "conflict", Kind: statusline.KindWarn},
			statusline.Part{Text: " " + orig}, statusline.Part{Text: " changed on both sides; ours kept as ", Kind: statusline.KindDim},
			statusline.Part{Text: cp})
	}
}

// sleepEvent: a sleep run's counts, or the phases that failed.
func (a *Agent) sleepEvent(counts map[string]int, failed []string) {
	keys := make([]string, 0, len(counts))
	for k, v := range counts {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var w []string
	for _, k := range keys {
		w = append(w, fmt.Sprintf("%s %d", k, counts[k]))
	}
	what := strings.Join(w, ", ")
	if what == "" {
		what = "nothing to do"
	}
	if len(failed) > 0 {
		a.event(statusline.KindError, statusline.Part{Text: "sleep failed:", Kind: statusline.KindError},
			statusline.Part{Text: " " + strings.Join(failed, "; ")}, statusline.Part{Text: " (" + what + ")", Kind: statusline.KindDim})
		return
	}
	a.event(statusline.KindInfo, statusline.Part{Text: "sleep:", Kind: statusline.KindInfo}, statusline.Part{Text: " " + what})
}
