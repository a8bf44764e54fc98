package statusline

import "time"

// FixtureNow is the clock of the Fixtures, for golden tests here and in other packages.
var FixtureNow = time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)

// Fixtures returns one set of facts per state, for golden tests and benchmarks.
func Fixtures() map[string]Facts {
	now := FixtureNow
	push := now.Add(-time.Minute)
	commit := &CommitInfo{At: now.Add(-time.Minute), Added: 2, Modified: 1}
	sleep := &SleepInfo{At: time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC), Counts: map[string]int{"arcs": 2, "archived": 14, "expired": 3}}
	hours := make([]int, HoursKept)
	hours[HoursKept-1], hours[HoursKept-2], hours[HoursKept-12] = 3, 1, 4 // 03:00's sleep: 4 phase commits
	slept := Event{ID: 41, At: sleep.At, Kind: KindInfo, Text: "sleep: arcs 2, archived 14, expired 3",
		Parts: []Part{{Text: "sleep:", Kind: KindInfo}, {Text: " arcs 2, archived 14, expired 3"}}}
	base := Facts{Now: now, PID: 4242, Repo: "/home/u/memory", Remote: "origin/main", Inbox: 7, TaskInbox: 2, LastCommit: commit, LastPush: &push, LastSleep: sleep,
		Memories: map[string]int{"projects": 12, "areas": 30, "resources": 5, "archive": 140}, Arcs: 2,
		LedgerNotes: map[string]int{"live": 9, "stale": 1, "expired": 0}, CommitsPerHour: hours, Events: []Event{slept}}
	with := func(f func(*Facts)) Facts { x := base; f(&x); return x }
	then := func(e Event) []Event { e.ID, e.At = 42, now.Add(-30*time.Second); return []Event{slept, e} }
	return map[string]Facts{
		StateOK: base,
		StateBusy: with(func(f *Facts) {
			f.Activity, f.Pending = "committing", 3
		}),
		StateOffline: with(func(f *Facts) {
			f.Offline, f.Ahead, f.SyncError, f.LastPush = true, 3, "dial tcp: connection refused", nil
			f.Events = then(Event{Kind: KindWarn, Text: "offline: dial tcp: connection refused; commits kept locally",
				Parts: []Part{{Text: "offline", Kind: KindWarn}, {Text: ": dial tcp: connection refused; commits kept locally", Kind: KindDim}}})
		}),
		StateConflict: with(func(f *Facts) {
			f.Conflicts, f.Detail = 1, "merged origin/main: notes/x.html kept beside as a conflict copy"
			f.ConflictCopies = []string{"resources/notes/x.conflict-laptop-20261130T143135Z.html"}
			f.Events = then(Event{Kind: KindWarn, Text: "conflict resources/notes/x.html changed on both sides; ours kept as resources/notes/x.conflict-laptop-20261130T143135Z.html",
				Parts: []Part{{Text: "conflict", Kind: KindWarn}, {Text: " resources/notes/x.html"}, {Text: " changed on both sides; ours kept as ", Kind: KindDim}, {Text: "resources/notes/x.conflict-laptop-20261130T143135Z.html"}}})
		}),
		StateWarn: with(func(f *Facts) {
			f.Inbox, f.TaskInbox, f.OverCapMD = 23, 12, []string{"projects/memd/MEMORY.md"}
		}),
		StateError: with(func(f *Facts) {
			f.Error = "push origin/main: non-fast-forward after 5 tries"
			f.Events = then(Event{Kind: KindError, Text: "sync error: push origin/main: non-fast-forward after 5 tries",
				Parts: []Part{{Text: "sync error:", Kind: KindError}, {Text: " push origin/main: non-fast-forward after 5 tries"}}})
		}),
	}
}
