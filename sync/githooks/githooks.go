// Package githooks runs a repo's own git hooks (githooks(5)) the way git runs them around
// the same operation: the hooks directory git resolves (core.hooksPath, else
// <git-dir>/hooks), only executable files, in the work tree root, with git's arguments,
// stdin and environment for that hook (GIT_INDEX_FILE for the commit hooks, GIT_PREFIX
// empty), the user's environment less memd's own (no MEMD_* variable, never the push
// token: procgroup.ScrubEnv). It is memd's counterpart of `git commit`'s and `git push`'s
// hook calls; sync/gitrepo decides when, this package how.
//
// (memd's own config hooks, `hooks: {after_sync: …}`, are the root hooks/ package; this
// one is git's.)
package githooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/internal/procgroup"
	"github.com/memd-dev/memd/internal/textsafe"
)

// The hooks memd runs, by git's names.
const (
	PreCommit        = "pre-commit"
	PrepareCommitMsg = "prepare-commit-msg"
	CommitMsg        = "commit-msg"
	PostCommit       = "post-commit"
	PrePush          = "pre-push"
	PostMerge        = "post-merge"
	PostCheckout     = "post-checkout"
)

// ErrRefused is a hook that exited non-zero where git stops the operation (pre-commit,
// commit-msg, pre-push); the error is a *Refusal.
var ErrRefused = errors.New("refused by the repo's git hook")

// Refusal is one hook's refusal: its name and its last stderr line (else stdout's),
// escaped for a status line.
type Refusal struct {
	Hook string
	Line string
	Err  error // the exit
}

func (e *Refusal) Error() string {
	if e.Line == "" {
		return fmt.Sprintf("git hook %s refused (%v)", e.Hook, e.Err)
	}
	return fmt.Sprintf("git hook %s refused: %s", e.Hook, e.Line)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *Refusal) Is(target error) bool { return target == ErrRefused }

// Unwrap is the exit error.
func (e *Refusal) Unwrap() error { return e.Err }

// Timeouts: git has none; memd's owner loop must not wait for ever on a hung hook.
// pre-push may upload (git-lfs), so it gets longer.
var (
	hookTimeout    = 5 * time.Minute
	prePushTimeout = 30 * time.Minute
)

const lineBytes = 300 // of a refusal's last line

// noVerify are the hooks `git commit --no-verify` and `git push --no-verify` skip.
var noVerify = map[string]bool{PreCommit: true, CommitMsg: true, PrePush: true}

// Runner runs one repo's hooks. Safe for concurrent use.
type Runner struct {
	workTree, gitDir string
	verify           bool     // commit.hooks: false = --no-verify
	deny             []string // sync.token_env: never in a hook's environment
	stamp            func() string

	mu       sync.Mutex
	cfgStamp string // stamp the hooks dir was resolved at
	dir      string // the hooks directory
}

// New is the runner for the repo at workTree (its git dir gitDir). verify false skips
// the hooks --no-verify skips. tokenEnv is sync.token_env. configStamp changes whenever
// a git config file git reads for the repo changes (then core.hooksPath is read again);
// nil reads it once.
func New(workTree, gitDir string, verify bool, tokenEnv string, configStamp func() string) *Runner {
	if configStamp == nil {
		configStamp = func() string { return "" }
	}
	var deny []string
	if tokenEnv != "" {
		deny = []string{tokenEnv}
	}
	return &Runner{workTree: workTree, gitDir: gitDir, verify: verify, deny: deny, stamp: configStamp}
}

// Dir is the hooks directory git uses for the repo now.
func (r *Runner) Dir() string {
	if r == nil {
		return ""
	}
	s := r.stamp()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.dir == "" || s != r.cfgStamp {
		r.dir, r.cfgStamp = hooksDir(r.workTree, r.gitDir), s
	}
	return r.dir
}

