package githooks

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Commit is one commit about to be made, as its hooks see it.
type Commit struct {
	Message string
	// WriteIndex writes an index holding exactly the commit's tree (the hooks'
	// GIT_INDEX_FILE); called only when a hook will run.
	WriteIndex func(w io.Writer) error
	// Env is what git sets beside GIT_INDEX_FILE: GIT_AUTHOR_NAME, _EMAIL, _DATE.
	Env []string
}

// Before reports whether any hook runs before a commit (pre-commit, prepare-commit-msg,
// commit-msg): a repo without them pays a few stats and nothing else.
func (r *Runner) Before() bool {
	if r == nil {
		return false
	}
	d := r.Dir()
	if _, err := os.Stat(d); err != nil {
		return false // no hooks directory: one stat
	}
	return r.has(d, PreCommit) || r.has(d, PrepareCommitMsg) || r.has(d, CommitMsg)
}

// BeforeCommit runs pre-commit, prepare-commit-msg (source "message", as `git commit -m`)
// and commit-msg as `git commit -m` does, in that order, each with GIT_INDEX_FILE naming a
// temporary index of the commit's tree and GIT_EDITOR=:, and returns the message as the
// hooks left it, cleaned up as git's default for -m ("whitespace"). A refusal (any of the
// three failing, or an empty message after them, as git aborts) is a *Refusal.
func (r *Runner) BeforeCommit(ctx context.Context, c Commit) (string, error) {
	if !r.Before() {
		return c.Message, nil
	}
	idx, err := r.tempIndex(c.WriteIndex)
	if err != nil {
		return "", err
	}
	defer os.Remove(idx)
	env := append([]string{"GIT_INDEX_FILE=" + idx, "GIT_EDITOR=:"}, c.Env...)
	if err := r.Run(ctx, PreCommit, nil, Input{Env: env}); err != nil {
		return "", err
	}
	if !r.Has(PrepareCommitMsg) && !r.Has(CommitMsg) {
		return c.Message, nil
	}
	msgFile := filepath.Join(r.gitDir, "COMMIT_EDITMSG")
	if err := os.WriteFile(msgFile, []byte(c.Message), 0o644); err != nil {
		return "", fmt.Errorf("commit message file for the hooks: %w", err)
	}
	arg := r.argPath(msgFile)
	if err := r.Run(ctx, PrepareCommitMsg, []string{arg, "message"}, Input{Env: env}); err != nil {
		return "", err
	}
	if err := r.Run(ctx, CommitMsg, []string{arg}, Input{Env: env}); err != nil {
		return "", err
	}
	b, err := os.ReadFile(msgFile)
	if err != nil {
		return "", fmt.Errorf("commit message after the hooks: %w", err)
	}
	msg := CleanupWhitespace(string(b))
	if msg == "" {
		return "", &Refusal{Hook: CommitMsg, Line: "Aborting commit due to empty commit message.", Err: ErrRefused}
	}
	return msg, nil
}

// AfterCommit runs post-commit (its exit status is ignored, as git ignores it) with
// GIT_INDEX_FILE naming the repo's index. The error is for the log.
func (r *Runner) AfterCommit(ctx context.Context, env []string) error {
	if !r.Has(PostCommit) {
		return nil
	}
	return r.Run(ctx, PostCommit, nil, Input{Env: append([]string{"GIT_INDEX_FILE=" + filepath.Join(r.gitDir, "index"), "GIT_EDITOR=:"}, env...)})
}

// tempIndex writes the commit's index beside the repo's own (as git's
// next-index-<pid>.lock), so a hook's `git diff --cached` sees what the commit holds.
func (r *Runner) tempIndex(write func(io.Writer) error) (string, error) {
	f, err := os.CreateTemp(r.gitDir, "memd-hook-index-*")
	if err != nil {
		return "", fmt.Errorf("index for the commit hooks: %w", err)
	}
	if write != nil {
		err = write(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("index for the commit hooks: %w", err)
	}
	return f.Name(), nil
}

// argPath is path as git names it to a hook: relative to the work tree root when inside
// it (".git/COMMIT_EDITMSG"), else absolute.
func (r *Runner) argPath(path string) string {
	if rel, err := filepath.Rel(r.workTree, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return path
}

// CleanupWhitespace is git's "whitespace" message cleanup (git commit -m's default):
// trailing whitespace off every line, runs of blank lines made one, leading and trailing
// blank lines dropped; the result ends in one newline ("" when nothing is left).
func CleanupWhitespace(s string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \t\r\v\f")
		if l == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
			blank = false
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}
