package gitrepo

// Syncing with the remote (docs/ARCHITECTURE.md §4): fetch, fast-forward or merge, push.
// Network operations go through go-git's transports (file and local paths,
// http(s), ssh) with a deadline each; none of them can prompt.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
	"github.com/memd-dev/memd/sync/remotehelper"
	"github.com/memd-dev/memd/sync/treemerge"
)

// DefaultRemote is the remote name when RemoteOptions.Remote is empty.
const DefaultRemote = "origin"

// DefaultNetworkTimeout bounds one fetch or push.
const DefaultNetworkTimeout = 60 * time.Second

// MaxSyncAttempts bounds fetch → merge → push rounds when a push is
// rejected because someone else pushed in between. Ten machines pushing at
// once each win a round within a few: every round lets at least one through.
const MaxSyncAttempts = 10

// DefaultPushRetryJitter is the least slot of the random pause before a
// rejected push's next round (retryPause).
const DefaultPushRetryJitter = 50 * time.Millisecond

// maxRetrySlots caps the growth of retryPause's window, in slots, and
// maxRetrySlot the slot: a round slowed by a loaded machine or a slow
// remote does not stretch the pause past a second. Two slots, not more:
// a machine that lost many rounds while the race was crowded should not
// still wait long once it has thinned (in the swarm bench the last
// machines to push spent seconds pausing with four).
const (
	maxRetrySlots = 2
	maxRetrySlot  = 500 * time.Millisecond
)

// retryPause is the pause before round attempt+1 after a push lost the race
// in round attempt, which took round (fetch to rejection): a random share rnd
// in [0,1) of attempt slots (at most maxRetrySlots), a slot being the round's
// own duration (at least jitter, at most maxRetrySlot). Machines that lost
// the same race spread out over a round or two instead of all fetching and
// merging again at once only for one to win: on a loaded machine those
// merges share the CPU, so every contender's round grew with their number.
// The slot follows the round, so a fast remote still retries within
// milliseconds.
func retryPause(attempt int, round, jitter time.Duration, rnd float64) time.Duration {
	slot := min(max(round, jitter), maxRetrySlot)
	if rnd < 0 || rnd >= 1 {
		rnd = 0
	}
	return time.Duration(rnd * float64(slot) * float64(min(max(attempt, 1), maxRetrySlots)))
}

