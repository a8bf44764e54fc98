// Package gitrepair finds and heals what a crash of git, or of the machine, leaves in a
// repo's git directory (docs/ARCHITECTURE.md §9.7): empty,
// truncated or corrupt loose objects and packs, a corrupt index, an empty or broken HEAD, a
// branch ref naming a missing commit, stale lock files. A bad file is moved aside into
// <git-dir>/memd/quarantine/<time>/ (never deleted); what it held is fetched again from the
// remote or rebuilt from the work tree; the work tree is never touched. What cannot be
// healed (a commit only this machine had, gone) is ErrLost, named.
//
// It works on the git directory before any other part of memd opens it (go-git cannot open
// a repo whose HEAD is empty), and asks the git binary for what git does best: fetching by
// object id, hashing a work tree file as `git add` would, rebuilding the index as `git
// reset` does.
package gitrepair
