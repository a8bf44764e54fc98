package agent

import (
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"
	"github.com/memd-dev/memd/watcher"
)

// Standing aside (docs/ARCHITECTURE.md §11 "Other writers") and the work of others: memd pauses while the
// repo is in another writer's hands (HEAD on another branch, a git operation in progress:
// sync/gitrepo/gitops.go) or while `memd pause` asked it to, and it shows what one-shot commands
// did. The watcher never looks inside .git, so the owner learns of these from a second,
// tiny watch on the names that matter (watcher.Names): the top of .git (HEAD, MERGE_HEAD,
// rebase-merge/ ...) and the state directory's kick and pause files. While paused by the
// repo it also polls (asidePoll), in case an event was missed.

// asidePoll is how often the repo is looked at while memd stands aside: well within one
// quiet period (watch.quiet, 2s), so what changed meanwhile is committed within one of the
// repo's return.
const asidePoll = 500 * time.Millisecond

// startOutside starts the watch of .git's top entries and the state directory; a repo where
// it cannot start still works, with the poll alone (logged).
func (a *Agent) startOutside() {
	gitDir := gitlayout.GitDir(a.cfg.Repo) // the gate files are per worktree
	// The state directory may not be there yet (a repo memd never ran in): made now, or
	// this watch would be off for the daemon's life.
	if sd, err := statedir.Create(a.cfg.StateDir()); err == nil {
		sd.Close()
	}
	n, err := watcher.WatchNames(map[string][]string{
		gitDir:           gitrepo.GateFiles(),
		a.cfg.StateDir(): {statedir.KickFile, statedir.PauseFile, statedir.AllowDeletesFile},
	})
	if err != nil {
		a.log.Warn("cannot watch .git and the state directory; one-shot commands show at the next job", "err", err)
		return
	}
	a.outside = n
	go func() {
		for range n.C() {
			kick(a.k.outside)
		}
	}()
}

func (a *Agent) stopOutside() {
	if a.outside != nil {
		_ = a.outside.Close()
	}
}

// doOutside takes what other writers did: one-shot reports, the pause file, the repo's
// HEAD and operations. It runs on the owner; changed says whether the document must be
// published again.
func (a *Agent) doOutside() (changed bool) {
	aside, pause, evs := a.st.aside, a.st.pause, a.st.events.last
	took := a.takeReports()
	a.readPause()
	a.checkAside()
	a.reconcileIfMovedByOthers()
	if allowed := a.deletesAllowed(); allowed && !a.st.allowSeen {
		// `memd resume --allow-deletes` (new): the brake lets a held deletion through at
		// the next commit and sync (it takes the file); now, not at the next retry.
		kick(a.k.commit)
		a.kickSyncIfRemote()
		a.st.allowSeen = true
	} else if !allowed {
		a.st.allowSeen = false
	}
	return took || a.st.aside != aside || a.st.pause != pause || a.st.events.last != evs
}

func (a *Agent) deletesAllowed() bool {
	sd, err := statedir.Open(a.cfg.StateDir())
	if err != nil {
		return false
	}
	defer sd.Close()
	return sd.DeletesAllowed()
}

// reconcileIfMovedByOthers: a commit another writer made on memd's branch (a person's
// `git commit`, memhtml's) may have left out files memd had committed (built from an index
// that lagged: gitrepo.HeadMovedByOthers). They are still in the work tree and no event
// will come for them, so a reconcile finds them and they are committed again. The outside
// watch sees every such commit (git takes and renames .git/index.lock).
func (a *Agent) reconcileIfMovedByOthers() {
	if a.repo.HeadMovedByOthers() {
		a.log.Debug("branch moved by another writer; reconciling")
		a.kickRescan()
	}
}

// checkAside looks at the repo's HEAD and operations now.
func (a *Agent) checkAside() { a.noteAside(a.repo.StandAside()) }

