package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestDoctorClaudeCodeUnsynced: with agents.claude_code.memory on, `memd doctor` names each
// Claude Code project whose memory is not synced, and why; a project with an origin is not
// named.
func TestDoctorClaudeCodeUnsynced(t *testing.T) {
	roots := t.TempDir()
	testutil.RunGit(t, roots, "init", "-q", "empty")
	testutil.RunGit(t, roots, "init", "-q", "widget")
	testutil.RunGit(t, filepath.Join(roots, "widget"), "remote", "add", "origin", "git@github.com:acme/widget.git")
	cfg := writeConfig(t, "agents:\n  claude_code:\n    memory: true\n    config_dir: "+t.TempDir()+"\n    roots: ["+roots+"]\n")
	code, out, stderr := runApp(t, "doctor", "--config", cfg, "--repo", t.TempDir(), "--json")
	var rep struct {
		Findings []struct{ Severity, Check, Path, Message string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", code, err, out, stderr)
	}
	got := map[string]string{}
	for _, f := range rep.Findings {
		if f.Check == "claude-code" {
			got[f.Path] = f.Severity + ": " + f.Message
		}
	}
	if m := got[filepath.Join(roots, "empty")]; !strings.Contains(m, "warning") || !strings.Contains(m, "no origin") {
		t.Errorf("the checkout with no origin and no commit: %q (findings %v)", m, got)
	}
	if m := got[roots]; !strings.Contains(m, "not a git checkout") {
		t.Errorf("the root that is no checkout: %q (findings %v)", m, got)
	}
	if m, ok := got[filepath.Join(roots, "widget")]; ok {
		t.Errorf("a synced project was named: %q", m)
	}
}
