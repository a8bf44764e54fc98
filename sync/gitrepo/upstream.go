package gitrepo

import (
	"fmt"

	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// SetUpstream makes remote's branch the upstream of the local branch (branch.<b>.remote and
// branch.<b>.merge), as `git clone` does, so a plain `git pull`, `git push` and the
// ahead/behind of `git status` work beside memd. An upstream the user already set is kept
// (set is false then).
func (r *Repo) SetUpstream(remote string) (set bool, err error) {
	if remote == "" {
		remote = DefaultRemote
	}
	branch := r.opts.Branch
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.repo.Config()
	if err != nil {
		return false, fmt.Errorf("set upstream of %s: read config: %w", branch, err)
	}
	if b, ok := cfg.Branches[branch]; ok && b.Remote != "" && b.Merge != "" {
		return false, nil
	}
	cfg.Branches[branch] = &config.Branch{Name: branch, Remote: remote, Merge: plumbing.NewBranchReferenceName(branch)}
	if err := r.repo.SetConfig(cfg); err != nil {
		return false, fmt.Errorf("set upstream of %s to %s/%s: %w", branch, remote, branch, err)
	}
	return true, nil
}
