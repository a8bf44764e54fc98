// Package repofiles is the one definition of the files of a memory repo: which paths are
// ignored (Ignorer: .gitignore files, .git/info/exclude, git's core.excludesFile, memd's DefaultIgnore and
// watch.ignore) and how the tree is walked (Walk: never into .git, an ignored directory, a
// nested repository or through a symlink; only regular files and symlinks are files).
// Which of those files are memories is the model's rule (memd.IsNonMemory,
// memd.ValidMemoryPath) and stays in the root package.
//
// The committer and reconcile (sync), doctor, the agent's inventory, the watcher and
// sleep all import it, so it sits below every one of them: it imports only the root model
// (and go-git's gitignore pattern matcher). It lived in watcher/ before, which made
// sync, doctor and sleep write their own walks rather than import the watcher. It is under
// internal/ because it is memd's own plumbing, not an API for other modules, beside
// internal/safefs (how memd writes into the tree), its counterpart for writing.
//
// One Ignorer is built per (re)load of the config and handed to every consumer; the
// watcher builds the next one (Reload, Extend) when a .gitignore changes and the agent
// adopts it. See docs/ARCHITECTURE.md ("What is a file of the repo").
package repofiles