// noteAside records the gate's answer: an event and a log line when it changes, and the
// poll while memd stands aside. Back from standing aside, what changed meanwhile is found
// by a reconcile (the watcher saw a branch's worth of changes that are no change against
// memd's branch, and may have missed some) and committed, then synced.
func (a *Agent) noteAside(now gitrepo.Aside) {
	was := a.st.aside
	a.st.aside = now
	switch {
	case now.Passing || (now.Reason == "" && was.Passing):
		a.log.Debug("waiting for git's index lock", "held", now.Reason != "")
		if now.Reason == "" {
			kick(a.k.commit)
			a.kickSyncIfRemote() // a sync that waited for the git command
		}
	case now.Reason != "" && now.Reason != was.Reason:
		a.log.Warn("standing aside: nothing is committed or synced until the repo is back", "why", now.Reason)
		a.event(statusline.KindWarn, statusline.Part{Text: "paused:", Kind: statusline.KindWarn}, statusline.Part{Text: " " + now.Reason})
	case now.Reason == "" && was.Reason != "":
		a.log.Info("repo is back; committing what changed meanwhile", "was", was.Reason)
		a.event(statusline.KindOK, statusline.Part{Text: "resumed", Kind: statusline.KindOK}, statusline.Part{Text: ": " + was.Reason + " no longer", Kind: statusline.KindDim})
		a.kickRescan()
		a.kickSyncIfRemote() // the user's own commits meanwhile (a merge, a rebase) go out too
	}
	if now.Reason == "" && !a.sleepWaiting.IsZero() {
		a.sleepTrigger(a.sleepWaiting) // the slot a shut gate held: its turn now
		a.sleepWaiting = time.Time{}
	}
	if now.Reason != "" && a.asidePolling.CompareAndSwap(false, true) {
		time.AfterFunc(asidePoll, func() { a.asidePolling.Store(false); kick(a.k.outside) })
	}
}

// stoodAside handles a job's error: a commit or sync that stood aside is no failure (no
// error event, no backoff); the state says paused and why. It reports whether err was that.
func (a *Agent) stoodAside(err error) bool {
	aside, ok := gitrepo.AsideOf(err)
	if !ok {
		return false
	}
	a.noteAside(aside)
	return true
}

// gateOpen is the check at the start of a job that commits or syncs: false (and the state
// paused) while memd stands aside.
func (a *Agent) gateOpen() bool {
	a.noteAside(a.repo.StandAside())
	return a.st.aside.Reason == ""
}

// userPause is the pause `memd pause` asked for, if it still holds.
func (a *Agent) userPause() *statedir.Pause {
	if p := a.st.pause; p.Active(a.now()) {
		return p
	}
	return nil
}

// commitsPaused: `memd pause` without --commit-only.
func (a *Agent) commitsPaused() bool { p := a.userPause(); return p != nil && !p.CommitOnly }

// syncPaused: any `memd pause`, or the repo in another writer's hands.
func (a *Agent) syncPaused() bool { return a.userPause() != nil }

// readPause re-reads pause.json. A pause that ended (resume, or its --for ran out) lets
// what waited through: a reconcile commits it, and the sync after it pushes.
func (a *Agent) readPause() {
	sd, err := statedir.Open(a.cfg.StateDir())
	if err != nil {
		a.log.Warn("state directory", "err", err)
		return
	}
	defer sd.Close()
	p, err := sd.ReadPause()
	if err != nil {
		a.log.Warn("pause file", "err", err) // kept as it was: a bad file is the user's to see
		return
	}
	was := a.userPause()
	if old := a.st.pause; old != nil && p != nil && *old == *p {
		p = old // the same pause: nothing changed
	}
	if p != nil && !p.Active(a.now()) {
		_ = sd.ClearPause() // ran out: as if resumed
		p = nil
	}
	a.st.pause = p
	switch {
	case p != nil && (was == nil || *was != *p):
		a.log.Info("paused by memd pause", "until", p.Until, "commit_only", p.CommitOnly)
		a.event(statusline.KindWarn, statusline.Part{Text: "paused", Kind: statusline.KindWarn}, statusline.Part{Text: ": " + pauseReason(p), Kind: statusline.KindDim})
		if !p.Until.IsZero() {
			time.AfterFunc(max(p.Until.Sub(a.now()), 0)+10*time.Millisecond, func() { kick(a.k.outside) })
		}
	case p == nil && was != nil:
		a.log.Info("pause ended; committing and syncing what waited")
		a.event(statusline.KindOK, statusline.Part{Text: "resumed", Kind: statusline.KindOK})
		a.kickRescan()
		a.kickSyncIfRemote() // commits made while sync was paused wait for it, changed or not
	}
}

