package main

import (
	"context"

	"github.com/memd-dev/memd/hooks"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// oneShotHook is a step of a one-shot command: its hook and HEAD before and after it.
type oneShotHook struct {
	hook, old, new string
}

// runHooks runs, in order and waiting for each, the hooks of the steps that moved HEAD, the
// way `memd run` does (argv, environment, output cap, timeout) but without coalescing: a
// one-shot command is one step. Call it after the writer lock is released. A failing hook is
// a warning on stderr (its log line names the hook key); the exit code stays the step's own.
func (a *app) runHooks(repo *gitrepo.Repo, steps ...oneShotHook) {
	r := hooks.NewRunner(hooks.Options{Dir: a.cfg.Repo, TempDir: a.cfg.StateDir(), Config: a.cfg.Hooks, Changed: repo.ChangedPaths,
		TokenEnv: a.cfg.Sync.TokenEnv, Logger: a.log})
	for _, s := range steps {
		r.Run(context.Background(), s.hook, s.old, s.new)
	}
}

// head is HEAD for a hook range; ok is false when it cannot be read (no hook runs then).
func head(repo *gitrepo.Repo) (h string, ok bool) {
	h, err := repo.Head()
	return h, err == nil
}