// RemoteOptions say which remote to sync with and how to authenticate.
type RemoteOptions struct {
	Remote string // default "origin"
	// URL, when set, creates the remote or updates its URL first
	// (memd init --remote).
	URL  string
	Push bool
	// SSHKey is a private key file; empty = ssh agent. KnownHosts is a
	// known_hosts file; empty = the ssh defaults.
	SSHKey, KnownHosts string
	// TokenEnv / TokenFile hold the https token, re-read on each attempt.
	TokenEnv, TokenFile string
	Timeout             time.Duration // per network operation; 0 = 60s
	// Ledger is the repo-relative ledger merged by record id; "" =
	// memory.jsonl.
	Ledger string
	// LocalWork runs fn holding the writer lock (.memory.lock): Sync calls
	// it around the local part of each round (commit, merge, checkout) and
	// never around a fetch or a push, so writers that take the lock wait
	// for local work only. nil = fn runs as it is.
	LocalWork func(fn func() error) error
	// CommitFirst commits uncommitted edits at paths a sync must check
	// out, before the sync takes the writer lock for the checkout (the
	// agent passes its own commit, which holds the lock only while it reads
	// the paths). nil = CommitPaths inside LocalWork.
	CommitFirst func(paths []string) error
	// BeforeRetry runs before each round that follows a lost push race,
	// outside the writer lock: the agent commits the edits that arrived
	// during the rounds so far, so the next push carries them rather than
	// leaving them for a whole new sync after this one.
	BeforeRetry func()
	// PushRetryJitter: see DefaultPushRetryJitter; 0 = the default.
	PushRetryJitter time.Duration
	// Rand returns a number in [0,1) for the retry pause; nil = math/rand/v2.
	Rand func() float64
	// Sleep waits d or until ctx ends (the retry pause); nil = a timer.
	// Tests inject it.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (ro RemoteOptions) withDefaults() RemoteOptions {
	if ro.Remote == "" {
		ro.Remote = DefaultRemote
	}
	if ro.Timeout <= 0 {
		ro.Timeout = DefaultNetworkTimeout
	}
	if ro.Ledger == "" {
		ro.Ledger = memd.DefaultLedgerFile
	}
	if ro.LocalWork == nil {
		ro.LocalWork = func(fn func() error) error { return fn() }
	}
	if ro.PushRetryJitter <= 0 {
		ro.PushRetryJitter = DefaultPushRetryJitter
	}
	if ro.Rand == nil {
		ro.Rand = rand.Float64
	}
	if ro.Sleep == nil {
		ro.Sleep = sleepCtx
	}
	return ro
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SyncResult says what one Sync did.
type SyncResult struct {
	Fetched, FastForward, Merged, Pushed bool
	Ahead, Behind                        int      // after the sync, vs the remote-tracking ref
	Conflicts                            []string // conflict copies written
	MergeHash                            string
	// PushAttempts counts the pushes tried (rejected ones included);
	// Rounds the fetch → merge → push rounds.
	PushAttempts, Rounds int
	// EditMerges counts merges of paths edited while a checkout ran
	// (edits.go).
	EditMerges int
}

// SetRemote creates the remote name with url, or points it at url. The
// fetch refspec is git's default (+refs/heads/*:refs/remotes/<name>/*).
func (r *Repo) SetRemote(name, url string) error {
	if name == "" {
		name = DefaultRemote
	}
	if strings.TrimSpace(url) == "" {
		return fmt.Errorf("set remote %s: empty URL", name)
	}
	if _, err := transport.NewEndpoint(url); err != nil && remotehelper.For(url, "") == "" { // a helper's address is git's to read
		return fmt.Errorf("set remote %s to %s: %w", name, gitremote.RedactURL(url), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.repo.Config()
	if err != nil {
		return fmt.Errorf("set remote %s: read config: %w", name, err)
	}
	rc, ok := cfg.Remotes[name]
	if ok && len(rc.URLs) == 1 && rc.URLs[0] == url {
		return nil
	}
	if !ok {
		rc = &config.RemoteConfig{Name: name,
			Fetch: []config.RefSpec{config.RefSpec("+refs/heads/*:refs/remotes/" + name + "/*")}}
		cfg.Remotes[name] = rc
	}
	rc.URLs = []string{url}
	if err := rc.Validate(); err != nil {
		return fmt.Errorf("set remote %s to %s: %w", name, gitremote.RedactURL(url), err)
	}
	if err := r.repo.SetConfig(cfg); err != nil {
		return fmt.Errorf("set remote %s: write config: %s", name, gitremote.RedactURL(err.Error()))
	}
	return nil
}

// HasRemote reports whether the remote name (default origin) is configured
// with a URL.
func (r *Repo) HasRemote(name string) (bool, error) {
	if name == "" {
		name = DefaultRemote
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := r.repo.Config()
	if err != nil {
		return false, fmt.Errorf("read config of %s: %w", r.dir, err)
	}
	rc, ok := cfg.Remotes[name]
	vcs := "" // a helper's remote needs no URL (remote.<name>.vcs)
	if cfg.Raw != nil {
		vcs = cfg.Raw.Section("remote").Subsection(name).Options.Get("vcs")
	}
	return ok && (len(rc.URLs) > 0 && rc.URLs[0] != "" || vcs != ""), nil
}

// AdoptRemote is for `memd init --remote`: when the local branch has no
// commit yet and the remote has the branch, the local branch takes the
// remote's history and the work tree is checked out (adopted = true). A
// local branch with commits is left alone (the next Sync merges). Files
// already in the work tree that differ from the remote's at the same path
// are never overwritten: that is an error naming them.
func (r *Repo) AdoptRemote(ctx context.Context, ro RemoteOptions) (bool, error) {
	ro = ro.withDefaults()
	if ro.URL != "" {
		if err := r.SetRemote(ro.Remote, ro.URL); err != nil {
			return false, err
		}
	}
	if _, err := r.FinishInterruptedMerge(); err != nil {
		return false, err
	}
	remote, err := r.fetch(ctx, ro)
	if err != nil || remote.IsZero() {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	local, err := r.readBranch()
	if err != nil || !local.IsZero() {
		return false, err
	}
	rc, err := object.GetCommit(r.repo.Storer, remote)
	if err != nil {
		return false, fmt.Errorf("read %s: %w", r.trackingRef(ro), err)
	}
	if err := r.checkFetchedTreeLocked(r.repo.Storer, remote, rc.TreeHash, plumbing.ZeroHash); err != nil {
		return false, fmt.Errorf("adopt %s/%s into %s: %w", ro.Remote, r.opts.Branch, r.dir, err)
	}
	changes := map[string]treemerge.Change{}
	if err := treemerge.DiffTrees(r.repo.Storer, plumbing.ZeroHash, rc.TreeHash, "", changes); err != nil {
		return false, err
	}
	dirty, err := r.dirtyPaths(changes)
	if err != nil {
		return false, err
	}
	if len(dirty) > 0 {
		return false, fmt.Errorf("adopt %s/%s into %s: local files differ from the remote's and would be overwritten: %s",
			ro.Remote, r.opts.Branch, r.dir, strings.Join(dirty, ", "))
	}
	if _, err := r.moveHeadLocked(local, remote, changes, "memd: adopt "+ro.Remote+"/"+r.opts.Branch); err != nil {
		return false, err
	}
	return true, nil
}

// remoteURLLocked returns the first URL of the remote.
func (r *Repo) remoteURLLocked(name string) (string, error) {
	rem, err := r.repo.Remote(name)
	if err != nil {
		return "", fmt.Errorf("remote %q in %s: %w", name, r.dir, err)
	}
	urls := rem.Config().URLs
	if len(urls) == 0 || urls[0] == "" {
		return "", fmt.Errorf("remote %q in %s has no URL", name, r.dir)
	}
	// As written: go-git already applied the repo's own url.<base>.insteadOf to
	// rem's URLs, and the Target applies every config's rules once, as git does.
	if cfg, err := r.repo.Config(); err == nil && cfg.Raw != nil {
		if raw := cfg.Raw.Section("remote").Subsection(name).Options.GetAll("url"); len(raw) > 0 && raw[0] != "" {
			return raw[0], nil
		}
	}
	return urls[0], nil
}

// remoteAt is the remote name as go-git sees it, dialling url: the configured URL after
// url.<base>.insteadOf, which Target resolved (go-git applies only the repo's own rules).
func (r *Repo) remoteAt(name, url string) *git.Remote {
	return git.NewRemote(r.repo.Storer, &config.RemoteConfig{Name: name, URLs: []string{url}})
}

func (r *Repo) trackingRef(ro RemoteOptions) plumbing.ReferenceName {
	return plumbing.NewRemoteReferenceName(ro.Remote, r.opts.Branch)
}

// Fetch updates refs/remotes/<remote>/<branch> from the remote. An empty
// remote (or one without the branch) is not an error: the tracking ref is
// then absent.
func (r *Repo) Fetch(ctx context.Context, ro RemoteOptions) error {
	ro = ro.withDefaults()
	if _, err := r.FinishInterruptedMerge(); err != nil {
		return err
	}
	_, err := r.fetch(ctx, ro)
	return err
}

// fetch returns the remote branch head after fetching (zero = none).
func (r *Repo) fetch(ctx context.Context, ro RemoteOptions) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// A nightly `git gc` may have packed what go-git still looks for as loose objects.
	r.syncPacksLocked()
	if hr := r.helperLocked(ro); hr != nil { // a remote helper's: git fetches (helperremote.go)
		return r.fetchHelperLocked(ctx, ro, hr)
	}
	url, err := r.remoteURLLocked(ro.Remote)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tgt, err := r.cachedTarget(ctx, ro, "fetch", url) // the looks' (remotehead.go)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s (%s): %w", ro.Remote, gitremote.RedactURL(url), err)
	}
	if hr := r.helperAt(ro, tgt.URL, ""); hr != nil { // insteadOf made it one
		return r.fetchHelperLocked(ctx, ro, hr)
	}
	rem := r.remoteAt(ro.Remote, tgt.URL)
	cctx, cancel := context.WithTimeout(ctx, ro.Timeout)
	defer cancel()
	track := r.trackingRef(ro)
	// The one ref over protocol v2 where the remote speaks it (fetchv2.go); go-git's v0
	// fetch, which reads every ref the remote has, otherwise.
	if h, err := r.fetchOneRefLocked(cctx, tgt, track); !errors.Is(err, errFetchV2Unsupported) {
		r.targetDone(ctx, "fetch", tgt, err, false)
		if err != nil {
			if cctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, ro.Timeout, err)
			}
			return plumbing.ZeroHash, gitremote.Classify("fetch", ro.Remote, url, err)
		}
		r.consolidatePacksLocked(ctx)
		return h, nil
	}
	spec := config.RefSpec("+" + r.BranchRef().String() + ":" + track.String())
	err = rem.FetchContext(cctx, &git.FetchOptions{
		RemoteName: ro.Remote,
		RefSpecs:   []config.RefSpec{spec},
		Auth:       tgt.Auth,
		Tags:       git.NoTags,
		CABundle:   tgt.CABundle, InsecureSkipTLS: tgt.InsecureSkipTLS, ProxyOptions: tgt.Proxy,
	})
	var noRef git.NoMatchingRefSpecError
	r.targetDone(ctx, "fetch", tgt, err, errors.Is(err, git.NoErrAlreadyUpToDate) ||
		errors.Is(err, transport.ErrEmptyRemoteRepository) || errors.As(err, &noRef))
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
	case errors.Is(err, transport.ErrEmptyRemoteRepository), errors.As(err, &noRef):
		// Nothing to fetch yet: the first push creates the branch. A
		// stale tracking ref (branch deleted remotely) is dropped so we
		// do not merge against history the remote no longer has.
		_ = r.repo.Storer.RemoveReference(track)
		return plumbing.ZeroHash, nil
	default:
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, ro.Timeout, err)
		}
		return plumbing.ZeroHash, gitremote.Classify("fetch", ro.Remote, url, err)
	}
	if err == nil {
		r.consolidatePacksLocked(ctx)
	}
	h, err := gitstore.ReadRef(r.commonDir, track.String())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("fetch %s: %w", ro.Remote, err)
	}
	return h, nil
}

