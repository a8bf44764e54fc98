package e2e

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// The Claude Code mod (integrations/claude-code) checked by the real engine, offline: npm
// @anthropic-ai/claude-code (testutil.ClaudePackage) with nonessential traffic off and a
// private config dir, so nothing is sent and nothing lands in ~/.claude.

const claudeTimeout = 3 * time.Minute

// modDir is the mod's folder in this checkout.
func modDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "integrations", "claude-code"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// claude runs the engine to completion in dir and returns its combined output and exit code.
func claude(t *testing.T, c testutil.Claude, dir string, env []string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), claudeTimeout)
	defer cancel()
	cmd := c.Command(ctx, dir, env, args...) // no stdin: -p must not wait on a terminal
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("claude %s: no answer in %s\n%s", strings.Join(args, " "), claudeTimeout, out)
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("claude %s: %v", strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return string(out), code
}

// TestClaudeModValidates: `claude plugin validate --strict` accepts the mod (its own
// TypeScript checks of hooks/, types/ and tests/ included).
func TestClaudeModValidates(t *testing.T) {
	t.Parallel()
	c := testutil.InstallClaude(t)
	out, code := claude(t, c, t.TempDir(), nil, "plugin", "validate", "--strict", modDir(t))
	if code != 0 || !strings.Contains(out, "Validation passed") {
		t.Fatalf("claude plugin validate --strict: exit %d\n%s", code, out)
	}
}

// TestClaudeModTests: the mod's own payload tests pass under the engine's test kit, against
// the fixtures memd itself wrote (metrics.TestModFixtures).
func TestClaudeModTests(t *testing.T) {
	t.Parallel()
	c := testutil.InstallClaude(t)
	out, code := claude(t, c, t.TempDir(), nil, "plugin", "test", modDir(t))
	if code != 0 || !strings.Contains(out, " 0 fail") || strings.Contains(out, "(fail)") {
		t.Fatalf("claude plugin test: exit %d\n%s", code, out)
	}
}

// TestClaudeModTestsCatchWrongPayload: the same suite run against a document whose colours are
// wrong fails, naming the payload test: the suite can fail.
func TestClaudeModTestsCatchWrongPayload(t *testing.T) {
	t.Parallel()
	c := testutil.InstallClaude(t)
	dir := filepath.Join(t.TempDir(), "claude-code")
	copyTree(t, modDir(t), dir)
	fx := filepath.Join(dir, "tests", "fixtures", "status.ts")
	b, err := os.ReadFile(fx)
	if err != nil {
		t.Fatal(err)
	}
	good := `{\"text\":\"+2 ~1\",\"kind\":\"ok\"}`
	if !strings.Contains(string(b), good) {
		t.Fatalf("%s lacks %s: update this test with the fixtures", fx, good)
	}
	broken := strings.ReplaceAll(string(b), good, `{\"text\":\"+2 ~1\",\"kind\":\"warn\"}`)
	if err := os.WriteFile(fx, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := claude(t, c, t.TempDir(), nil, "plugin", "test", dir)
	if code != 1 || !strings.Contains(out, "(fail) memd in the sidebar > an open sidebar takes memd's section") {
		t.Fatalf("claude plugin test on a wrong payload: exit %d, want 1 naming the section test\n%s", code, out)
	}
}

// TestClaudeModLive: a real `memd run` on a demo repo, and the real engine with the mod loaded
// answers `/memd status` with memd's current line; with no memd on PATH, one line says so.
func TestClaudeModLive(t *testing.T) {
	t.Parallel()
	c := testutil.InstallClaude(t)
	w := newWorld(t)
	if err := os.WriteFile(w.config, []byte(baseConfig+"repo: "+w.repo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := w.memd("init", "--demo", "--config", w.config, w.repo); code != 0 {
		t.Fatalf("memd init --demo: exit %d\n%s", code, out)
	}
	d := w.start()
	// Idle and committed: the line stands still while the engine reads it.
	var doc struct {
		State   string `json:"state"`
		Pending int    `json:"pending"`
	}
	testutil.WaitFor(t, "memd idle (not busy, nothing pending)", startTimeout, func() bool {
		out, _ := w.memd("status", "--config", w.config, "--format", "json")
		return json.Unmarshal([]byte(out), &doc) == nil && doc.State != "" && doc.State != "busy" && doc.Pending == 0
	}, d.Describe)

	path := filepath.Dir(memdBin) + string(os.PathListSeparator) + os.Getenv("PATH")
	env := append(append([]string(nil), w.env...), "PATH="+path, "MEMD_CONFIG="+w.config)
	var want, got string
	for try := 0; try < 3; try++ { // memd may publish (its clock moves a minute) between the two reads
		line, _ := w.memd("status", "--config", w.config)
		want = strings.TrimSpace(line)
		out, code := claude(t, c, w.home, env, "--plugin-dir", modDir(t), "-p", "/memd status")
		if code != 0 {
			t.Fatalf("claude -p /memd status: exit %d\n%s", code, out)
		}
		got = strings.SplitN(strings.TrimSpace(out), "\n", 2)[0]
		if got == want {
			break
		}
	}
	if got != want || !strings.HasPrefix(want, "memd: ") {
		t.Fatalf("claude -p /memd status first line = %q, want memd's own line %q%s", got, want, d.Describe())
	}
	t.Logf("claude -p /memd status: %s", got)

	noMemd := append(append([]string(nil), w.env...), "PATH=/usr/bin:/bin", "MEMD_CONFIG="+w.config)
	out, code := claude(t, c, w.home, noMemd, "--plugin-dir", modDir(t), "-p", "/memd status")
	if code != 0 || strings.TrimSpace(out) != "memd: not installed: no memd on PATH" {
		t.Fatalf("claude -p /memd status without memd: exit %d\n%s", code, out)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
}

// TestClaudeModMarketplaceInstall: the README's other way, a local marketplace: `claude plugin
// marketplace add integrations` and `claude plugin install memd@memd-local` in a private config
// dir, then a session without --plugin-dir has /memd.
func TestClaudeModMarketplaceInstall(t *testing.T) {
	t.Parallel()
	c := testutil.InstallClaude(t)
	market := filepath.Dir(modDir(t))
	dir := t.TempDir()
	if out, code := claude(t, c, dir, nil, "plugin", "validate", "--strict", market); code != 0 {
		t.Fatalf("claude plugin validate --strict %s: exit %d\n%s", market, code, out)
	}
	for _, args := range [][]string{{"plugin", "marketplace", "add", market}, {"plugin", "install", "memd@memd-local"}} {
		if out, code := claude(t, c, dir, nil, args...); code != 0 {
			t.Fatalf("claude %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	env := append(os.Environ(), "PATH=/usr/bin:/bin") // no memd: the mod says so
	out, code := claude(t, c, dir, env, "-p", "/memd status")
	if code != 0 || strings.TrimSpace(out) != "memd: not installed: no memd on PATH" {
		t.Fatalf("installed mod, claude -p /memd status: exit %d\n%s", code, out)
	}
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
