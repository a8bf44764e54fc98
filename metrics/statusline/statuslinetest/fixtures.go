// Package statuslinetest holds the status line's test fixtures: one set of facts per state,
// for golden tests and benchmarks in any package, outside the binary that ships.
package statuslinetest

import (
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

// Now is the clock of the Fixtures.
var Now = time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)

// Fixtures returns one set of facts per state, for golden tests and benchmarks.
func Fixtures() map[string]statusline.Facts {
	now := Now
	push := now.Add(-time.Minute)
	commit := &statusline.CommitInfo{At: now.Add(-time.Minute), Added: 2, Modified: 1}
	sleep := &statusline.SleepInfo{At: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC), Counts: map[string]int{"arcs": 2, "archived": 14, "expired": 3}}
	hours := make([]int, statusline.HoursKept)
	hours[statusline.HoursKept-1], hours[statusline.HoursKept-2], hours[statusline.HoursKept-12] = 3, 1, 4 // 03:00's sleep: 4 phase commits
	slept := statusline.Event{ID: 41, At: sleep.At, Kind: statusline.KindInfo, Text: "sleep: arcs 2, archived 14, expired 3",
		Parts: []statusline.Part{{Text: "sleep:", Kind: statusline.KindInfo}, {Text: " arcs 2, archived 14, expired 3"}}}
	base := statusline.Facts{Now: now, PID: 4242, Repo: "/home/u/memory", Remote: "origin/main", Inbox: 7, TaskInbox: 2, LastCommit: commit, LastPush: &push, LastSleep: sleep,
		Memories: map[string]int{"projects": 12, "areas": 30, "resources": 5, "archive": 140}, Arcs: 2,
		LedgerNotes: map[string]int{"live": 9, "stale": 1, "expired": 0}, CommitsPerHour: hours, Events: []statusline.Event{slept}}
	with := func(f func(*statusline.Facts)) statusline.Facts { x := base; f(&x); return x }
	then := func(e statusline.Event) []statusline.Event {
		e.ID, e.At = 42, now.Add(-30*time.Second)
		return []statusline.Event{slept, e}
	}
	return map[string]statusline.Facts{
		statusline.StateOK: base,
		statusline.StateBusy: with(func(f *statusline.Facts) {
			f.Activity, f.Pending = "committing", 3
		}),
		statusline.StateOffline: with(func(f *statusline.Facts) {
			f.Offline, f.Ahead, f.SyncError, f.LastPush = true, 3, "dial tcp: connection refused", nil
			f.Events = then(statusline.Event{Kind: statusline.KindWarn, Text: "offline: dial tcp: connection refused; commits kept locally",
				Parts: []statusline.Part{{Text: "offline", Kind: statusline.KindWarn}, {Text: ": dial tcp: connection refused; commits kept locally", Kind: statusline.KindDim}}})
		}),
		statusline.StateConflict: with(func(f *statusline.Facts) {
			f.Conflicts, f.Detail = 1, "merged origin/main: notes/x.html kept beside as a conflict copy"
			f.ConflictCopies = []string{"resources/notes/x.conflict-laptop-20261130T143135Z.html"}
			f.Events = then(statusline.Event{Kind: statusline.KindWarn, Text: "conflict resources/notes/x.html changed on both sides; ours kept as resources/notes/x.conflict-laptop-20261130T143135Z.html",
				Parts: []statusline.Part{{Text: "conflict", Kind: statusline.KindWarn}, {Text: " resources/notes/x.html"}, {Text: " changed on both sides; ours kept as ", Kind: statusline.KindDim}, {Text: "resources/notes/x.conflict-laptop-20261130T143135Z.html"}}})
		}),
		statusline.StateWarn: with(func(f *statusline.Facts) {
			f.Inbox, f.TaskInbox, f.OverCapMD = 23, 12, []string{"projects/memd/MEMORY.md"}
		}),
		statusline.StateError: with(func(f *statusline.Facts) {
			f.Error = "push origin/main: non-fast-forward after 5 tries"
			f.Events = then(statusline.Event{Kind: statusline.KindError, Text: "sync error: push origin/main: non-fast-forward after 5 tries",
				Parts: []statusline.Part{{Text: "sync error:", Kind: statusline.KindError}, {Text: " push origin/main: non-fast-forward after 5 tries"}}})
		}),
	}
}
