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
	base := Facts{Now: now, PID: 4242, Repo: "/home/u/memory", Remote: "origin/main", Inbox: 7, LastCommit: commit, LastPush: &push, LastSleep: sleep}
	with := func(f func(*Facts)) Facts { x := base; f(&x); return x }
	return map[string]Facts{
		StateOK: base,
		StateBusy: with(func(f *Facts) {
			f.Activity, f.Pending = "committing", 3
		}),
		StateOffline: with(func(f *Facts) {
			f.Offline, f.Ahead, f.SyncError, f.LastPush = true, 3, "dial tcp: connection refused", nil
		}),
		StateConflict: with(func(f *Facts) {
			f.Conflicts, f.Detail = 1, "merged origin/main: notes/x.html kept beside as a conflict copy"
		}),
		StateWarn: with(func(f *Facts) {
			f.Inbox, f.TaskInbox, f.OverCapMD = 23, 12, []string{"projects/memd/MEMORY.md"}
		}),
		StateError: with(func(f *Facts) {
			f.Error = "push origin/main: non-fast-forward after 5 tries"
		}),
	}
}
