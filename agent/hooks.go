package agent

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/memd-dev/memd/hooks"
)

// hookStopGrace is how long a stopping memd lets running hooks finish before killing them.
var hookStopGrace = 5 * time.Second

// hookFailures is each hook's last failure, cleared by its next success; the status shows
// them as warnings (state warn) until then.
type hookFailures struct {
	mu    sync.Mutex
	last  map[string]string
	fresh []string // failures not yet shown as events (a repeat of the same failure is not new)
}

func (h *hookFailures) set(hook, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last = map[string]string{}
	}
	if msg == "" {
		delete(h.last, hook)
		return
	}
	if h.last[hook] != msg {
		h.fresh = append(h.fresh, msg)
	}
	h.last[hook] = msg
}

// takeFresh returns the failures that became new since the last call, for the owner to
// record as events (the owner alone writes the event log).
func (h *hookFailures) takeFresh() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.fresh
	h.fresh = nil
	return out
}

// warnings are the failures as status warnings, in a stable order.
func (h *hookFailures) warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Sorted(maps.Values(h.last))
}

// hookDone runs on a hook's goroutine: count it, remember a failure, and let the owner
// publish (never blocking: the kick coalesces).
func (a *Agent) hookDone(res hooks.Result) {
	a.metrics.HookRun(res.Hook, res.Status)
	msg := ""
	if res.Err != nil {
		// Short for the status line; the log line has the command and its output.
		cause := res.Err
		if u := errors.Unwrap(cause); u != nil {
			cause = u
		}
		msg = "hooks." + res.Hook + " failed: " + cause.Error()
	}
	a.hookFails.set(res.Hook, msg)
	kick(a.k.hooks)
}

// hookStep is HEAD before a step whose hook has a command.
type hookStep struct {
	hook, old string
	ok        bool
}

// hookStart reads HEAD before a step, only when hook has a command (a file read).
func (a *Agent) hookStart(hook string) hookStep {
	if !a.hooks.Configured(hook) {
		return hookStep{}
	}
	h, err := a.repo.Head()
	if err != nil {
		a.log.Warn("hook: read HEAD", "hook", hook, "err", err)
		return hookStep{}
	}
	return hookStep{hook: hook, old: h, ok: true}
}

// hookEnd hands the hook the range HEAD moved over during the step. It runs on the hook's
// goroutine, after the step and outside the writer lock; HEAD that did not move runs nothing.
func (a *Agent) hookEnd(s hookStep) {
	if !s.ok {
		return
	}
	nw, err := a.repo.Head()
	if err != nil {
		a.log.Warn("hook: read HEAD", "hook", s.hook, "err", err)
		return
	}
	a.hooks.Notify(s.hook, s.old, nw)
}
