package testutil

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The npm packages the conformance tests run for real. Pinned: a test that compares memd
// with a tool must compare with the version the docs name.
const (
	NodePackage    = "node@24"
	MemhtmlPackage = "memhtml@0.15.1"
	ClaudePackage  = "@anthropic-ai/claude-code@2.1.332"
)

// NPMInstall installs pkgs with npm into a cache directory outside the repo
// (MEMD_NPM_CACHE, else the user cache dir's memd-test/npm/<hash of pkgs>) once per machine
// and returns its prefix (binaries under prefix/node_modules/.bin). Concurrent test binaries
// wait on a file lock, so `go test ./...` installs each set once. When npm is missing or its
// registry does not answer, the test is skipped with a loud message, except under CI, where
// it fails: CI must always run the conformance tests.
func NPMInstall(t testing.TB, pkgs ...string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(strings.Join(pkgs, "\n")))
	root := os.Getenv("MEMD_NPM_CACHE")
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "memd-test", "npm")
	}
	prefix := filepath.Join(root, hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		t.Fatalf("npm cache %s: %v", prefix, err)
	}
	done := filepath.Join(prefix, ".installed")
	if _, err := os.Stat(done); err == nil {
		return prefix
	}
	lock, err := os.OpenFile(filepath.Join(prefix, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("npm cache lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("npm cache lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(done); err == nil {
		return prefix
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		unreachable(t, "npm is not installed (apt-get install -y npm)")
	}
	args := append([]string{"install", "--prefix", prefix, "--no-audit", "--no-fund", "--no-save",
		"--loglevel=error"}, pkgs...)
	cmd := exec.Command(npm, args...)
	cmd.Dir = prefix
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		unreachable(t, "npm install "+strings.Join(pkgs, " ")+": "+err.Error()+"\n"+string(out))
	}
	t.Logf("npm install %s: %s", strings.Join(pkgs, " "), time.Since(start).Round(time.Millisecond))
	if err := os.WriteFile(done, []byte(strings.Join(pkgs, "\n")+"\n"), 0o644); err != nil {
		t.Fatalf("npm cache: %v", err)
	}
	return prefix
}

func unreachable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must run this test, but: %s", why)
	}
	t.Skipf("\n\n*** SKIPPED: npm is unreachable, so the real tool cannot be installed ***\n%s\n", why)
}

// Memhtml is the real memhtml CLI (npm memhtml 0.15.1 under Node 24), ready to run.
type Memhtml struct {
	Node string // node_modules/node/bin/node (Node 24)
	CLI  string // memhtml's dist/memhtml.mjs
}

// InstallMemhtml installs node@24 and memhtml@0.15.1 (see NPMInstall).
func InstallMemhtml(t testing.TB) Memhtml {
	t.Helper()
	prefix := NPMInstall(t, NodePackage, MemhtmlPackage)
	m := Memhtml{
		Node: filepath.Join(prefix, "node_modules", "node", "bin", "node"),
		CLI:  filepath.Join(prefix, "node_modules", "memhtml", "dist", "memhtml.mjs"),
	}
	for _, p := range []string{m.Node, m.CLI} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("memhtml install incomplete: %v", err)
		}
	}
	return m
}

// Command runs memhtml against the repo at root with embeddings and the LLM off (offline,
// deterministic), as the conformance tests and hooks use it.
func (m Memhtml) Command(root string, args ...string) *exec.Cmd {
	cmd := exec.Command(m.Node, append([]string{m.CLI}, args...)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "MEMHTML_ROOT="+root, "MEMHTML_EMBED=off", "MEMHTML_LLM=off",
		"PATH="+filepath.Dir(m.Node)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd
}

// Claude is the real Claude Code engine (npm @anthropic-ai/claude-code, ClaudePackage), run
// offline: nonessential traffic off and a private config dir, so nothing is sent and nothing
// lands in the user's ~/.claude.
type Claude struct {
	Bin       string // node_modules/.bin/claude
	ConfigDir string // CLAUDE_CONFIG_DIR, a temp dir of the test
	Home      string // HOME, another: nothing the engine writes can reach the user's
}

// InstallClaude installs ClaudePackage (see NPMInstall) and gives it a private config dir.
func InstallClaude(t testing.TB) Claude {
	t.Helper()
	prefix := NPMInstall(t, ClaudePackage)
	c := Claude{Bin: filepath.Join(prefix, "node_modules", ".bin", "claude"), ConfigDir: t.TempDir(), Home: t.TempDir()}
	if _, err := os.Stat(c.Bin); err != nil {
		t.Fatalf("claude install incomplete: %v", err)
	}
	return c
}

// Command runs the engine with args in dir, killed when ctx ends. env is the base environment
// (nil: the test's); the engine's offline settings are appended so they win.
func (c Claude) Command(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Bin, args...)
	cmd.Dir = dir
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string(nil), env...),
		"HOME="+c.Home,
		"CLAUDE_CONFIG_DIR="+c.ConfigDir,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"NO_COLOR=1",
	)
	return cmd
}