// push sends the local branch head to the remote branch. Never forced.
func (r *Repo) push(ctx context.Context, ro RemoteOptions, local plumbing.Hash) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if hr := r.helperLocked(ro); hr != nil { // a remote helper's: git pushes (helperremote.go)
		if local.IsZero() {
			return nil
		}
		return r.pushHelperLocked(ctx, ro, hr, local)
	}
	url, err := r.remoteURLLocked(ro.Remote)
	if err != nil {
		return err
	}
	if local.IsZero() {
		return nil
	}
	tgt, err := r.cachedTarget(ctx, ro, "push", url)
	if err != nil {
		return fmt.Errorf("push %s (%s): %w", ro.Remote, gitremote.RedactURL(url), err)
	}
	if hr := r.helperAt(ro, tgt.URL, ""); hr != nil { // pushInsteadOf made it one
		return r.pushHelperLocked(ctx, ro, hr, local)
	}
	rem := r.remoteAt(ro.Remote, tgt.URL)
	cctx, cancel := context.WithTimeout(ctx, ro.Timeout)
	defer cancel()
	// SendPack enumerates only what is new (gitremote/push.go); it falls back to
	// go-git's PushContext for a first push. r.mu keeps the object store still. The
	// tracking ref, as this round's fetch left it, is the head its pack is built for
	// before the remote's receive-pack starts.
	expect, moved := r.pushExpect(ro, tgt.URL)
	if moved {
		err := fmt.Errorf("push %s: %w (%w)", ro.Remote, errRemoteMovedUnasked, gitremote.ErrPushRejected)
		r.targetDone(ctx, "push", tgt, err, true) // a lost race keeps the target, as below
		return err
	}
	// The repo's pre-push hook first, as git push runs it, before either way of pushing.
	if err := r.prePushHook(cctx, ro.Remote, url, local, expect); err != nil {
		return err
	}
	// A bare repository of this user's on this machine: the objects and the ref written
	// here, as its receive-pack would (filepush.go).
	if ep, err := transport.NewEndpoint(tgt.URL); err == nil && ep.Protocol == "file" && !expect.IsZero() {
		err := r.pushToFileRemoteLocked(cctx, fileRemoteGitDir(ep.Path), expect, local)
		switch {
		case errors.Is(err, errPushDeclined):
			r.log.Debug("push through receive-pack", "why", err)
		case err != nil:
			r.targetDone(ctx, "push", tgt, err, true)
			return fmt.Errorf("push %s (%s): %w", ro.Remote, gitremote.RedactURL(url), err)
		default:
			r.targetDone(ctx, "push", tgt, nil, true)
			return r.pushedLocked(ro, local)
		}
	}
	err = gitremote.SendPack(cctx, gitremote.Push{Store: r.repo.Storer, Remote: rem, Target: tgt,
		Branch: r.BranchRef(), Local: local, Expect: expect, Log: r.log, WalkLimit: r.testPushWalkLimit, Stats: r.testPushStats})
	// A lost race keeps the target: the next round pushes with it at once.
	r.targetDone(ctx, "push", tgt, err, errors.Is(err, git.NoErrAlreadyUpToDate) ||
		errors.Is(gitremote.Classify("push", ro.Remote, "", err), gitremote.ErrPushRejected))
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, ro.Timeout, err)
		}
		return gitremote.Classify("push", ro.Remote, url, err)
	}
	return r.pushedLocked(ro, local)
}

