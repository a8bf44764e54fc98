// Package hooks runs the commands a user configures under hooks: (docs/ARCHITECTURE.md §7) after a step of
// memd moved HEAD — a sync that brought commits, a sleep that committed, a commit of writers'
// changes — so the tools that read the repo (memhtml's index, a webhook) follow it.
//
// A hook is argv without a shell, run in the repo's directory in its own process group, with
// MEMD_HOOK, MEMD_REPO, MEMD_OLD_HEAD, MEMD_NEW_HEAD, MEMD_CHANGED_FILE (a temporary file
// listing the changed paths, each NUL-terminated: a path may hold a newline) and
// MEMD_CHANGED_FORMAT=nul in an environment scrubbed to procgroup.BaseEnv and hooks.env
// (never the push token). The list covers every change since the hook's last success
// (pending.go). Its stdout and stderr are kept up to MaxOutputBytes for the log; more, or a
// run past the timeout, kills it with every descendant (procgroup). A failing hook is
// reported (the Done callback, a log line, the last line of its stderr) and never fails the
// step.
//
// The Runner is what `memd run` uses: Notify never blocks, each hook runs on its own
// goroutine off the owner loop and outside the writer lock, and notifications that arrive
// while a hook runs coalesce into one more run spanning all of them (old HEAD of the first,
// new HEAD of the last). One-shot commands call Run, which waits.
package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/procgroup"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/internal/textsafe"
)

// ChangedFormat is MEMD_CHANGED_FORMAT: how MEMD_CHANGED_FILE separates paths.
const ChangedFormat = "nul"

// stderrLineBytes caps the last line of a failed hook's stderr in its status warning.
const stderrLineBytes = 200

// MaxOutputBytes caps what a hook may print on stdout and stderr together; a hook that
// prints more is killed and reported, so a runaway command cannot fill memd's memory.
const MaxOutputBytes = 1 << 20

// logOutputBytes is how much of a hook's output goes into its log line.
const logOutputBytes = 4 << 10

// ErrOutputTooLarge is a hook that printed more than MaxOutputBytes.
var ErrOutputTooLarge = errors.New("output over 1 MiB; killed")

// ErrTimeout is a hook still running at hooks.timeout.
var ErrTimeout = errors.New("timed out; killed with its process group")

// Result is one run of one hook.
type Result struct {
	Hook     string // after_sync, after_sleep, after_commit
	Argv     []string
	Old, New string // the HEAD range the run covered
	Changed  int    // paths listed in MEMD_CHANGED_FILE
	Output   string // stdout and stderr as they came, at most MaxOutputBytes
	Duration time.Duration
	Status   string // memd.HookOK, memd.HookError, memd.HookTimeout
	Err      error  // names the hook key (hooks.after_sync) and the command
	// StderrLine is the last line of stderr, escaped and capped (textsafe.Line); a failed
	// run's Err ends with it, so the status says why, not only "exit status 1".
	StderrLine string
}

// ChangedFunc lists the paths that differ between two commits (sync.Repo.ChangedPaths).
type ChangedFunc func(oldHead, newHead string) ([]string, error)

// Options wires a Runner.
type Options struct {
	Dir     string // the repo: the hooks' working directory and MEMD_REPO
	TempDir string // where MEMD_CHANGED_FILE is written ("" = os.TempDir()); memd: .git/memd
	Config  memd.HooksConfig
	Changed ChangedFunc // nil: MEMD_CHANGED_FILE lists nothing
	// TokenEnv is sync.token_env: never passed on, even if hooks.env names it.
	TokenEnv string
	Logger   *slog.Logger
	// Done is called after each run on the hook's goroutine (memd run: a metric and a kick
	// of the owner); it must not block.
	Done func(Result)
}

// Runner runs hooks off the caller's goroutine, one at a time per hook, coalescing.
type Runner struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	cfg     memd.HooksConfig
	slots   map[string]*slot
	active  int // hooks running or about to
	idle    *sync.Cond
	closing bool

	pmu sync.Mutex         // pending records (pending.go)
	mem map[string]pending // pending records when there is no state dir (TempDir "")
}

// slot is one hook's queue: at most one run in flight and one range waiting.
type slot struct {
	running bool
	pending *span
}

type span struct{ old, new string }

