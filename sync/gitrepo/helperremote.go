package gitrepo

// Remotes reached through git's remote helpers (sync/remotehelper): the fetch, the look and
// the push of such a remote run the git binary instead of memd's own transports; the rest of
// the round (the tree checks of what came in, the merge, the push retries) is the same.

import (
	"context"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
	"github.com/memd-dev/memd/sync/remotehelper"
)

// helperLocked is the remote helper ro.Remote goes through, by its URL as configured and
// remote.<name>.vcs (remotehelper.For), nil when memd reaches it itself. Nothing here parses
// the address: a `gcrypt::` remote never reaches memd's dialers. Caller holds r.mu.
func (r *Repo) helperLocked(ro RemoteOptions) *remotehelper.Remote {
	cfg, err := r.repo.Config()
	if err != nil || cfg.Raw == nil {
		return nil
	}
	sub := cfg.Raw.Section("remote").Subsection(ro.Remote)
	url := ""
	if urls := sub.Options.GetAll("url"); len(urls) > 0 {
		url = urls[0]
	}
	return r.helperAt(ro, url, sub.Options.Get("vcs"))
}

// helperAt is the helper remote for url (one git's insteadOf made, too) and vcs, nil if none.
func (r *Repo) helperAt(ro RemoteOptions, url, vcs string) *remotehelper.Remote {
	h := remotehelper.For(url, vcs)
	if h == "" {
		return nil
	}
	var deny []string
	if ro.TokenEnv != "" {
		deny = []string{ro.TokenEnv}
	}
	return &remotehelper.Remote{Dir: r.dir, Name: ro.Remote, URL: url, Helper: h, Deny: deny, Timeout: ro.Timeout}
}

// RemoteHelper names the helper the remote goes through ("" = memd reaches it itself).
func (r *Repo) RemoteHelper(ro RemoteOptions) string {
	ro = ro.withDefaults()
	r.mu.Lock()
	defer r.mu.Unlock()
	if hr := r.helperLocked(ro); hr != nil {
		return hr.Helper
	}
	return ""
}

// fetchHelperLocked is fetch through the helper: `git fetch` writes the objects and the
// tracking ref, and memd's object store is told of the new packs; the caller vets the tree
// before anything is merged or checked out, as for any fetch (planIntegrateLocked).
func (r *Repo) fetchHelperLocked(ctx context.Context, ro RemoteOptions, hr *remotehelper.Remote) (plumbing.Hash, error) {
	track := r.trackingRef(ro)
	found, err := hr.Fetch(ctx, r.opts.Branch)
	r.syncPacksLocked() // git's packs, which memd's store has not listed yet
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if !found {
		// An empty remote: the first push makes the branch; no stale tracking ref is kept.
		_ = r.repo.Storer.RemoveReference(track)
		return plumbing.ZeroHash, nil
	}
	r.consolidatePacksLocked(ctx)
	h, err := gitstore.ReadRef(r.commonDir, track.String())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s: %w", ro.Remote, err)
	}
	return h, nil
}

// remoteHeadHelper is RemoteHead through the helper (`git ls-remote`).
func (r *Repo) remoteHeadHelper(ctx context.Context, hr *remotehelper.Remote) (plumbing.Hash, error) {
	s, err := hr.Head(ctx, r.opts.Branch)
	if err != nil || s == "" {
		return plumbing.ZeroHash, err
	}
	return plumbing.NewHash(s), nil
}

// pushHelperLocked is push through the helper (`git push`, never forced). Caller holds r.mu,
// so no memd job writes objects or refs meanwhile.
//
// git refuses a helper's push that is not a fast-forward only when it has the remote's old
// commit; one it has never fetched (another machine's, pushed since this round's fetch) it
// lets through, and git-remote-gcrypt then replaces the branch ("this push implicitly has
// --force"). So the branch is looked at first: moved since the fetch, the push is not made
// (a lost race: the round fetches, merges and pushes again). The moment between that look
// and the helper's write stays open (gcrypt has no compare-and-swap); a commit lost there is
// still on the branch of the machine that made it, whose next look finds the remote moved
// and merges and pushes it again.
func (r *Repo) pushHelperLocked(ctx context.Context, ro RemoteOptions, hr *remotehelper.Remote, local plumbing.Hash) error {
	expect, err := gitstore.ReadRef(r.commonDir, r.trackingRef(ro).String())
	if err != nil {
		expect = plumbing.ZeroHash // no tracking ref: the remote had no branch at the fetch
	}
	head, err := r.remoteHeadHelper(ctx, hr)
	if err != nil {
		return err
	}
	if head != expect {
		return fmt.Errorf("push %s: %w (%w)", ro.Remote, errRemoteMovedUnasked, gitremote.ErrPushRejected)
	}
	if err := hr.Push(ctx, local.String(), r.opts.Branch); err != nil {
		return err
	}
	return r.pushedLocked(ro, local)
}