// pushedLocked records that the remote has local now. Caller holds r.mu.
func (r *Repo) pushedLocked(ro RemoteOptions, local plumbing.Hash) error {
	// The remote now has local: record it so ahead/behind are right even
	// when the remote config has no matching fetch refspec.
	if err := r.setTrackingRef(r.trackingRef(ro), local); err != nil {
		r.log.Warn("update tracking ref after push", "ref", r.trackingRef(ro).String(), "err", err)
	}
	return nil
}

// errRemoteMovedUnasked: a file remote's branch is no longer where the round's fetch found
// it, so the push was not made (Sync counts no push attempt); wrapped with ErrPushRejected.
var errRemoteMovedUnasked = errors.New("the remote branch moved since the fetch; not pushed")

// pushExpect is the remote head a push builds its pack for ahead (gitremote.Push.Expect):
// the tracking ref as the round's fetch left it. A file remote's head is a file read for
// nothing: moved says it names another commit now, a push that receive-pack would refuse
// as soon as it advertises. Merging again at once costs the remote nothing; a pack built
// for it would be CPU thrown away, and the refused session a process on the remote's side
// (the swarm's machines share one). Moved is never claimed for what cannot be read.
func (r *Repo) pushExpect(ro RemoteOptions, url string) (expect plumbing.Hash, moved bool) {
	expect, err := gitstore.ReadRef(r.commonDir, r.trackingRef(ro).String())
	if err != nil {
		return plumbing.ZeroHash, false // unreadable: no pack ahead
	}
	if ep, err := transport.NewEndpoint(url); err == nil && ep.Protocol == "file" {
		head, err := fileRemoteHead(ep.Path, r.BranchRef().String())
		if err != nil || head.IsZero() {
			return plumbing.ZeroHash, false
		}
		if head != expect {
			return plumbing.ZeroHash, !expect.IsZero()
		}
	}
	return expect, false
}

