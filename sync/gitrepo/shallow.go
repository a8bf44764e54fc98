package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd/sync/gitremote"
)

// divergenceLocked is gitremote.Divergence of local and remote; in a shallow clone whose
// history is cut above the merge base it deepens the clone as `git fetch --deepen` would
// (gitremote.Deepen: 16, 32, 64 … commits below the graft points; --unshallow once a deepen
// moves nothing) and asks again, so a merge in a `--depth 1` clone finds its base instead of
// failing on a missing commit at every sync. Caller holds r.mu.
func (r *Repo) divergenceLocked(ro RemoteOptions, local, remote plumbing.Hash) (ahead, behind int, bases []*object.Commit, err error) {
	ro = ro.withDefaults()
	by := gitremote.DeepenStep
	for {
		ahead, behind, bases, err = gitremote.Divergence(r.repo.Storer, local, remote)
		if !errors.Is(err, gitremote.ErrShallow) || by < 0 {
			return ahead, behind, bases, err
		}
		before, _ := os.ReadFile(r.layout.Path("shallow"))
		r.log.Info("deepening the shallow clone to find the merge base", "repo", r.dir, "by", by)
		if derr := gitremote.Deepen(context.Background(), r.dir, ro.Remote, r.BranchRef().String(), by, ro.Timeout); derr != nil {
			return 0, 0, nil, fmt.Errorf("%w (deepen from %s: %w)", err, ro.Remote, derr)
		}
		r.syncPacksLocked()
		after, _ := os.ReadFile(r.layout.Path("shallow"))
		switch {
		case by == 0:
			by = -1 // unshallowed: the last ask
		case bytes.Equal(before, after):
			by = 0 // the deepen moved nothing: fetch the whole history once
		default:
			by *= 2
		}
	}
}

// shallow reports a shallow clone (.git/shallow lists graft points).
func (r *Repo) shallow() bool {
	fi, err := os.Stat(r.layout.Path("shallow"))
	return err == nil && fi.Size() > 0
}

// completeShallowFetchLocked brings, by asking the git binary to fetch remote's branch (no
// ref moved), what memd's fetch left out of a shallow clone: the remote took the clone's
// graft points for history it has (memd's fetch sends no shallow lines), so a history
// rewritten below them came without its parents. git's fetch says it is shallow and gets
// them, as `git pull` would. Caller holds r.mu.
func (r *Repo) completeShallowFetchLocked(ctx context.Context, track plumbing.ReferenceName) error {
	remote := strings.TrimSuffix(strings.TrimPrefix(track.String(), "refs/remotes/"), "/"+r.opts.Branch)
	r.log.Info("completing the shallow clone's fetch with git", "repo", r.dir, "remote", remote)
	if err := gitremote.GitFetch(ctx, r.dir, remote, r.BranchRef().String(), DefaultNetworkTimeout); err != nil {
		return fmt.Errorf("shallow clone: %w", err)
	}
	r.syncPacksLocked()
	return nil
}
