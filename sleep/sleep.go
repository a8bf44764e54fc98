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
//     ctime, inode) and content hash (the caching planner, planner.go), so a night re-reads
//     only the files that changed. No other cache: a night with nothing to do plans the
//     whole tree from it (well under a second at 100k files).
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
	"github.com/memd-dev/memd/internal/commitmsg"
	"github.com/memd-dev/memd/internal/repofiles"
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

// Store is the commit boundary, spelled in the root's vocabulary (memd.CommitResult,
// memd.ErrHeadMoved) so that sleep imports no git package: *gitrepo.Repo satisfies it (the
// agent and the one-shot commands pass one). The interface stays here, with its one consumer.
type Store interface {
	CommitPathsMessage(paths []string, message string, kind memd.CommitKind) (memd.CommitResult, error)
	CommitMessages(limit int) ([]string, error)
}

// Options configure a Runner.
type Options struct {
	// Config supplies sleep, expire, arcs, archive, tidy and lock settings (Repo is ignored:
	// NewRunner's repoDir is the repo).
	Config memd.Config
	// Phases to run; nil means Config.Sleep.Phases. Always run in canonical order.
	Phases []memd.Phase
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
	Ignore repofiles.Rule

	// test hooks
	afterOp func(phase memd.Phase, i int) error // called after each applied op; an error fails the phase
	wallNow func() time.Time                    // the wall clock for the racy rule; nil = time.Now
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
	Name     memd.Phase     `json:"phase"`
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
	Drained map[memd.LifecycleMode]int `json:"drained,omitempty"`
	GC      string                     `json:"gc,omitempty"` // "ran", "skipped: …" or "failed: …"
	Elapsed time.Duration              `json:"elapsed_ns"`
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
	r.Counts, r.Drained = map[string]int{}, map[memd.LifecycleMode]int{}
	for _, p := range r.Phases {
		c := p.Counts
		switch p.Name {
		case memd.PhaseExpire:
			r.Counts[CountExpired] += c["drained"]
			r.Counts[CountArchived] += c[CountArchived]
			r.Counts[CountStale] += c["stale"]
			for k, v := range c {
				if mode, ok := strings.CutPrefix(k, "drained_"); ok {
					r.Drained[memd.LifecycleMode(mode)] += v
				}
			}
		case memd.PhaseArcs:
			r.Counts[CountArcs] += c["created"] + c["updated"]
		case memd.PhaseArchive:
			r.Counts[CountArchived] += c[CountArchived]
			r.Counts[CountLinks] += c["links"] + c["bullets"]
		case memd.PhaseTidy:
			r.Counts[CountRepaired] += c["repaired"]
			r.Counts[CountLinks] += c["links"] + c["bullets"]
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
	dir     string
	store   Store
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	planner planner
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
		r.opts.StateDir = memd.StateDir(repoDir)
	}
	wall := r.opts.wallNow
	if wall == nil {
		wall = time.Now
	}
	plain := plainPlanner{dir: repoDir, ignore: r.opts.Ignore, progress: r.opts.Progress}
	r.planner = cachingPlanner{plainPlanner: plain, stateDir: r.opts.StateDir, wall: wall}
	return r
}

// SelectPhases returns the named phases in canonical order, refusing unknown names
// (memd.ParsePhase's error).
func SelectPhases(names []memd.Phase) ([]memd.Phase, error) {
	want := map[memd.Phase]bool{}
	for _, n := range names {
		p, err := memd.ParsePhase(string(n))
		if err != nil {
			return nil, err
		}
		want[p] = true
	}
	var out []memd.Phase
	for _, p := range memd.SleepPhases {
		if want[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// Run runs the selected phases for runID (RunID(slot) for a scheduled slot): recover what a
// killed run left, read the tree, then plan, apply and commit each phase in turn, and record
// the run. The error is for what stops the whole run (bad phase list, unreadable repo); a
// failing phase is recorded in its PhaseResult and the run goes on.
func (r *Runner) Run(ctx context.Context, runID string) (Report, error) {
	start := time.Now()
	now := r.now()
	rep := Report{RunID: runID, At: now.UTC(), DryRun: r.opts.DryRun}
	phases, err := r.phases()
	if err != nil {
		return rep, err
	}
	done, err := r.recover(ctx, runID)
	if err != nil {
		return rep, err
	}
	snap, err := r.planner.load()
	if err != nil {
		return rep, err
	}
	// A dry run reads the parse cache but writes nothing, not even the cache.
	snap.virtual = r.opts.DryRun
	env := &planEnv{cfg: r.opts.Config, now: now, log: r.log, progress: r.opts.Progress, dryRun: r.opts.DryRun, ctx: ctx}
	for _, ph := range phases {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if done[ph] {
			rep.Phases = append(rep.Phases, PhaseResult{Name: ph, Counts: map[string]int{}, Skipped: true})
			continue
		}
		rep.Phases = append(rep.Phases, r.runPhase(ctx, runID, ph, snap, env))
	}
	if !r.opts.DryRun {
		r.record(ctx, &rep, snap, now)
	}
	rep.summarize()
	rep.Elapsed = time.Since(start)
	return rep, nil
}

// phases is the run's phase list in canonical order.
func (r *Runner) phases() ([]memd.Phase, error) {
	if r.opts.Phases != nil {
		return SelectPhases(r.opts.Phases)
	}
	return SelectPhases(r.opts.Config.Sleep.Phases)
}

// recover clears a stale writer lock, undoes a phase a killed run left half applied, and
// returns the phases already committed for runID (none in a dry run, which touches nothing).
func (r *Runner) recover(ctx context.Context, runID string) (map[memd.Phase]bool, error) {
	if r.opts.DryRun {
		return map[memd.Phase]bool{}, nil
	}
	clearStaleLock(ctx, filepath.Join(r.dir, lockFile(r.opts.Config)), r.log)
	done, err := r.committedPhases(runID)
	if err != nil {
		return nil, err
	}
	if err := r.recoverJournal(runID, done); err != nil {
		return nil, err
	}
	return done, nil
}

// runPhase plans, applies and commits one phase, and logs what it did.
func (r *Runner) runPhase(ctx context.Context, runID string, ph memd.Phase, snap *snapshot, env *planEnv) PhaseResult {
	t0 := time.Now()
	pr := PhaseResult{Name: ph, Counts: map[string]int{}}
	if p, err := r.planner.plan(ph, snap, env); err != nil {
		pr.Err = fmt.Errorf("sleep %s: plan: %w", ph, err)
	} else {
		pr.Counts, pr.Items = p.counts, p.items
		pr.Commit, pr.Err = r.apply(ctx, runID, ph, snap, p)
	}
	pr.Duration = time.Since(t0)
	if pr.Err != nil {
		pr.Error = pr.Err.Error()
		r.log.Error("sleep phase failed", "phase", ph, "run", runID, "err", pr.Err)
		return pr
	}
	// A dry run's plan is its output (the report); the log line would only repeat it.
	level := slog.LevelInfo
	if r.opts.DryRun {
		level = slog.LevelDebug
	}
	r.log.Log(ctx, level, "sleep phase", "phase", ph, "run", runID, "commit", pr.Commit, "counts", countsString(pr.Counts, ","))
	return pr
}

// apply applies p and commits it (a dry run only imagines it in the snapshot), and brings
// the snapshot up to date for the phases after it. A failed apply or commit leaves the tree
// and the snapshot as they were.
func (r *Runner) apply(ctx context.Context, runID string, ph memd.Phase, snap *snapshot, p *plan) (commit string, err error) {
	if len(p.ops) == 0 {
		return "", nil
	}
	if !r.opts.DryRun {
		if commit, err = r.applyAndCommit(ctx, runID, ph, p); err != nil {
			// commit is kept when the commit was made but did not take everything
			// (ErrNotCommitted): the report names both, and the files are on disk as
			// the plan left them, which is what the next phases must plan from.
			if errors.Is(err, ErrNotCommitted) {
				snap.apply(p)
			}
			return commit, fmt.Errorf("sleep %s: %w", ph, err)
		}
	}
	snap.apply(p)
	return commit, nil
}

// record keeps what the run leaves for the next one: the parse cache, each phase's success
// (sleep.json, for catch-up), then packs loose objects.
func (r *Runner) record(ctx context.Context, rep *Report, snap *snapshot, now time.Time) {
	if err := r.planner.keep(snap); err != nil {
		r.log.Warn("cannot write the sleep parse cache", "err", err)
	}
	var succeeded []memd.Phase
	for _, pr := range rep.Phases {
		if !pr.Skipped && pr.Err == nil {
			succeeded = append(succeeded, pr.Name)
		}
	}
	if len(succeeded) > 0 {
		if err := markDone(r.opts.StateDir, succeeded, rep.RunID, now); err != nil {
			r.log.Warn("cannot record sleep state", "err", err)
		}
	}
	rep.GC = r.gc(ctx)
}

// applyAndCommit takes the writer lock, applies p's ops (journalled), commits them, and
// undoes them if anything fails.
func (r *Runner) applyAndCommit(ctx context.Context, runID string, ph memd.Phase, p *plan) (string, error) {
	release, err := acquireWriterLock(ctx, filepath.Join(r.dir, lockFile(r.opts.Config)), r.opts.Config.Lock.Timeout.D(), "memd sleep "+string(ph), r.log)
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
	if err := r.applyOps(ctx, j, ph, p); err != nil {
		return "", j.abort(err, r.log)
	}
	if err := verifyApplied(r.dir, p); err != nil {
		return "", j.abort(err, r.log)
	}
	res, err := r.commit(runID, ph, p)
	if err != nil {
		return "", j.abort(fmt.Errorf("commit: %w", err), r.log)
	}
	j.remove()
	// The commit is made: what it did not take stays on disk for the next commit, and the
	// phase says so rather than report what the commit does not hold.
	return res.Hash, checkCommitted(p, res)
}

// applyOps applies p's ops through the journal and makes the tree's new bytes durable.
func (r *Runner) applyOps(ctx context.Context, j *journal, ph memd.Phase, p *plan) error {
	for i := range p.ops {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := j.apply(i); err != nil {
			return err
		}
		if r.opts.afterOp != nil {
			if err := r.opts.afterOp(ph, i); err != nil {
				return err
			}
		}
		progress(r.opts.Progress, string(ph), i+1, len(p.ops))
	}
	progressDone(r.opts.Progress, len(p.ops))
	// The tree's new bytes durable before the commit names them (a power loss after the
	// commit must not leave HEAD ahead of garbage in the tree).
	return flushFS(r.dir)
}

// commit commits the paths p touched as one sleep commit of phase ph.
func (r *Runner) commit(runID string, ph memd.Phase, p *plan) (memd.CommitResult, error) {
	msg := commitMessage(ph, runID, p.counts)
	for attempt := 0; ; attempt++ {
		res, err := r.store.CommitPathsMessage(p.paths(), msg, memd.CommitSleep)
		// Someone committed between our read of HEAD and the ref update: the retry builds
		// on the new HEAD (our paths are still as we wrote them).
		if errors.Is(err, memd.ErrHeadMoved) && attempt < 2 {
			continue
		}
		return res, err
	}
}

func lockFile(cfg memd.Config) string {
	if cfg.Lock.File == "" {
		return memd.DefaultLockFile
	}
	return cfg.Lock.File
}

// commitMessage is `sleep(<phase>): <counts>` then the trailers.
func commitMessage(ph memd.Phase, runID string, counts map[string]int) string {
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

// commitHistoryLimit bounds how far back resume looks for the run's commits: a run makes at
// most four, and a daemon commits changes in between; a few hundred is plenty.
const commitHistoryLimit = 500

// committedPhases reads which phases are already committed for runID from git log.
func (r *Runner) committedPhases(runID string) (map[memd.Phase]bool, error) {
	done := map[memd.Phase]bool{}
	msgs, err := r.store.CommitMessages(commitHistoryLimit)
	if err != nil {
		return nil, fmt.Errorf("read commit messages: %w", err)
	}
	for _, m := range msgs {
		t := commitmsg.Trailers(m)
		if t[TrailerRun] == runID && t[TrailerPhase] != "" {
			done[memd.Phase(t[TrailerPhase])] = true // as committed; an unknown name matches no phase
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
	// A .rev beside each pack lets memd's pack reader (sync/gitstore) map offsets from the file.
	cmd := exec.CommandContext(ctx, git, "-C", r.dir, "-c", "pack.writeReverseIndex=true", "gc", "--auto", "--quiet")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.log.Warn("git gc --auto failed", "err", err, "output", strings.TrimSpace(string(out)))
		return "failed: " + err.Error()
	}
	return "ran"
}
