package agent

import (
	"github.com/memd-dev/memd/metrics/statusline"
)

// hookHeldSeen is the paths a git hook holds (gitrepo.HookHeldFiles) already announced,
// with the words they were announced with.
type hookHeldSeen map[string]string

// hookHeldFacts is the document's held entries for the paths the repo's pre-commit or
// commit-msg hook refused (reason hook), with one event per path that became held (or
// whose hook said something else), and the gauge set.
func (a *Agent) hookHeldFacts() []statusline.Held {
	held := a.repo.HookHeldFiles()
	if a.st.hookHeld == nil {
		a.st.hookHeld = hookHeldSeen{}
	}
	now := map[string]bool{}
	out := make([]statusline.Held, 0, len(held))
	for _, h := range held {
		now[h.Path] = true
		out = append(out, statusline.Held{Path: h.Path, Reason: statusline.HeldHook, Rule: h.Hook, Message: h.Line})
		why := h.Hook + ": " + h.Line
		if a.st.hookHeld[h.Path] == why {
			continue
		}
		a.st.hookHeld[h.Path] = why
		a.event(statusline.KindWarn, statusline.Part{Text: "held", Kind: statusline.KindWarn},
			statusline.Part{Text: " " + h.Path}, statusline.Part{Text: ": refused by git hook " + why + "; not committed", Kind: statusline.KindDim})
	}
	for p := range a.st.hookHeld {
		if !now[p] {
			delete(a.st.hookHeld, p)
			a.log.Info("no longer held by a git hook: committed or gone", "path", p)
		}
	}
	a.metrics.HeldFiles(statusline.HeldHook, len(held))
	return out
}
