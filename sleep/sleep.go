// Package sleep runs memd's nightly phases over a memory repo: expire ledger notes, write
// arcs, archive by year, tidy MEMORY.md and links (docs/ARCHITECTURE.md §5). Each phase is a pure plan
// computed from a snapshot of the tree and the clock, then an apply under the writer lock,
// then exactly one commit (or none when the plan is empty). A failed phase is undone in the
// tree; the phases after it still run. A killed run is resumed: phases already committed for
// the same run id are read back from the commit trailers, and a half-applied phase is undone
// from its journal in .git/memd before being planned again.
//
// Choices made here (the design leaves them open):
//   - "Past" is strict: a note expiring exactly now is still live.
//   - Arcs whose group fell below arcs.min_episodes (members archived or deleted) are left
//     as they are; sleep never deletes a file people read.
//   - A summarizer that fails, times out or prints more than 64 KiB leaves the arc's
//     deterministic summary; the arc is not retried until its member set changes.
//   - Archiving looks at the metas it needs even in a file with other rule violations (a
//     pure rename cannot hurt it); files whose year is unknown are skipped and reported.
//   - After the phases, `git gc --auto` runs when git is installed; without git it is
//     skipped (go-git's repack rewrites every object, too slow for a nightly job).
//   - The tree is made durable with one syncfs per apply (not an fsync per file) before the
//     commit.
//   - Parsed memory heads are cached in .git/memd/sleep-parse.bin by stat (size, mtime,
//     ctime, inode) and content hash; a night whose plans all come out empty records a
//     fingerprint of everything the planners read (.git/memd/sleep-idle.json, see idle.go),
//     so the next night with nothing changed costs one walk and an lstat per memory file,
//     less than a `git status`. A night after a day of new or edited memory files,
//     MEMORY.md files and ledger notes that change no plan is answered from that record
//     too, after judging only what changed (the delta plan, delta.go); anything it cannot
//     prove harmless plans the whole tree.
package sleep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	memsync "github.com/memd-dev/memd/sync"
)

// Phase names, in the order they always run.
const (
	PhaseExpire  = memd.PhaseExpire
	PhaseArcs    = memd.PhaseArcs
	PhaseArchive = memd.PhaseArchive
	PhaseTidy    = memd.PhaseTidy
)

// Trailer keys of sleep commits (docs/ARCHITECTURE.md §3).
const (
	TrailerRun    = "Memd-Run"
	TrailerPhase  = "Memd-Phase"
	TrailerCounts = "Memd-Counts"
)

// ErrConflict means a file changed between the plan and the apply; the phase is undone and
// the next run plans again from what is there.
var ErrConflict = errors.New("file changed since the plan")

// ErrUnknownPhase is returned for a phase name that is not one of the four.
var ErrUnknownPhase = errors.New("unknown sleep phase")

// Store is the commit boundary; *memsync.Repo satisfies it.
type Store interface {
	CommitPathsMessage(paths []string, message string, kind memsync.CommitKind) (memsync.CommitResult, error)
	CommitMessages(limit int) ([]string, error)
}

// Options configure a Runner.
type Options struct {
	// Config supplies sleep, expire, arcs, archive, tidy and lock settings (Repo is ignored:
	// NewRunner's repoDir is the repo).
	Config memd.Config
	// Phases to run; nil means Config.Sleep.Phases. Always run in canonical order.
	Phases []string
	// Now is the clock; nil = time.Now.
	Now    func() time.Time
	Logger *slog.Logger
	// DryRun plans every phase (each on the tree as the previous plans would leave it) and
	// writes nothing: no files, no commits, no state, no gc.
	DryRun bool
	// Progress receives progress lines for long phases (the caller passes stderr only when it
	// is a terminal); nil = none.
	Progress io.Writer
	// StateDir holds sleep.json and the apply journal; "" = <repo>/.git/memd.
	StateDir string
	// NoGC skips `git gc --auto` after the phases.
	NoGC bool
	// Ignore is the committer's ignore rule ((*repofiles.Ignorer).Ignored); sleep never plans a
	// path it ignores. nil ignores only .git.
	Ignore Ignore

	// test hooks
	afterOp func(phase string, i int) error // called after each applied op; an error fails the phase
	wallNow func() time.Time                // the wall clock for the racy rule; nil = time.Now
}