// Sync fetches, fast-forwards or merges, and pushes (when ro.Push). A push
// rejected because the remote moved meanwhile is retried at once (fetch →
// merge → push, after a short random pause, retryPause, and ro.BeforeRetry)
// up to MaxSyncAttempts rounds;
// running out of rounds returns ErrPushRejected, which is contention, not an
// outage. Errors: ErrOffline (the remote does not answer), ErrAuth
// (credentials), ErrUnrelatedHistory, ErrPushRejected, ErrCheckoutRaced; all
// with redacted URLs. Local commits are never lost or rewritten.
//
// Only the local part of a round (commit, merge, checkout) runs inside
// ro.LocalWork (the writer lock); fetches and pushes run outside it.
//
// The caller should have committed pending work; any path Sync must touch
// that still differs from HEAD is committed first (CommitPaths).
func (r *Repo) Sync(ctx context.Context, ro RemoteOptions) (SyncResult, error) {
	ro = ro.withDefaults()
	var res SyncResult
	if ro.URL != "" {
		if err := r.SetRemote(ro.Remote, ro.URL); err != nil {
			return res, err
		}
	}
	if ro.CommitFirst == nil {
		ro.CommitFirst = commitPathsUnder(ro.LocalWork, r)
	}
	var pushErr error
	for attempt := 1; attempt <= MaxSyncAttempts; attempt++ {
		remote, local, t0, err := r.syncRound(ctx, ro, attempt, &res)
		if err != nil {
			return r.finishResult(ro, res, err)
		}
		if !ro.Push || local.IsZero() || local == remote {
			pushErr = nil
			break
		}
		// What is pushed is what the branch holds now: a user's `git commit --amend`,
		// `reset` or `rebase -i` since the merge rewrote what local named, and that is
		// never pushed (the next round merges and pushes the branch as it is).
		if now, err := r.readBranch(); err != nil {
			return r.finishResult(ro, res, err)
		} else if now != local {
			r.log.Info("branch moved by another writer before the push; merging again", "repo", r.dir)
			continue
		}
		if err := r.standAsideErr("push"); err != nil {
			return r.finishResult(ro, res, err)
		}
		if pushErr = r.syncPush(ctx, ro, local, &res); pushErr == nil {
			break
		}
		if !errors.Is(pushErr, gitremote.ErrPushRejected) || ctx.Err() != nil {
			return r.finishResult(ro, res, pushErr)
		}
		// Someone pushed first: fetch their commits, merge, try again,
		// after a random pause that spreads the losers of one race
		// (retryPause).
		if attempt == MaxSyncAttempts {
			break
		}
		if err := pauseBeforeRetry(ctx, ro, r.log, attempt, t0, pushErr); err != nil {
			return r.finishResult(ro, res, err)
		}
	}
	if pushErr != nil {
		pushErr = fmt.Errorf("push %s: still rejected after %d attempts: %w", ro.Remote, MaxSyncAttempts, pushErr)
	}
	return r.finishResult(ro, res, pushErr)
}

// commitPathsUnder is Sync's default RemoteOptions.CommitFirst: r.CommitPaths run inside
// lw (the writer lock, ro.LocalWork).
func commitPathsUnder(lw func(fn func() error) error, r *Repo) func(paths []string) error {
	return func(paths []string) error {
		return lw(func() error { _, err := r.CommitPaths(paths); return err })
	}
}

// syncRound is a Sync round up to the push: pass the gate, fetch remote, plan the merge,
// integrate it under ro.LocalWork and run the merge hooks when the branch moved. It
// returns the remote head, the local head after integrating, and when the round's work
// started (t0, after the gate: the retry pause and the logs count from it).
func (r *Repo) syncRound(ctx context.Context, ro RemoteOptions, attempt int, res *SyncResult) (remote, local plumbing.Hash, t0 time.Time, err error) {
	if err = ctx.Err(); err != nil {
		return remote, local, t0, err
	}
	// The gate (gitops.go), each round: nothing fetched into a merge, merged or pushed
	// while the repo is in another writer's hands.
	if err = r.standAsideWait("sync"); err != nil {
		return remote, local, t0, err
	}
	res.Rounds = attempt
	t0 = time.Now()
	remote, err = r.fetch(ctx, ro) // no lock: a fetch touches no work tree file
	if err != nil {
		return remote, local, t0, err
	}
	res.Fetched = true
	t1 := time.Now()
	// The merge is computed before the lock (objects only); under it,
	// only what touches the work tree and the branch.
	pl, err := r.planRound(ro, remote)
	if err != nil {
		return remote, local, t0, err
	}
	t2 := time.Now()
	if h := r.hooks; h != nil && h.afterPlan != nil {
		h.afterPlan()
	}
	// A git command that started during the fetch and plan (a person's, or a daemon's
	// reconcile beside a one-shot sync) is waited out here, outside the writer lock; the
	// check under it (integrateRound) then stands aside only for one that stays.
	r.waitPassing(true)
	before, _ := r.readBranch()
	local, err = r.integrateRound(ro, remote, pl, res)
	if err != nil {
		return remote, local, t0, err
	}
	if local != before && (res.FastForward || res.Merged) {
		r.afterMergeHooks(ctx) // as git pull, once the work tree has the merge
	}
	r.log.Debug("sync round", "attempt", attempt, "fetch", t1.Sub(t0), "plan", t2.Sub(t1), "integrate", time.Since(t2))
	return remote, local, t0, nil
}

// syncPush pushes local and counts it in res: an attempt unless the push was not made
// (errRemoteMovedUnasked), Pushed when it went through.
func (r *Repo) syncPush(ctx context.Context, ro RemoteOptions, local plumbing.Hash, res *SyncResult) error {
	tp := time.Now()
	err := r.push(ctx, ro, local)
	if !errors.Is(err, errRemoteMovedUnasked) {
		res.PushAttempts++
	}
	r.log.Debug("push", "took", time.Since(tp), "ok", err == nil) // where a round's time goes, with "sync round"
	if err == nil {
		res.Pushed = true
	}
	return err
}

