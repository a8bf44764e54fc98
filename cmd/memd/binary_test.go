package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

var (
	binOnce   sync.Once
	binPath   string
	binRemove = func() {}
	binErr    error
)

// memdBinary builds memd once for every real-process test of this package; TestMain
// removes it.
func memdBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() { binPath, binRemove, binErr = testutil.BuildMemd() })
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// sandboxHome is a HOME of its own with a .gitconfig naming a user and main as the default
// branch, and the environment that runs git and memd in it (testutil.IsolatedEnv).
func sandboxHome(t *testing.T) (home string, env []string) {
	t.Helper()
	home = t.TempDir()
	gitconfig := filepath.Join(home, ".gitconfig")
	if err := os.WriteFile(gitconfig, []byte("[user]\n\tname = t\n\temail = t@t\n[init]\n\tdefaultBranch = main\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, testutil.IsolatedEnv(home, gitconfig)
}

func TestMain(m *testing.M) {
	code := m.Run()
	binRemove()
	os.Exit(code)
}
