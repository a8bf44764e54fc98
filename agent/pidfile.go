package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PIDFile is the running agent's claim on a repo: `.git/memd/memd.pid`, held with an
// exclusive flock for the life of the process, so a second `memd run` on the same repo
// refuses to start and a SIGKILLed one never leaves a claim behind (the kernel drops flocks
// with the process).
type PIDFile struct {
	f *os.File
}

// AcquirePIDFile takes the claim or returns ErrAlreadyRunning naming the holder's pid.
func AcquirePIDFile(stateDir string) (*PIDFile, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state dir %s: %w", stateDir, err)
	}
	p := filepath.Join(stateDir, "memd.pid")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("pid file %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		pid := strings.TrimSpace(string(b[:n]))
		return nil, fmt.Errorf("%w (pid %s, %s)", ErrAlreadyRunning, pid, p)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &PIDFile{f: f}, nil
}

// Release removes the file and drops the lock.
func (p *PIDFile) Release() {
	if p == nil || p.f == nil {
		return
	}
	_ = os.Remove(p.f.Name())
	p.f.Close()
}
