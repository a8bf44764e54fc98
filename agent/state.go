package agent

import (
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/memd-dev/memd/format/ledger"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"
)

type commitInfo struct {
	at                       time.Time
	added, modified, deleted int
}

type sleepInfo struct {
	at     time.Time
	counts map[string]int
}

// state is the owner's view of what memd is doing; only the owner goroutine touches it and
// publish turns it into immutable snapshots for the readers.
type state struct {
	busy       string // what a long job is doing ("syncing"); "" when idle
	detail     string
	pending    int
	ahead      int
	behind     int
	syncState  string // "", ok, offline, error
	syncErr    string
	lastErr    string
	deletions  heldDeletions // mass deletions the brake holds (brake.go)
	lastCommit *commitInfo
	lastPush   *time.Time
	lastSleep  *sleepInfo
	events     eventLog    // status `events`, restored at start
	hours      commitHours // status `commits_per_hour`, restored at start
	held       heldState   // files the secret scan holds back (held.go)

	aside     gitrepo.Aside   // why memd stands aside for other writers ("" reason: it does not)
	pause     *statedir.Pause // what `memd pause` asked for (pause.json), nil when none
	stopped   bool            // the clean stop's last document
	allowSeen bool            // allow-deletes was there at the last look (aside.go)
	claude    claudeState     // Claude Code's memory (claudecode.go)

	hookHeld hookHeldSeen    // paths a git hook holds, announced (hookheld.go)
	cutHeld  map[string]bool // paths held as emptied by a power cut, announced (cutheld.go)
}

// heldFacts is every file memd does not commit now, by reason: the guard's (secrets), the
// size limit's, the repo's hooks', the filters' and the power cut's.
func (a *Agent) heldFacts() []statusline.Held {
	held := append([]statusline.Held(nil), a.st.held.list...) // a copy: the appends below must not reach the guard's list
	for _, h := range a.repo.HeldFiles() {                    // over sync.max_file_size: not committed
		held = append(held, statusline.Held{Path: h.Path, Reason: statusline.HeldSize})
	}
	held = append(held, a.hookHeldFacts()...) // refused by the repo's pre-commit/commit-msg hook
	held = append(held, a.filterHeld()...)    // a git filter failed or is missing (heldfilter.go)
	return append(held, a.cutHeldFacts()...)  // emptied by a power cut (cutheld.go)
}