// pauseBeforeRetry waits, after a rejected push (pushErr), the random pause of retryPause
// that spreads the losers of one race, then runs ro.BeforeRetry; t0 is when the round
// started. An error: ctx ended during the pause.
func pauseBeforeRetry(ctx context.Context, ro RemoteOptions, log *slog.Logger, attempt int, t0 time.Time, pushErr error) error {
	pause := retryPause(attempt, time.Since(t0), ro.PushRetryJitter, ro.Rand())
	log.Debug("push rejected, fetching again", "remote", ro.Remote, "attempt", attempt, "round", time.Since(t0), "pause", pause, "err", pushErr)
	if err := ro.Sleep(ctx, pause); err != nil {
		return err
	}
	if ro.BeforeRetry != nil {
		ro.BeforeRetry()
	}
	return nil
}

// planRound plans a round's merge of remote (planIntegrate). Edits in the
// way are committed first, outside the checkout's lock, and the merge planned
// again on the new head.
func (r *Repo) planRound(ro RemoteOptions, remote plumbing.Hash) (*integratePlan, error) {
	pl, err := r.planIntegrate(ro, remote)
	for try := 0; err == nil && pl != nil && len(pl.dirty) > 0 && try < maxEditMerges; try++ {
		if cerr := ro.CommitFirst(pl.dirty); cerr != nil && !errors.Is(cerr, memd.ErrHeadMoved) {
			return nil, fmt.Errorf("commit local changes before merge in %s: %w", r.dir, cerr)
		}
		r.log.Info("committed local changes before merging", "repo", r.dir, "paths", len(pl.dirty))
		pl, err = r.planIntegrate(ro, remote)
	}
	return pl, err
}

// integrateRound is a round's local part, inside ro.LocalWork (the writer
// lock): finish an interrupted checkout, integrate remote using pl, read the
// new local head; then drop what of pl is unused and flush.
func (r *Repo) integrateRound(ro RemoteOptions, remote plumbing.Hash, pl *integratePlan, res *SyncResult) (plumbing.Hash, error) {
	var local plumbing.Hash
	err := ro.LocalWork(func() error {
		// The gate under the writer lock: the repo may have changed hands during the fetch.
		if err := r.standAsideErr("merge"); err != nil {
			return err
		}
		// An interrupted checkout is finished first; a plan that wrote
		// its own marker knows there was none.
		if pl == nil || pl.co == nil || !pl.co.marked {
			if done, err := r.FinishInterruptedMerge(); err != nil || done {
				pl.drop(r) // its temps may be gone with the interrupted checkout's
				if err != nil {
					return err
				}
			}
		}
		if err := r.integrate(ro, remote, pl, res); err != nil {
			return err
		}
		var err error
		local, err = r.readBranch()
		return err
	})
	r.dropPlan(pl) // unless integrate used it (or the lock was not had)
	if ferr := r.flushDurable(); err == nil {
		err = ferr
	}
	return local, err
}

// finishResult fills ahead/behind (best effort) and returns err.
func (r *Repo) finishResult(ro RemoteOptions, res SyncResult, err error) (SyncResult, error) {
	if a, b, e := r.AheadBehind(ro); e == nil {
		res.Ahead, res.Behind = a, b
	}
	return res, err
}