// Item is one planned action, for --dry-run and --json.
type Item struct {
	Action string `json:"action"` // drain, stale, write-arc, move, rewrite-links, repair, backup, report, skip
	Path   string `json:"path"`
	To     string `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// PhaseResult is what one phase did.
type PhaseResult struct {
	Name     string         `json:"phase"`
	Counts   map[string]int `json:"counts"`
	Commit   string         `json:"commit,omitempty"`
	Skipped  bool           `json:"skipped,omitempty"` // already committed for this run id
	Err      error          `json:"-"`
	Error    string         `json:"error,omitempty"`
	Duration time.Duration  `json:"duration_ns"`
	Items    []Item         `json:"items,omitempty"`
}

// Report is the result of a run.
type Report struct {
	RunID  string        `json:"run"`
	At     time.Time     `json:"at"`
	DryRun bool          `json:"dry_run,omitempty"`
	Phases []PhaseResult `json:"phases"`
	// Counts summarises the run for status last_sleep: arcs (written), archived (moved by
	// archive and expire), expired (notes drained), plus stale, repaired, links.
	Counts map[string]int `json:"counts"`
	// Drained counts drained notes by lifecycle mode (memd_notes_drained_total{mode}).
	Drained map[string]int `json:"drained,omitempty"`
	GC      string         `json:"gc,omitempty"` // "ran", "skipped: …" or "failed: …"
	Elapsed time.Duration  `json:"elapsed_ns"`
}

// Failed reports whether any phase failed.
func (r Report) Failed() bool {
	for _, p := range r.Phases {
		if p.Err != nil {
			return true
		}
	}
	return false
}

// summarize fills Counts and Drained from the phases.
func (r *Report) summarize() {
	r.Counts, r.Drained = map[string]int{}, map[string]int{}
	for _, p := range r.Phases {
		c := p.Counts
		switch p.Name {
		case PhaseExpire:
			r.Counts["expired"] += c["drained"]
			r.Counts["archived"] += c["archived"]
			r.Counts["stale"] += c["stale"]
			for k, v := range c {
				if mode, ok := strings.CutPrefix(k, "drained_"); ok {
					r.Drained[mode] += v
				}
			}
		case PhaseArcs:
			r.Counts["arcs"] += c["created"] + c["updated"]
		case PhaseArchive:
			r.Counts["archived"] += c["archived"]
			r.Counts["links"] += c["links"] + c["bullets"]
		case PhaseTidy:
			r.Counts["repaired"] += c["repaired"]
			r.Counts["links"] += c["links"] + c["bullets"]
		}
	}
	for k, v := range r.Counts {
		if v == 0 {
			delete(r.Counts, k)
		}
	}
}

// Runner runs sleep phases over one repo.
type Runner struct {
	dir   string
	store Store
	opts  Options
	log   *slog.Logger
	now   func() time.Time
	// idleHit: the last Run's results came from the idle record; deltaHit: from the record
	// after a delta plan (tests).
	idleHit, deltaHit bool
}

// NewRunner returns a runner for the repo at repoDir committing through store.
func NewRunner(repoDir string, store Store, opts Options) *Runner {
	r := &Runner{dir: repoDir, store: store, opts: opts, log: opts.Logger, now: opts.Now}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.opts.StateDir == "" {
		r.opts.StateDir = filepath.Join(repoDir, ".git", memd.StateDirName)
	}
	return r
}

// SelectPhases returns the named phases in canonical order, refusing unknown names.
func SelectPhases(names []string) ([]string, error) {
	want := map[string]bool{}
	for _, n := range names {
		ok := false
		for _, p := range memd.SleepPhases {
			if p == n {
				ok = true
			}
		}
		if !ok {
			return nil, fmt.Errorf("%w %q (phases: %s)", ErrUnknownPhase, n, strings.Join(memd.SleepPhases, ", "))
		}
		want[n] = true
	}
	var out []string
	for _, p := range memd.SleepPhases {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// Run runs the selected phases for runID (RunID(slot) for a scheduled slot). The error is
// for what stops the whole run (bad phase list, unreadable repo); a failing phase is recorded
// in its PhaseResult and the run goes on.
func (r *Runner) Run(ctx context.Context, runID string) (Report, error) {
	start := time.Now()
	now := r.now()
	rep := Report{RunID: runID, At: now.UTC(), DryRun: r.opts.DryRun}
	names := r.opts.Phases
	if names == nil {
		names = r.opts.Config.Sleep.Phases
	}
	phases, err := SelectPhases(names)
	if err != nil {
		return rep, err
	}
	done := map[string]bool{}
	if !r.opts.DryRun {
		clearStaleLock(ctx, filepath.Join(r.dir, lockFile(r.opts.Config)), r.log)
		done, err = r.committedPhases(runID)
		if err != nil {
			return rep, err
		}
		if err := r.recoverJournal(runID, done); err != nil {
			return rep, err
		}
	}
	wall := time.Now
	if r.opts.wallNow != nil {
		wall = r.opts.wallNow
	}
	saved := wall().UnixNano() // before the walk: anything touched after it is racy
	walk, err := walkTree(r.dir, r.opts.Ignore)
	if err != nil {
		return rep, err
	}
	var toPlan []string
	for _, ph := range phases {
		if !done[ph] {
			toPlan = append(toPlan, ph)
		}
	}
	idle := idleKey(r.dir, walk, r.opts.Config)
	rec := readIdle(r.opts.StateDir)
	var delta *deltaPlan
	if !rec.holds(idle, now, toPlan) {
		// Not the record's tree: maybe only a few memory files that change no plan.
		var why string
		if delta, why = r.planDelta(rec, idle, walk, now, toPlan); delta == nil {
			rec = nil
			r.log.Debug("sleep: planning the whole tree", "why", why)
		} else {
			r.log.Debug("sleep: only new or edited memory files that change no plan", "read", delta.read)
		}
	}
	r.idleHit = rec != nil && delta == nil
	r.deltaHit = delta != nil
	// Nothing changed since a run whose plans were all empty: its results, no parse.
	var snap *snapshot
	if rec == nil {
		// A dry run reads the parse cache but writes nothing, not even the cache.
		snap, err = snapshotOf(r.dir, walk, saved, r.opts.StateDir, r.opts.Progress)
		if err != nil {
			return rep, err
		}
		snap.virtual = r.opts.DryRun
		snap.ledger = ledgerPath(r.opts.Config)
	} else if delta == nil {
		r.log.Debug("sleep: nothing changed since an idle run", "since", rec.From, "until", rec.Until)
	}
	var succeeded []string
	var planned []PhaseResult
	var until time.Time
	var groups map[arcKey]int
	allEmpty := true
	for _, ph := range phases {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		pr := PhaseResult{Name: ph, Counts: map[string]int{}}
		t0 := time.Now()
		if done[ph] {
			pr.Skipped = true
			rep.Phases = append(rep.Phases, pr)
			continue
		}
		if rec != nil {
			pr = rec.replay(ph)
			if delta != nil {
				if ip := delta.phases[ph]; ip != nil {
					pr = ip.result()
				}
				planned = append(planned, pr)
			}
		} else {
			p := r.runPhase(ctx, runID, ph, now, snap, &pr)
			if p == nil || len(p.ops) > 0 || pr.Err != nil || pr.Counts["summarized"]+pr.Counts["summarizer_failed"] > 0 {
				allEmpty = false // (a summarizer ran: its output may differ next time)
			} else if !p.until.IsZero() && (until.IsZero() || p.until.Before(until)) {
				until = p.until
			}
			if p != nil && ph == PhaseArcs {
				groups = p.arcGroups
			}
			planned = append(planned, pr)
		}
		pr.Duration = time.Since(t0)
		if pr.Err != nil {
			pr.Error = pr.Err.Error()
			r.log.Error("sleep phase failed", "phase", ph, "run", runID, "err", pr.Err)
		} else {
			// A dry run's plan is its output (the report); the log line would only repeat it.
			level := slog.LevelInfo
			if r.opts.DryRun {
				level = slog.LevelDebug
			}
			r.log.Log(ctx, level, "sleep phase", "phase", ph, "run", runID, "commit", pr.Commit, "counts", countsString(pr.Counts, ","))
			succeeded = append(succeeded, ph)
		}
		rep.Phases = append(rep.Phases, pr)
	}
	if !r.opts.DryRun {
		if snap != nil && snap.uncovered {
			allEmpty = false
		}
		if snap != nil {
			if err := snap.saveCacheIfWorth(r.opts.StateDir); err != nil {
				r.log.Warn("cannot write the sleep parse cache", "err", err)
			}
			var err error
			if allEmpty && len(planned) > 0 {
				err = writeIdle(r.opts.StateDir, idle, saved, now, until, planned, walk, groups)
			} else {
				err = removeIdle(r.opts.StateDir)
			}
			if err != nil {
				r.log.Warn("cannot write the sleep idle record", "err", err)
			}
		} else if delta != nil {
			// The record, moved on to this tree: tomorrow compares with today.
			if err := writeIdle(r.opts.StateDir, idle, saved, now, delta.until, planned, walk, delta.groups); err != nil {
				r.log.Warn("cannot write the sleep idle record", "err", err)
			}
		}
		if len(succeeded) > 0 {
			if err := markDone(r.opts.StateDir, succeeded, runID, now); err != nil {
				r.log.Warn("cannot record sleep state", "err", err)
			}
		}
		rep.GC = r.gc(ctx)
	}
	rep.summarize()
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// runPhase plans, applies and commits one phase, filling pr. It returns the plan (nil when
// planning failed).
func (r *Runner) runPhase(ctx context.Context, runID, ph string, now time.Time, snap *snapshot, pr *PhaseResult) *plan {
	env := &planEnv{cfg: r.opts.Config, now: now, log: r.log, progress: r.opts.Progress, dryRun: r.opts.DryRun, ctx: ctx}
	var p *plan
	var err error
	switch ph {
	case PhaseExpire:
		p, err = planExpire(snap, env)
	case PhaseArcs:
		p, err = planArcs(snap, env)
	case PhaseArchive:
		p, err = planArchive(snap, env)
	case PhaseTidy:
		p, err = planTidy(snap, env)
	}
	if err != nil {
		pr.Err = fmt.Errorf("sleep %s: plan: %w", ph, err)
		return nil
	}
	pr.Counts = p.counts
	pr.Items = p.items
	if len(p.ops) == 0 {
		return p
	}
	if r.opts.DryRun {
		snap.apply(p)
		return p
	}
	hash, err := r.applyAndCommit(ctx, runID, ph, p)
	if err != nil {
		pr.Err = fmt.Errorf("sleep %s: %w", ph, err)
		// The tree is as before; forget the plan's file contents from the snapshot too.
		return p
	}
	pr.Commit = hash
	snap.apply(p)
	return p
}

// applyAndCommit takes the writer lock, applies p's ops (journalled), commits them, and
// undoes them if anything fails.
func (r *Runner) applyAndCommit(ctx context.Context, runID, ph string, p *plan) (string, error) {
	release, err := acquireWriterLock(ctx, filepath.Join(r.dir, lockFile(r.opts.Config)), r.opts.Config.Lock.Timeout.D(), "memd sleep "+ph, r.log)
	if err != nil {
		return "", fmt.Errorf("writer lock: %w", err)
	}
	defer func() {
		if err := release(); err != nil {
			r.log.Warn("release writer lock", "err", err)
		}
	}()
	j, err := r.openJournal(runID, ph, p)
	if err != nil {
		return "", err
	}
	defer j.close()
	undo := func(cause error) error {
		if uerr := j.undo(r.log); uerr != nil {
			return fmt.Errorf("%w (and undo: %v)", cause, uerr)
		}
		j.remove()
		return cause
	}
	for i := range p.ops {
		if err := ctx.Err(); err != nil {
			return "", undo(err)
		}
		if err := j.apply(i); err != nil {
			return "", undo(err)
		}
		if r.opts.afterOp != nil {
			if err := r.opts.afterOp(ph, i); err != nil {
				return "", undo(err)
			}
		}
		progress(r.opts.Progress, ph, i+1, len(p.ops))
	}
	progressDone(r.opts.Progress, len(p.ops))
	// The tree's new bytes durable before the commit names them (a power loss after the
	// commit must not leave HEAD ahead of garbage in the tree).
	if err := flushFS(r.dir); err != nil {
		return "", undo(err)
	}
	msg := commitMessage(ph, runID, p.counts)
	var res memsync.CommitResult
	for attempt := 0; ; attempt++ {
		res, err = r.store.CommitPathsMessage(p.paths(), msg, memsync.KindSleep)
		// Someone committed between our read of HEAD and the ref update: the retry builds
		// on the new HEAD (our paths are still as we wrote them).
		if !errors.Is(err, memsync.ErrHeadMoved) || attempt == 2 {
			break
		}
	}
	if err != nil {
		return "", undo(fmt.Errorf("commit: %w", err))
	}
	j.remove()
	return res.Hash, nil
}

func lockFile(cfg memd.Config) string {
	if cfg.Lock.File == "" {
		return memd.DefaultLockFile
	}
	return cfg.Lock.File
}

// commitMessage is `sleep(<phase>): <counts>` then the trailers.
func commitMessage(ph, runID string, counts map[string]int) string {
	// The subject keeps the totals; breakdowns (drained_<mode>) are in the trailer only.
	totals := map[string]int{}
	for k, v := range counts {
		if !strings.Contains(k, "_") {
			totals[k] = v
		}
	}
	c := countsString(totals, " ")
	if c == "" {
		c = "no changes"
	}
	return fmt.Sprintf("sleep(%s): %s\n\n%s: %s\n%s: %s\n%s: %s\n", ph, c,
		TrailerRun, runID, TrailerPhase, ph, TrailerCounts, countsString(counts, ","))
}

// countsString renders nonzero counts as k=v in key order.
func countsString(counts map[string]int, sep string) string {
	keys := make([]string, 0, len(counts))
	for k, v := range counts {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, counts[k])
	}
	return strings.Join(parts, sep)
}

// parseTrailers reads the Memd-* trailers of a commit message.
func parseTrailers(msg string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(msg, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok && strings.HasPrefix(k, "Memd-") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// commitHistoryLimit bounds how far back resume looks for the run's commits: a run makes at
// most four, and a daemon commits changes in between; a few hundred is plenty.
const commitHistoryLimit = 500

// committedPhases reads which phases are already committed for runID from git log.
func (r *Runner) committedPhases(runID string) (map[string]bool, error) {
	done := map[string]bool{}
	msgs, err := r.store.CommitMessages(commitHistoryLimit)
	if err != nil {
		return nil, fmt.Errorf("read commit messages: %w", err)
	}
	for _, m := range msgs {
		t := parseTrailers(m)
		if t[TrailerRun] == runID && t[TrailerPhase] != "" {
			done[t[TrailerPhase]] = true
		}
	}
	return done, nil
}

// gc packs loose objects with `git gc --auto` when git is installed; without git it is
// skipped (go-git's repack rewrites every object, too slow to run nightly on a big repo).
func (r *Runner) gc(ctx context.Context) string {
	if r.opts.NoGC {
		return "skipped: disabled"
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return "skipped: git not installed"
	}
	cmd := exec.CommandContext(ctx, git, "-C", r.dir, "gc", "--auto", "--quiet")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.log.Warn("git gc --auto failed", "err", err, "output", strings.TrimSpace(string(out)))
		return "failed: " + err.Error()
	}
	return "ran"
}
