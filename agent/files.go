package agent

import "github.com/memd-dev/memd/internal/repofiles"

// files returns the ignore rules in force for the committer, reconcile, the inventory and
// sleep: one Ignorer, built once per config load (New, doReload) and shared with the
// watcher. When the watcher has replaced it since (a .gitignore changed), its rules are
// adopted here, so the committer never works from older rules than the watcher's.
// Owner goroutine only.
func (a *Agent) files() *repofiles.Ignorer {
	if a.watch != nil {
		if ig := a.watch.Ignorer(); ig != a.ignorer {
			a.ignorer = ig
			a.repo.SetIgnore(ig.Ignored)
		}
	}
	return a.ignorer
}

// setFiles hands a reload's rules to every consumer at once.
func (a *Agent) setFiles(ig *repofiles.Ignorer) {
	a.ignorer = ig
	a.repo.SetIgnore(ig.Ignored)
	if a.watch != nil {
		a.watch.SetIgnore(ig)
	}
}

// rereadGlobalExcludes builds the rules again when the user's global excludes file (git's
// core.excludesFile) changed since they were read: one stat, at every reconcile.
func (a *Agent) rereadGlobalExcludes() {
	ig := a.files()
	if !ig.ExcludesChanged() {
		return
	}
	n, err := ig.Reload()
	if err != nil {
		a.log.Warn("global git excludes changed; rules not read again", "err", err)
		return
	}
	a.log.Info("global git excludes changed; ignore rules read again")
	a.setFiles(n)
}
