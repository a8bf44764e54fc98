package githooks

import (
	"context"
	"strings"
)

// ZeroID is git's id for "no object": the remote side of a ref the remote lacks.
const ZeroID = "0000000000000000000000000000000000000000"

// PushRef is one ref a push updates, as pre-push reads it on stdin.
type PushRef struct {
	LocalRef, LocalID, RemoteRef, RemoteID string // RemoteID "" = ZeroID
}

// BeforePush runs pre-push as `git push <remote>` does: arguments the remote's name and
// URL (the URL twice when the push has no remote name), one stdin line per ref
// "<local ref> <local id> <remote ref> <remote id>". A refusal is a *Refusal: nothing is
// pushed. Skipped when verify is off (git push --no-verify).
func (r *Runner) BeforePush(ctx context.Context, remote, url string, refs []PushRef) error {
	if !r.Has(PrePush) {
		return nil
	}
	if remote == "" {
		remote = url
	}
	var in strings.Builder
	for _, p := range refs {
		rid := p.RemoteID
		if rid == "" {
			rid = ZeroID
		}
		in.WriteString(p.LocalRef + " " + p.LocalID + " " + p.RemoteRef + " " + rid + "\n")
	}
	return r.Run(ctx, PrePush, []string{remote, url}, Input{Stdin: []byte(in.String())})
}

// AfterMerge runs post-merge with "0" (not a squash merge), as `git merge` and `git pull`
// do after a merge or a fast-forward that changed the work tree; its exit status is
// ignored, as git ignores it. The error is for the log.
func (r *Runner) AfterMerge(ctx context.Context) error {
	return r.Run(ctx, PostMerge, []string{"0"}, Input{Env: []string{"GIT_REFLOG_ACTION=pull"}})
}