// syncDoneText says what a one-shot sync did: "2 commits, merged, pushed".
func syncDoneText(r statedir.Report) string {
	var w []string
	if r.Commits > 0 {
		w = append(w, plural(r.Commits, "commit"))
	}
	if r.Merged {
		w = append(w, "merged")
	}
	if r.Pushed {
		w = append(w, "pushed")
	}
	return strings.Join(w, ", ")
}

func pauseReason(p *statedir.Pause) string {
	s := p.Reason
	if s == "" {
		s = "memd pause"
		if p.CommitOnly {
			s += " --commit-only: committing, not syncing"
		}
	}
	return s
}

// pausedFacts is the document's `paused` and the line's few words for it: the repo's own
// reason first (it is what the user must act on), then `memd pause`.
func (a *Agent) pausedFacts() (*statusline.Paused, string) {
	if r := a.st.aside; r.Reason != "" {
		return &statusline.Paused{Reason: r.Reason}, r.Brief
	}
	p := a.userPause()
	if p == nil {
		return nil, ""
	}
	out := &statusline.Paused{Reason: pauseReason(p), CommitOnly: p.CommitOnly}
	brief := ""
	if p.CommitOnly {
		brief = "sync"
	}
	if !p.Until.IsZero() {
		out.Until = p.Until.UTC().Format(time.RFC3339)
		if brief != "" {
			brief += ", "
		}
		brief += "until " + p.Until.In(a.now().Location()).Format("15:04")
	}
	return out, brief
}

// takeReports folds what one-shot commands did (statedir.Report) into the daemon's own
// record: events, commits per hour, the last sleep and commit.
func (a *Agent) takeReports() (took bool) {
	sd, err := statedir.Open(a.cfg.StateDir())
	if err != nil {
		return false
	}
	defer sd.Close()
	reps, err := sd.TakeReports()
	if err != nil {
		a.log.Warn("one-shot reports", "err", err)
	}
	moved := false
	for _, r := range reps {
		if s := r.Sleep; s != nil {
			a.sleepEvent(s.Counts, s.Failed)
		}
		if len(r.Conflicts) > 0 {
			a.conflictEvents(r.Conflicts)
		}
		if r.Command == "sync" && (r.Pushed || r.Merged || r.Commits > 0) {
			a.event(statusline.KindOK, statusline.Part{Text: "memd sync", Kind: statusline.KindOK},
				statusline.Part{Text: ": " + syncDoneText(r), Kind: statusline.KindDim})
		}
		if r.Commits > 0 {
			a.st.hours.add(a.now(), r.Commits)
		}
		moved = moved || r.Commits > 0 || r.Merged
		if r.Sleep != nil {
			a.st.lastSleep = &sleepInfo{at: r.At, counts: r.Sleep.Counts}
		}
		if c := r.Commit; c != nil {
			a.st.lastCommit = &commitInfo{at: r.At, added: c.Added, modified: c.Modified, deleted: c.Deleted}
		}
		if r.Pushed {
			t := r.At
			a.st.lastPush = &t
		}
	}
	if moved {
		// HEAD moved under the daemon: the inventory and the ahead count follow.
		a.treeRescanned()
		if ah, be, err := a.repo.AheadBehind(gitrepo.RemoteOptionsFromConfig(a.cfg)); err == nil {
			a.st.ahead, a.st.behind = ah, be
		}
	}
	return len(reps) > 0
}