// NewRunner builds a Runner; nothing runs until Notify.
func NewRunner(opts Options) *Runner {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	r := &Runner{opts: opts, log: opts.Logger, cfg: opts.Config, slots: map[string]*slot{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.idle = sync.NewCond(&r.mu)
	return r
}

// SetConfig replaces the hooks (a reload); a run in flight finishes with the old command.
func (r *Runner) SetConfig(cfg memd.HooksConfig) {
	r.mu.Lock()
	r.cfg = cfg
	r.mu.Unlock()
}

// Configured reports whether hook has a command, so a caller can skip reading HEAD.
func (r *Runner) Configured(hook string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.cfg.Argv(hook)) > 0
}

// Notify asks for hook to run over the HEAD range oldHead..newHead. It never blocks. Nothing
// runs when HEAD did not move or the hook has no command. While the hook runs, further
// notifications widen one waiting range, so a burst costs one more run, not one per step.
func (r *Runner) Notify(hook, oldHead, newHead string) bool {
	if oldHead == newHead {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing || len(r.cfg.Argv(hook)) == 0 {
		return false
	}
	s := r.slots[hook]
	if s == nil {
		s = &slot{}
		r.slots[hook] = s
	}
	if s.pending == nil {
		s.pending = &span{old: oldHead, new: newHead}
	} else {
		s.pending.new = newHead
	}
	if !s.running {
		s.running = true
		r.active++
		go r.loop(hook, s)
	}
	return true
}

// loop runs hook until its slot has nothing waiting.
func (r *Runner) loop(hook string, s *slot) {
	for {
		r.mu.Lock()
		p := s.pending
		s.pending = nil
		if p == nil || r.ctx.Err() != nil {
			s.running = false
			r.active--
			r.idle.Broadcast()
			r.mu.Unlock()
			return
		}
		cfg := r.cfg
		r.mu.Unlock()
		if p.old == p.new { // moved and moved back within one burst
			continue
		}
		res, ran := r.run(r.ctx, cfg, hook, p.old, p.new)
		if ran && r.opts.Done != nil {
			r.opts.Done(res)
		}
	}
}

// Run runs hook over oldHead..newHead now and waits for it (the one-shot commands). ran is
// false when HEAD did not move or the hook has no command.
func (r *Runner) Run(ctx context.Context, hook, oldHead, newHead string) (res Result, ran bool) {
	if oldHead == newHead {
		return Result{}, false
	}
	r.mu.Lock()
	cfg := r.cfg
	r.mu.Unlock()
	return r.run(ctx, cfg, hook, oldHead, newHead)
}

func (r *Runner) run(ctx context.Context, cfg memd.HooksConfig, hook, oldHead, newHead string) (Result, bool) {
	argv := cfg.Argv(hook)
	if len(argv) == 0 {
		return Result{}, false
	}
	var changed []string
	if r.opts.Changed != nil {
		var err error
		if changed, err = r.opts.Changed(oldHead, newHead); err != nil {
			// The hook still runs: most (memhtml index update) do not read the list.
			r.log.Warn("hook: cannot list the changed paths; MEMD_CHANGED_FILE lists only earlier runs'", "hook", hook, "err", err)
			changed = nil
		}
	}
	// What failed runs were not told about comes first, and their old HEAD.
	pend := r.loadPending(hook)
	if pend.Old != "" {
		oldHead = pend.Old
	}
	changed = union(pend.Paths, changed)
	res := Exec(ctx, Spec{Hook: hook, Argv: argv, Dir: r.opts.Dir, TempDir: r.opts.TempDir, Timeout: cfg.Timeout.D(),
		OldHead: oldHead, NewHead: newHead, Changed: changed, AllowEnv: cfg.Env, DenyEnv: []string{r.opts.TokenEnv}})
	if res.Err != nil {
		r.savePending(hook, pending{Old: oldHead, Paths: changed})
	} else {
		r.savePending(hook, pending{})
	}
	r.logResult(res)
	return res, true
}

func (r *Runner) logResult(res Result) {
	attrs := []any{"hook", res.Hook, "argv", res.Argv, "old", short(res.Old), "new", short(res.New),
		"changed", res.Changed, "took", res.Duration.Round(time.Millisecond)}
	if out := logOutput(res.Output); out != "" {
		attrs = append(attrs, "output", out)
	}
	if res.Err != nil {
		r.log.Warn("hook failed", append(attrs, "result", res.Status, "err", res.Err)...)
		return
	}
	r.log.Info("hook ran", attrs...)
}

// Wait blocks until no hook is running or waiting, or ctx is done.
func (r *Runner) Wait(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.idle.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.active > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.idle.Wait()
	}
	return nil
}

// Busy reports whether a hook is running or waiting.
func (r *Runner) Busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active > 0
}

// Close stops taking notifications, gives running and waiting hooks up to grace to finish,
// then kills what still runs (its process group) and drops what waits.
func (r *Runner) Close(grace time.Duration) {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if r.Wait(ctx) != nil {
		r.log.Warn("stopping: killing hooks still running", "grace", grace)
	}
	r.cancel()
	_ = r.Wait(context.Background())
}

