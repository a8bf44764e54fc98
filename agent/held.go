package agent

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/secrets"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// guardRepo installs the secret scan on the session's repo (docs/ARCHITECTURE.md §11) unless
// secrets.scan is false. The rules are compiled at the first commit that needs them (or
// by preloadSecrets in the daemon), never at start-up of a command that does not commit.
func guardRepo(repo *gitrepo.Repo, cfg memd.Config) *secrets.Guard {
	if !cfg.Secrets.Scan {
		return nil
	}
	conf := cfg.Secrets.Config
	if conf != "" && !filepath.IsAbs(conf) {
		conf = filepath.Join(cfg.Repo, conf) // a relative path names a file in the repo, as gitleaks' --config from its root
	}
	g := secrets.NewGuard(cfg.Repo, filepath.ToSlash(cfg.Expire.Ledger), conf)
	repo.SetGuard(g)
	return g
}

// preloadSecrets compiles the rules off the owner's path, so the daemon's first commit
// does not pay for it; a bad secrets.config is logged here and fails each commit (a
// commit is never made unscanned) with the same message.
func (a *Agent) preloadSecrets() {
	g := a.sess.guard
	if g == nil {
		return
	}
	go func() {
		rs, err := g.Rules()
		if err != nil {
			a.log.Error("secret scan rules; commits wait until secrets.config is fixed", "err", err)
			return
		}
		a.log.Debug("secret scan rules loaded", "rules", rs.RuleCount())
	}()
}

// heldState is what the owner knows of the files the guard holds: the document's held
// list and the findings already counted and announced.
type heldState struct {
	list   []statusline.Held
	seen   map[string]bool // path → an event was written for it since it was last held
	counts map[string]bool // path:rule:line → counted in memd_secret_findings_total
}

// noteHeld reads what the guard holds after a job: one event per file that became held
// (none again while it stays held), each new finding counted once, the gauge set.
func (a *Agent) noteHeld() {
	if a.sess.guard == nil {
		return
	}
	h := &a.st.held
	if h.seen == nil {
		h.seen, h.counts = map[string]bool{}, map[string]bool{}
	}
	guarded := a.repo.Guarded()
	var list []statusline.Held
	now := map[string]bool{}
	for _, g := range guarded {
		now[g.Path] = true
		for _, f := range g.Findings {
			list = append(list, statusline.Held{Path: g.Path, Reason: statusline.HeldSecret, Rule: f.Rule, Line: f.Line})
			if k := fmt.Sprintf("%s:%s:%d", g.Path, f.Rule, f.Line); !h.counts[k] {
				h.counts[k] = true
				a.metrics.SecretFindings(f.Rule, 1)
			}
		}
		if !h.seen[g.Path] {
			h.seen[g.Path] = true
			a.heldEvent(g)
		}
	}
	for p := range h.seen {
		if !now[p] {
			delete(h.seen, p)
			a.log.Info("no longer held: committed or gone", "path", p)
		}
	}
	for k := range h.counts {
		if p, _, _ := strings.Cut(k, ":"); !now[p] {
			delete(h.counts, k)
		}
	}
	h.list = list
	a.metrics.HeldFiles(statusline.HeldSecret, len(guarded))
}

// heldEvent: "held areas/x.html: secret (aws-access-token line 3); not committed". The
// log line says the same: rule ids and lines only, never the secret.
func (a *Agent) heldEvent(g gitrepo.Guarded) {
	var why []string
	for _, f := range g.Findings {
		why = append(why, fmt.Sprintf("%s line %d", f.Rule, f.Line))
	}
	what := "not committed"
	if g.Partial {
		what = "those records not committed, the rest is"
	}
	why = slices.Compact(why)
	a.event(statusline.KindWarn, statusline.Part{Text: "held", Kind: statusline.KindWarn},
		statusline.Part{Text: " " + g.Path}, statusline.Part{Text: ": secret (" + strings.Join(why, ", ") + "); " + what, Kind: statusline.KindDim})
	a.log.Warn("secret found; held back from commits", "path", g.Path, "findings", strings.Join(why, ", "), "partial", g.Partial)
}
