package hooks

import (
	"encoding/json"
	"errors"
	"io/fs"
	"slices"

	"github.com/memd-dev/memd/internal/statedir"
)

// pending is what a hook has not yet been told about: the HEAD its last success ended at
// (or the first failed run's old HEAD) and every path changed since, so the run after
// three failures lists the failed runs' changes too (docs/ARCHITECTURE.md §11: "covering every change
// since the hook's last success"). It lives in the state dir (hook-<name>.pending.json),
// so a one-shot `memd sync` and a restarted `memd run` carry it on.
type pending struct {
	Old   string   `json:"old"`
	Paths []string `json:"paths"`
}

func pendingName(hook string) string { return "hook-" + hook + ".pending.json" }

// loadPending reads hook's pending record; none (or no state dir) is the zero record. A
// record that cannot be read is dropped with a warning: the hook then sees its own range.
func (r *Runner) loadPending(hook string) pending {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if r.opts.TempDir == "" {
		return r.mem[hook]
	}
	d, err := statedir.Open(r.opts.TempDir)
	if err != nil {
		return pending{}
	}
	defer d.Close()
	b, err := d.ReadFile(pendingName(hook))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("hook: pending changes unreadable; this run lists its own range", "hook", hook, "err", err)
		}
		return pending{}
	}
	var p pending
	if err := json.Unmarshal(b, &p); err != nil {
		r.log.Warn("hook: pending changes unreadable; this run lists its own range", "hook", hook, "err", err)
		return pending{}
	}
	return p
}

// savePending keeps p for hook's next run (after a failure) or, when p is the zero record,
// forgets it (after a success).
func (r *Runner) savePending(hook string, p pending) {
	r.pmu.Lock()
	defer r.pmu.Unlock()
	if r.opts.TempDir == "" {
		if r.mem == nil {
			r.mem = map[string]pending{}
		}
		r.mem[hook] = p
		return
	}
	d, err := statedir.Create(r.opts.TempDir)
	if err != nil {
		r.log.Warn("hook: cannot keep the pending changes", "hook", hook, "err", err)
		return
	}
	defer d.Close()
	if p.Old == "" && len(p.Paths) == 0 {
		if err := d.Remove(pendingName(hook)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("hook: cannot clear the pending changes", "hook", hook, "err", err)
		}
		return
	}
	b, _ := json.Marshal(p)
	if err := d.WriteFile(pendingName(hook), b, 0o600); err != nil {
		r.log.Warn("hook: cannot keep the pending changes", "hook", hook, "err", err)
	}
}

// union is a's paths then b's not in a, each once.
func union(a, b []string) []string {
	seen := make(map[string]bool, len(a)+len(b))
	out := make([]string, 0, len(a)+len(b))
	for _, p := range slices.Concat(a, b) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
