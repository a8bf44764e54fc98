package agent

import (
	"github.com/memd-dev/memd/metrics/statusline"
)

// filterHeld lists the files held because their git filter driver failed or is missing
// (sync/gitrepo/filters.go), writes one event per file as it becomes held, and sets the
// gauge.
func (a *Agent) filterHeld() []statusline.Held {
	held := a.repo.HeldFilters()
	if a.filterSeen == nil {
		a.filterSeen = map[string]bool{}
	}
	now := map[string]bool{}
	out := make([]statusline.Held, 0, len(held))
	for _, h := range held {
		now[h.Path] = true
		out = append(out, statusline.Held{Path: h.Path, Reason: statusline.HeldFilter, Rule: h.Driver})
		if !a.filterSeen[h.Path] {
			a.filterSeen[h.Path] = true
			a.event(statusline.KindWarn, statusline.Part{Text: "held", Kind: statusline.KindWarn},
				statusline.Part{Text: " " + h.Path}, statusline.Part{Text: ": git filter " + h.Driver + " failed or is not set up here; not committed", Kind: statusline.KindDim})
		}
	}
	for p := range a.filterSeen {
		if !now[p] {
			delete(a.filterSeen, p)
		}
	}
	a.metrics.HeldFiles(statusline.HeldFilter, len(held))
	return out
}