// publish writes the status document (and its rendered lines), feeds the SSE hub and
// publishes the metrics snapshot. Readers never touch git or the tree.
func (a *Agent) publish() {
	st := &a.st
	a.takeQueuedEvents()
	a.noteHeld() // after every job: a commit or a sync's edit merge may hold or release files
	inv := a.inv.snapshot(a.now())
	ws := a.watchStats()
	f := statusline.Facts{
		Now:        a.now(),
		PID:        os.Getpid(),
		Repo:       a.cfg.Repo,
		Busy:       st.busy != "",
		Activity:   st.busy,
		Detail:     st.detail,
		Pending:    a.pending.len(),
		Ahead:      st.ahead,
		Behind:     st.behind,
		Offline:    st.syncState == statusline.StateOffline,
		SyncError:  st.syncErr,
		Error:      st.lastErr,
		Inbox:      inv.Inbox,
		TaskInbox:  inv.TaskInbox,
		Invalid:    inv.Invalid,
		Duplicates: inv.Duplicates,
		OverCapMD:  inv.overCap,
		// Conflict state follows the tree (docs/ARCHITECTURE.md §11): the copies in it now, not a count of
		// the copies merges ever made.
		Conflicts: len(inv.copies),
		Degraded:  ws.Degraded,
		Extra:     append(a.hookFails.warnings(), a.heal.warnings()...),
		LastPush:  st.lastPush,
		Remote:    fmt.Sprintf("%s/%s", a.cfg.Sync.Remote, a.cfg.Sync.Branch),

		Memories:       inv.Memories,
		Arcs:           inv.Arcs,
		LedgerNotes:    notesByState(inv.LedgerNotes),
		ConflictCopies: inv.copies,
		ConflictList:   a.conflicts.list(a.cfg.Repo, inv.copies),
		CommitsPerHour: st.hours.list(a.now()),
		Events:         st.events.list(),
	}
	f.UntemplatedMD = inv.untemplated
	f.Paused, f.PauseBrief = a.pausedFacts()
	f.Stopped = st.stopped
	f.ClaudeCode = st.claude.last
	a.brakeFacts(&f) // fills Paused only when nothing else did
	f.Held = a.heldFacts()
	if st.syncState == statusline.StateError {
		f.Error = st.syncErr
	}
	if c := st.lastCommit; c != nil {
		f.LastCommit = &statusline.CommitInfo{At: c.at, Added: c.added, Modified: c.modified, Deleted: c.deleted}
	}
	if s := st.lastSleep; s != nil {
		f.LastSleep = &statusline.SleepInfo{At: s.at, Counts: s.counts}
	}
	doc := statusline.Compose(f)
	if a.written.due(doc, a.now()) {
		if err := statusline.Write(a.cfg.StateDir(), doc); err != nil {
			a.log.Warn("write status", "err", err)
			a.written = writtenDoc{}
		}
	}
	a.hub.Publish(doc)

	snap := inv.Snapshot
	snap.WatchedDirs = ws.WatchedDirs
	snap.Pending = f.Pending
	snap.WatchEvents = ws.Events
	snap.WatchRescans = ws.Rescans
	snap.Ahead, snap.Behind = st.ahead, st.behind
	a.metrics.Publish(&snap)
	if n := a.opts.Notifier; n != nil {
		n.Status(doc.Summary.Text)
	}
}

// writtenDoc is the status document the files hold. A publish whose document says the
// same (its time aside) writes nothing: status.json is "written on every state change"
// (docs/ARCHITECTURE.md §6), and a daemon syncing every second wrote nine files and an
// fsync per sync that changed nothing, 7% of its CPU while ten machines raced to one HEAD
// (perf, bench/RESULTS.md). The files are still rewritten every rewriteStatusEvery, so
// updated_at never trails a running daemon by much.
type writtenDoc struct {
	doc statusline.Document // UpdatedAt zeroed
	at  time.Time           // when it was written; zero: nothing written (or a write failed)
}

// rewriteStatusEvery bounds how old the files' updated_at gets while nothing changes and
// publishes go on; far under statusline.StaleAfter.
const rewriteStatusEvery = 30 * time.Second

// due says whether doc must be written now, and if so takes it as written.
func (w *writtenDoc) due(doc statusline.Document, now time.Time) bool {
	doc.UpdatedAt = time.Time{}
	if !w.at.IsZero() && now.Sub(w.at) < rewriteStatusEvery && now.Sub(w.at) >= 0 && reflect.DeepEqual(w.doc, doc) {
		return false
	}
	w.doc, w.at = doc, now
	return true
}

func (a *Agent) watchStats() (s struct {
	WatchedDirs     int
	Events, Rescans uint64
	Degraded        string
}) {
	if a.watch == nil {
		return
	}
	ws := a.watch.Stats()
	s.WatchedDirs, s.Events, s.Rescans, s.Degraded = ws.WatchedDirs, ws.Events, ws.Rescans, ws.Degraded
	return
}

// setBusy publishes that a long job started, so the status line says what memd is doing.
func (a *Agent) setBusy(what string) {
	a.st.busy = what
	a.publish()
}

// notesByState sums the ledger notes over their modes: live, stale, expired.
func notesByState(m map[metrics.NoteKey]int) map[string]int {
	out := map[string]int{ledger.NoteLive: 0, ledger.NoteStale: 0, ledger.NoteExpired: 0}
	for k, n := range m {
		out[k.State] += n
	}
	return out
}