// AheadBehind counts the commits the local branch has that the
// remote-tracking ref lacks (ahead) and the reverse (behind), as of the last
// fetch. No tracking ref: everything local is ahead.
func (r *Repo) AheadBehind(ro RemoteOptions) (ahead, behind int, err error) {
	ro = ro.withDefaults()
	local, err := r.readBranch()
	if err != nil {
		return 0, 0, err
	}
	remote, err := gitstore.ReadRef(r.commonDir, r.trackingRef(ro).String())
	if err != nil {
		return 0, 0, fmt.Errorf("ahead/behind %s: %w", ro.Remote, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.aheadBehindLocked(local, remote)
}

// integrate brings the remote head into the local branch: nothing, a
// fast-forward or a merge commit. Uncommitted work on a path it must touch
// is committed first, then the decision is taken again. pl, when it was
// planned for the current local head, saves computing the merge again.
func (r *Repo) integrate(ro RemoteOptions, remote plumbing.Hash, pl *integratePlan, res *SyncResult) error {
	if remote.IsZero() {
		return nil
	}
	var lastDirty []string
	for try := 0; try < maxEditMerges; try++ {
		dirty, err := r.integrateOnce(ro, remote, pl, res)
		if err != nil || len(dirty) == 0 {
			return err
		}
		cr, err := r.CommitPaths(dirty)
		if err != nil && !errors.Is(err, memd.ErrHeadMoved) {
			return fmt.Errorf("commit local changes before merge in %s: %w", r.dir, err)
		}
		r.log.Info("committed local changes before merging", "repo", r.dir, "paths", len(dirty), "commit", cr.Hash)
		lastDirty = dirty
	}
	return fmt.Errorf("sync %s: uncommitted changes at %s could not be committed (ignored, or edited all along): not overwriting them: %w",
		r.dir, strings.Join(lastDirty, ", "), ErrCheckoutRaced)
}

// integratePlan is what bringing remote into local takes: the target commit
// (remote for a fast-forward, a merge commit already written), the tree diff
// local → target, and the merge's conflict copies. Nothing on disk but
// objects: it is computed before the writer lock is taken, so the lock
// covers only the dirty check, the ref move and the checkout.
type integratePlan struct {
	local, remote, target plumbing.Hash
	merge                 bool
	changes               map[string]treemerge.Change
	conflicts             []string
	msg                   string
	// co is the checkout's step 1 (temps written and fsynced beside their
	// targets, stamps taken), done before the lock when the tree was clean;
	// under the lock only its verify, the ref move and the renames remain.
	co *checkout
	// dirty: the paths holding uncommitted edits that step 1 found in the
	// way (then co is nil): Sync commits them and plans again.
	dirty []string
	// brake: the mass deletion brake's verdict, noted once HEAD moved.
	brake brakeVerdict
}

// drop removes the prepared checkout's temps (and its marker) when the plan
// is not used. Caller holds r.mu or is the owner between jobs.
func (pl *integratePlan) drop(r *Repo) {
	if pl != nil && pl.co != nil {
		if pl.co.marked {
			_ = r.removeMergeMarker()
		}
		pl.co.abort()
		pl.co = nil
	}
}

// dropPlan is drop under r.mu.
func (r *Repo) dropPlan(pl *integratePlan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pl.drop(r)
}

// planIntegrate plans bringing remote into the current local head (nil:
// nothing to do). It takes r.mu, not the writer lock.
func (r *Repo) planIntegrate(ro RemoteOptions, remote plumbing.Hash) (*integratePlan, error) {
	if remote.IsZero() {
		return nil, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	local, err := r.readBranch()
	if err != nil {
		return nil, err
	}
	return r.planIntegrateLocked(ro, local, remote, true)
}

// planIntegrateLocked plans; prepare also does the checkout's step 1.
func (r *Repo) planIntegrateLocked(ro RemoteOptions, local, remote plumbing.Hash, prepare bool) (*integratePlan, error) {
	if local == remote {
		return nil, nil
	}
	s := r.repo.Storer
	rc, err := object.GetCommit(s, remote)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", r.trackingRef(ro), err)
	}
	pl := &integratePlan{local: local, remote: remote, target: remote}
	var base *object.Commit
	var lc *object.Commit
	if !local.IsZero() {
		lc, err = object.GetCommit(s, local)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", r.BranchRef(), err)
		}
		// One walk of the divergence gives ahead/behind and the merge base
		// (gitremote/mergebase.go): the common cases (only ahead, fast-forward) and
		// the merges never walk the whole history.
		ahead, behind, bases, err := r.divergenceLocked(ro, local, remote)
		if err != nil {
			return nil, err
		}
		switch {
		case behind == 0:
			return nil, nil // only ahead: nothing to bring in
		case ahead == 0:
			// fast-forward
		default:
			if len(bases) == 0 {
				return nil, fmt.Errorf("sync %s with %s/%s (local %s, remote %s): %w",
					r.dir, ro.Remote, r.opts.Branch, short(local), short(remote), ErrUnrelatedHistory)
			}
			base = bases[0]
			pl.merge = true
		}
	}

	localTree := plumbing.ZeroHash
	if lc != nil {
		localTree = lc.TreeHash
	}
	// The remote is not trusted (docs/ARCHITECTURE.md §4): its tree is vetted before
	// anything reads it for a merge or writes it to disk.
	if err := r.checkFetchedTreeLocked(s, remote, rc.TreeHash, localTree); err != nil {
		return nil, fmt.Errorf("sync %s with %s/%s: %w", r.dir, ro.Remote, r.opts.Branch, err)
	}
	if err := r.planTargetLocked(ro, pl, base, lc, rc, localTree); err != nil {
		return nil, err
	}
	if prepare {
		r.prepareIntegrateLocked(pl)
	}
	return pl, nil
}

// planTargetLocked fills in pl's target: for a merge, the merged tree of
// base, lc (local) and rc (remote) and its merge commit, written; then the
// tree diff localTree → target and the commit message.
func (r *Repo) planTargetLocked(ro RemoteOptions, pl *integratePlan, base, lc, rc *object.Commit, localTree plumbing.Hash) error {
	targetTree := rc.TreeHash
	if pl.merge {
		pol := treemerge.Policy{Ledgers: []string{ro.Ledger}, Host: r.opts.Hostname, Now: r.opts.Now(),
			OursTime: lc.Committer.When, TheirsTime: rc.Committer.When}
		mr, err := r.mergeTreesLocked(base.TreeHash, lc.TreeHash, rc.TreeHash, pol)
		if err != nil {
			return fmt.Errorf("merge %s/%s into %s: %w", ro.Remote, r.opts.Branch, r.dir, err)
		}
		targetTree, pl.conflicts = mr.Tree, mr.Conflicts
	}
	pl.changes = map[string]treemerge.Change{}
	if err := treemerge.DiffTrees(r.repo.Storer, localTree, targetTree, "", pl.changes); err != nil {
		return err
	}
	if err := r.brakeRemote(pl, localTree); err != nil {
		return fmt.Errorf("sync %s with %s/%s: %w", r.dir, ro.Remote, r.opts.Branch, err)
	}
	pl.msg = "memd: fast-forward to " + ro.Remote + "/" + r.opts.Branch
	if pl.merge {
		pl.msg = mergeMessage(ro.Remote, r.opts.Branch, r.opts.Hostname, pl.conflicts)
		var err error
		pl.target, err = r.writeCommitLocked(targetTree, []plumbing.Hash{pl.local, pl.remote}, pl.msg)
		if err != nil {
			return fmt.Errorf("write merge commit in %s: %w", r.dir, err)
		}
	}
	return nil
}

// prepareIntegrateLocked does the checkout's step 1 for pl before the lock:
// pl.co when the tree was clean, pl.dirty when edits are in the way.
func (r *Repo) prepareIntegrateLocked(pl *integratePlan) {
	// Any failure (an edit in the way, a path that cannot be written)
	// is met again, and handled, under the lock.
	// The marker is written first, off the lock: until the ref moves it
	// names the head we are at, so a crash (or a dropped plan) drops it
	// and removes the temps the prepare wrote beside their targets.
	marked := false
	if _, _, had, merr := r.readMergeMarker(); merr == nil && !had {
		marked = r.writeMergeMarker(pl.local, pl.target) == nil
	}
	co, err := r.prepareCheckout(pl.changes, true)
	var wc *WorktreeChangedError
	switch {
	case err == nil:
		co.deferSync, co.marked = true, marked
		pl.co = co
	case errors.As(err, &wc) && !wc.Moved:
		pl.dirty = wc.Paths
	}
	if err != nil && marked {
		_ = r.removeMergeMarker()
	}
}

// integrateOnce does the work under r.mu; it returns the dirty paths
// instead when the work tree holds uncommitted changes it would overwrite.
func (r *Repo) integrateOnce(ro RemoteOptions, remote plumbing.Hash, pl *integratePlan, res *SyncResult) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	local, err := r.readBranch()
	if err != nil {
		return nil, err
	}
	if pl == nil || pl.local != local || pl.remote != remote {
		// Planned for another head (a commit came first) or not at all.
		pl.drop(r)
		if pl, err = r.planIntegrateLocked(ro, local, remote, false); err != nil {
			return nil, err
		}
	}
	if pl == nil {
		return nil, nil
	}
	co := pl.co
	pl.co = nil // moveHead owns it now
	if co == nil {
		dirty, err := r.dirtyPaths(pl.changes)
		if err != nil {
			return nil, err
		}
		if len(dirty) > 0 {
			return dirty, nil
		}
	}
	em, err := r.moveHeadPreparedLocked(local, pl.target, pl.changes, firstLine(pl.msg), co)
	if em.Rounds > 0 {
		// Edits made during the checkout were committed and merged (edits.go).
		res.EditMerges += em.Rounds
		res.Merged = true
		res.MergeHash = em.Head.String()
		res.Conflicts = append(res.Conflicts, em.Conflicts...)
	}
	if err != nil {
		var wc *WorktreeChangedError
		if errors.As(err, &wc) && !wc.Moved {
			// Edited between the dirty check and the ref move: nothing moved;
			// commit them on the old HEAD first and integrate again.
			return wc.Paths, nil
		}
		return nil, err
	}
	r.noteDeletes(pl.brake)
	if pl.merge {
		res.Merged = true
		if em.Rounds == 0 {
			res.MergeHash = pl.target.String()
		}
		res.Conflicts = append(res.Conflicts, pl.conflicts...)
		r.log.Info("merged remote changes", "repo", r.dir, "remote", ro.Remote, "commit", short(pl.target), "paths", len(pl.changes), "conflicts", len(pl.conflicts))
	} else {
		res.FastForward = true
		r.log.Info("fast-forwarded", "repo", r.dir, "remote", ro.Remote, "commit", short(pl.target), "paths", len(pl.changes))
	}
	return nil, nil
}

// mergeMessage: "memd: merge <remote>/<branch>", the conflict copies, then
// the Memd-Host trailer.
func mergeMessage(remote, branch, host string, conflicts []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "memd: merge %s/%s\n\n", remote, branch)
	for _, c := range conflicts {
		fmt.Fprintf(&b, "conflict copy %s\n", strings.ReplaceAll(c, "\n", `\n`))
	}
	if len(conflicts) > 0 {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%s: %s\n", TrailerHost, strings.ReplaceAll(host, "\n", " "))
	return b.String()
}

// aheadBehindLocked counts the commits only local has and those only remote has: the
// divergence walk of gitremote/mergebase.go, whose cost follows the divergence, not the length of
// history.
func (r *Repo) aheadBehindLocked(local, remote plumbing.Hash) (int, int, error) {
	ahead, behind, _, err := gitremote.Divergence(r.repo.Storer, local, remote)
	return ahead, behind, err
}