// Spec is one hook run.
type Spec struct {
	Hook             string
	Argv             []string
	Dir              string
	TempDir          string // for MEMD_CHANGED_FILE; "" = os.TempDir()
	Timeout          time.Duration
	OldHead, NewHead string
	Changed          []string
	AllowEnv         []string // hooks.env: names passed on besides procgroup.BaseEnv
	DenyEnv          []string // sync.token_env: never passed on
}

// Exec runs one hook and waits for it: argv literally (no shell), in Dir, in its own
// process group, which is killed when the run ends, at the timeout, when ctx is done or when
// the output passes MaxOutputBytes. The error names the hook key and the command.
func Exec(ctx context.Context, s Spec) Result {
	start := time.Now()
	res := Result{Hook: s.Hook, Argv: s.Argv, Old: s.OldHead, New: s.NewHead, Changed: len(s.Changed), Status: memd.HookOK}
	fail := func(status string, err error) Result {
		res.Status = status
		res.Err = fmt.Errorf("hooks.%s %s: %w", s.Hook, quoteArgv(s.Argv), err)
		res.Duration = time.Since(start)
		return res
	}
	if len(s.Argv) == 0 || strings.TrimSpace(s.Argv[0]) == "" {
		return fail(memd.HookError, errors.New("no command"))
	}
	list, err := writeChanged(s.TempDir, s.Hook, s.Changed)
	if err != nil {
		return fail(memd.HookError, err)
	}
	defer os.Remove(list)

	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	env := append(procgroup.ScrubEnv(os.Environ(), s.AllowEnv, s.DenyEnv),
		"MEMD_HOOK="+s.Hook, "MEMD_REPO="+s.Dir, "MEMD_OLD_HEAD="+s.OldHead,
		"MEMD_NEW_HEAD="+s.NewHead, "MEMD_CHANGED_FILE="+list, "MEMD_CHANGED_FORMAT="+ChangedFormat)
	// Stdin /dev/null: a hook never waits on memd's terminal. stdout and stderr as they came.
	run := procgroup.Run(ctx, s.Argv, procgroup.Options{Dir: s.Dir, Env: env, Timeout: timeout,
		MaxOutput: MaxOutputBytes, MergeStderr: true, StderrTail: 4 * stderrLineBytes})
	res.Output = string(run.Output)
	res.StderrLine = textsafe.Line(string(run.Tail), stderrLineBytes)
	switch {
	case run.Err == nil:
	case errors.Is(run.Err, procgroup.ErrOutputTooLarge):
		return fail(memd.HookError, ErrOutputTooLarge)
	case errors.Is(run.Err, procgroup.ErrTimeout):
		return fail(memd.HookTimeout, fmt.Errorf("%w after %s", ErrTimeout, timeout))
	case ctx.Err() != nil:
		return fail(memd.HookError, fmt.Errorf("stopped: %w", context.Cause(ctx)))
	case res.StderrLine != "":
		return fail(memd.HookError, fmt.Errorf("%w: %s", run.Err, res.StderrLine))
	default:
		return fail(memd.HookError, run.Err)
	}
	res.Duration = time.Since(start)
	return res
}

// writeChanged writes the changed paths, each NUL-terminated (a tree entry's name may hold a
// newline, never a NUL: a list one path per line could be forged), to a temporary file in
// dir, which is never in the work tree (there the file would be a change to commit). memd uses .git/memd:
// writable under the hardened service unit, where /tmp may not be.
func writeChanged(dir, hook string, paths []string) (string, error) {
	var f *os.File
	var err error
	if dir != "" {
		// The state dir: made through statedir, so a symlinked .git/memd is refused.
		var d *statedir.Dir
		if d, err = statedir.Create(dir); err == nil {
			f, err = d.CreateScratch("hook-"+hook+"-", ".paths")
			d.Close()
		}
	} else {
		f, err = os.CreateTemp("", "hook-"+hook+"-*.paths")
	}
	if err != nil {
		return "", fmt.Errorf("changed-paths file: %w", err)
	}
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	_, werr := f.Write(b.Bytes())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("changed-paths file %s: %w", f.Name(), werr)
	}
	return f.Name(), nil
}

// logOutput is the output for a log line: trimmed, at most logOutputBytes (the end, where
// an error usually is).
func logOutput(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > logOutputBytes {
		s = "…" + strings.ToValidUTF8(s[len(s)-logOutputBytes:], "")
	}
	return s
}

func quoteArgv(argv []string) string {
	if len(argv) == 0 {
		return "[]"
	}
	return fmt.Sprintf("%q", argv[0])
}

func short(h string) string {
	if len(h) > 10 {
		return h[:10]
	}
	return h
}
