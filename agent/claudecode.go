package agent

import (
	"context"
	"os"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agents/claudecode"
	"github.com/memd-dev/memd/metrics/statusline"
)

// claudePoll is how often Claude Code's memory dirs are compared with the repo's copy: a
// listing of a few small folders, and what it copies into the repo is then committed and
// synced like any edit.
const claudePoll = time.Second

// claudeState is the owner's Claude Code memory copier and its last pass.
type claudeState struct {
	syncer *claudecode.Syncer
	cfg    memd.ClaudeCodeConfig // what syncer was made with
	last   *statusline.ClaudeCode
}

// startClaudeCode polls Claude Code's memory while agents.claude_code.memory is on at start
// (a reload can turn it off; turning it on takes a restart).
func (a *Agent) startClaudeCode(ctx context.Context) {
	if !a.cfg.Agents.ClaudeCode.Memory {
		return
	}
	kick(a.k.claude)
	go func() {
		t := time.NewTicker(claudePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				kick(a.k.claude)
			}
		}
	}()
}

// doClaudeCode copies every project's memory both ways (owner: no checkout runs meanwhile).
// It reports whether the document's part changed.
func (a *Agent) doClaudeCode() bool {
	cc := a.cfg.Agents.ClaudeCode
	if !cc.Memory {
		changed := a.st.claude.last != nil
		a.st.claude = claudeState{}
		return changed
	}
	if a.st.claude.syncer == nil || !sameClaudeConfig(a.st.claude.cfg, cc) {
		home, _ := os.UserHomeDir()
		a.st.claude = claudeState{cfg: cc, syncer: claudecode.New(claudecode.Options{
			ConfigDir: claudecode.ConfigDir(memd.ExpandHome(cc.ConfigDir), home), Home: home,
			Roots: expandAll(cc.Roots), Repo: a.cfg.Repo, StateDir: a.cfg.StateDir(),
			Host: a.repo.Hostname(), Now: a.now,
		})}
	}
	if a.st.aside.Reason != "" {
		return false // another writer has the repo: its work tree is not memd's to write
	}
	rep, err := a.st.claude.syncer.Sync()
	if err != nil {
		a.log.Warn("Claude Code memory", "err", err)
		return false
	}
	if rep.Changed > 0 {
		a.log.Info("Claude Code memory copied", "files", rep.Changed)
	}
	doc := claudeDoc(rep)
	changed := a.st.claude.last == nil || !sameClaudeDoc(*a.st.claude.last, doc)
	a.st.claude.last = &doc
	return changed
}

func expandAll(dirs []string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = memd.ExpandHome(d)
	}
	return claudecode.Abs(out)
}

func sameClaudeConfig(a, b memd.ClaudeCodeConfig) bool {
	if a.Memory != b.Memory || a.ConfigDir != b.ConfigDir || len(a.Roots) != len(b.Roots) {
		return false
	}
	for i := range a.Roots {
		if a.Roots[i] != b.Roots[i] {
			return false
		}
	}
	return true
}

// claudeDoc is the status document's part of a pass.
func claudeDoc(rep claudecode.Report) statusline.ClaudeCode {
	d := statusline.ClaudeCode{Projects: len(rep.Synced), Synced: []statusline.AgentProject{}, Unsynced: []statusline.AgentProject{}}
	for _, p := range rep.Synced {
		ap := statusline.AgentProject{Path: p.Path, ID: p.ID, LastMachine: p.LastMachine}
		if !p.LastChange.IsZero() {
			t := p.LastChange.UTC().Truncate(time.Second)
			ap.LastChange = &t
		}
		d.Synced = append(d.Synced, ap)
	}
	for _, p := range rep.Unsynced {
		d.Unsynced = append(d.Unsynced, statusline.AgentProject{Path: p.Path, Reason: p.Reason})
	}
	return d
}

func sameClaudeDoc(a, b statusline.ClaudeCode) bool {
	if a.Projects != b.Projects || len(a.Synced) != len(b.Synced) || len(a.Unsynced) != len(b.Unsynced) {
		return false
	}
	for i := range a.Synced {
		x, y := a.Synced[i], b.Synced[i]
		if x.Path != y.Path || x.ID != y.ID || x.LastMachine != y.LastMachine || (x.LastChange == nil) != (y.LastChange == nil) ||
			(x.LastChange != nil && !x.LastChange.Equal(*y.LastChange)) {
			return false
		}
	}
	for i := range a.Unsynced {
		if a.Unsynced[i] != b.Unsynced[i] {
			return false
		}
	}
	return true
}
