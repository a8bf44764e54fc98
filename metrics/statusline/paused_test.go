package statusline

import (
	"strings"
	"testing"
	"time"
)

// TestPausedStoppedConflictLines: the added states read short, and a conflict keeps saying
// offline and the ahead count beside it.
func TestPausedStoppedConflictLines(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 32, 0, 0, time.UTC)
	base := Facts{Now: now, PID: 1, Repo: "/r", LastCommit: &CommitInfo{At: now, Added: 1}}
	cases := []struct {
		name  string
		f     func(f *Facts)
		state string
		line  string
	}{
		{"paused by HEAD", func(f *Facts) {
			f.Paused, f.PauseBrief = &Paused{Reason: "HEAD is on sleep/2026-12-01, not main"}, "HEAD on sleep/2026-12-01"
		}, StatePaused, "memd: paused (HEAD on sleep/2026-12-01) · 14:32"},
		{"paused by memd pause", func(f *Facts) { f.Paused = &Paused{Reason: "memd pause"} }, StatePaused, "memd: paused · 14:32"},
		{"paused over an error", func(f *Facts) { f.Paused, f.Error = &Paused{Reason: "a merge is in progress"}, "boom" }, StatePaused, "memd: paused · 14:32"},
		{"stopped", func(f *Facts) { f.Stopped, f.Busy = true, true }, StateStopped, "memd: stopped · 14:32"},
		{"conflict offline ahead", func(f *Facts) { f.Conflicts, f.Offline, f.Ahead = 1, true, 2 }, StateConflict, "memd: +1 1 conflict, offline, 2 ahead · 14:32"},
	}
	for _, c := range cases {
		f := base
		c.f(&f)
		d := Compose(f)
		if d.State != c.state || d.Summary.Text != c.line {
			t.Errorf("%s: state %q line %q, want %q %q", c.name, d.State, d.Summary.Text, c.state, c.line)
		}
	}
	f := base
	f.Paused, f.Detail = &Paused{Reason: "a rebase is in progress"}, "committed 3 files"
	if d := Compose(f); d.Detail != "a rebase is in progress" || d.Paused == nil {
		t.Errorf("paused detail %q, paused %+v", d.Detail, d.Paused)
	}
	f = base
	f.Conflicts, f.Offline, f.Ahead, f.SyncError = 1, true, 2, "dial tcp: refused"
	if d := Compose(f); !strings.Contains(d.Detail, "remote unreachable") {
		t.Errorf("conflict while offline: detail %q", d.Detail)
	}
	// A stopped document stays stopped long after, pid gone: not "not running".
	f = base
	f.Stopped = true
	d := Compose(f)
	out, err := Render(&d, "plain", now.Add(time.Hour), func(int) bool { return false })
	if err != nil || out != "memd: stopped · 14:32" {
		t.Errorf("stopped an hour later: %q %v", out, err)
	}
}
