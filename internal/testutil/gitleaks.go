package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// GitleaksVersion is the gitleaks whose rules memd vendors (internal/secrets/gitleaks.toml):
// the parity tests compare memd's matcher with this CLI.
const GitleaksVersion = "v8.30.1"

// Gitleaks returns the path of the gitleaks CLI at GitleaksVersion, `go install`ed once per
// machine into a cache outside the repo (MEMD_GITLEAKS_CACHE, else the user cache dir's
// memd-test/gitleaks-<version>). Concurrent test binaries wait on a file lock. When it
// cannot be installed (no network, no module proxy) the test is skipped loudly, except
// under CI, where it fails.
func Gitleaks(t testing.TB) string {
	t.Helper()
	root := os.Getenv("MEMD_GITLEAKS_CACHE")
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "memd-test", "gitleaks-"+GitleaksVersion)
	}
	bin := filepath.Join(root, "gitleaks")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("gitleaks cache %s: %v", root, err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("gitleaks cache lock: %v", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("gitleaks cache lock: %v", err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "github.com/zricethezav/gitleaks/v8@"+GitleaksVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+root, "GOFLAGS=-mod=mod")
	cmd.Dir = root // outside any module: installs the CLI, never touches this repo's go.mod
	if out, err := cmd.CombinedOutput(); err != nil {
		msg := "cannot install gitleaks " + GitleaksVersion + ": " + err.Error() + "\n" + string(out)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING (gitleaks parity): " + msg)
	}
	return bin
}
