package agent

import (
	"errors"

	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// The mass deletion brake as the daemon shows it (docs/ARCHITECTURE.md §11): sync holds the commit or the
// merge (gitrepo.ErrMassDeletion); the agent shows state paused with the brake's reason
// until the deletion is undone, or `memd resume --allow-deletes` lets it through. The
// commit job keeps retrying the held paths (commitPending's 5 s retry), which is also what
// notices the allowance; a held remote deletion is fetched again at check_interval.

// heldDeletions are the reasons of the held mass deletions, by side ("" = none).
type heldDeletions struct {
	local, remote string
}

// holdDeletion records err when it is a held mass deletion and reports whether it was.
// One event per new hold, not per retry.
func (a *Agent) holdDeletion(err error) bool {
	var md *gitrepo.MassDeletionError
	if !errors.As(err, &md) {
		return false
	}
	reason := md.Error()
	slot := &a.st.deletions.local
	if md.Side == gitrepo.SideRemote {
		slot = &a.st.deletions.remote
	}
	if *slot != reason {
		a.log.Warn("mass deletion held", "side", md.Side, "deleted", md.Deleted, "of", md.Total, "max_deletes", md.Max)
		a.event(statusline.KindWarn, statusline.Part{Text: "paused:", Kind: statusline.KindWarn}, statusline.Part{Text: " " + reason})
	}
	*slot = reason
	return true
}

// brakeFacts adds a held mass deletion to the facts as the pause it is.
func (a *Agent) brakeFacts(f *statusline.Facts) {
	reason := a.st.deletions.local
	if reason == "" {
		reason = a.st.deletions.remote
	}
	if reason != "" && f.Paused == nil {
		f.Paused, f.PauseBrief = &statusline.Paused{Reason: reason}, "mass deletion held"
	}
}

// stateAllowance is the allow-deletes file and the brake's window (deletes.json) of the
// state directory, opened only when the brake asks (a change with deletions), so no
// descriptor stays open for it.
type stateAllowance struct{ dir string }

func (s stateAllowance) DeletesAllowed() bool {
	d, err := statedir.Open(s.dir)
	if err != nil {
		return false
	}
	defer d.Close()
	return d.DeletesAllowed()
}

func (s stateAllowance) TakeAllowDeletes() error {
	d, err := statedir.Open(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.TakeAllowDeletes()
}

func (s stateAllowance) UpdateDeletes(update func(w *statedir.DeleteWindow, readErr error) bool) error {
	d, err := statedir.Create(s.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.UpdateDeletes(update)
}
