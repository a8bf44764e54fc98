// Package testutil holds what the tests that drive the real memd binary share (e2e/,
// reliability/ and a few package tests): building it once, a buffer a process writes to
// while the test reads it, memd processes with captured logs (Daemon, Run), polling with a
// deadline (Poll, WaitFor), git run with an isolated environment (IsolatedEnv, Git) and a
// smart-HTTP git server (GitHTTPServer); and what every package test shares, RunGit and
// WriteFile. Test code only: nothing else imports it.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// LockedBuffer is a bytes.Buffer safe to read while a process writes to it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// BuildMemd builds cmd/memd (without -race: the binary under test should run at its real
// speed) into a new temp dir. remove deletes that dir.
func BuildMemd() (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "memd-test-bin")
	if err != nil {
		return "", func() {}, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	bin = filepath.Join(dir, "memd")
	// Built as `make build` builds it (static), so the tests run the binary users install.
	cmd := exec.Command("go", "build", "-o", bin, "github.com/memd-dev/memd/cmd/memd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		remove()
		return "", func() {}, fmt.Errorf("go build memd: %v\n%s", err, out)
	}
	return bin, remove, nil
}