// hooksDir is core.hooksPath as `git config --path` reads it in workTree (relative to the
// work tree root, where git runs hooks), else the hooks dir of the common git dir (a linked
// worktree shares its main one's, internal/gitlayout).
func hooksDir(workTree, gitDir string) string {
	def := filepath.Join(gitDir, "hooks")
	l, err := gitlayout.Resolve(workTree)
	if err == nil {
		def = l.Path("hooks")
		// The process's one read of git's config (gitconfig.ForRepo) answers unless the
		// value needs git itself to expand it (%(prefix)/).
		if kv, err := gitconfig.ForRepo(context.Background(), l); err == nil {
			v, set := kv.Last("core.hookspath")
			if !set || v == "" {
				return def
			}
			if p, ok := gitconfig.Path(v); ok {
				if !filepath.IsAbs(p) {
					p = filepath.Join(workTree, p)
				}
				return p
			}
		}
	}
	bin, err := exec.LookPath("git")
	if err != nil {
		return def
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "config", "--path", "--get", "core.hooksPath")
	cmd.Dir = workTree
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	v := strings.TrimRight(string(out), "\r\n")
	if err != nil || v == "" {
		return def
	}
	if !filepath.IsAbs(v) {
		v = filepath.Join(workTree, v)
	}
	return v
}

// Has says whether the hook name would run: an executable file in the hooks directory,
// and not one --no-verify skips when verify is off. A repo without a hooks directory
// costs one stat.
func (r *Runner) Has(name string) bool {
	if r == nil {
		return false
	}
	return r.has(r.Dir(), name)
}

func (r *Runner) has(dir, name string) bool {
	if !r.verify && noVerify[name] {
		return false
	}
	fi, err := os.Stat(filepath.Join(dir, name))
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Input is what one run of a hook gets beside its arguments.
type Input struct {
	Stdin []byte   // nil: /dev/null
	Env   []string // added to the user's environment (GIT_INDEX_FILE=…)
}

// Run runs the hook name with args if it exists (Has); a missing hook is no error. A
// non-zero exit is a *Refusal (errors.Is ErrRefused) whatever the hook: the caller
// decides whether git would stop there.
func (r *Runner) Run(ctx context.Context, name string, args []string, in Input) error {
	if !r.Has(name) {
		return nil
	}
	timeout := hookTimeout
	if name == PrePush {
		timeout = prePushTimeout
	}
	o := procgroup.Options{Dir: r.workTree, Env: r.env(in.Env), Timeout: timeout,
		MaxOutput: 1 << 20, StderrKeep: 1 << 12, StderrTail: 4 * lineBytes}
	if in.Stdin != nil {
		o.Stdin = bytes.NewReader(in.Stdin)
	}
	res := procgroup.Run(ctx, append([]string{filepath.Join(r.Dir(), name)}, args...), o)
	if res.Err == nil {
		return nil
	}
	if errors.Is(res.Err, procgroup.ErrTimeout) || ctx.Err() != nil {
		// Not the hook's verdict: the commit or push fails and is tried again later, no
		// path is held for a hook that never answered.
		return fmt.Errorf("git hook %s: %w", name, res.Err)
	}
	line := textsafe.Line(string(res.Tail), lineBytes)
	if line == "" {
		line = textsafe.Line(string(res.Output), lineBytes)
	}
	return &Refusal{Hook: name, Line: line, Err: res.Err}
}

// env is the user's environment as git hands it to a hook: memd's own variables and
// token out (procgroup.ScrubEnv), what git sets for the operation in (extra), GIT_PREFIX
// empty (git runs hooks from the work tree root).
func (r *Runner) env(extra []string) []string {
	environ := os.Environ()
	var allow []string
	for _, kv := range environ {
		n, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(n, "MEMD_"), n == "GIT_INDEX_FILE", n == "GIT_PREFIX", n == "GIT_DIR", n == "GIT_WORK_TREE":
			continue
		}
		allow = append(allow, n)
	}
	env := procgroup.ScrubEnv(environ, allow, r.deny)
	return append(append(env, "GIT_PREFIX="), extra...)
}
