package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/memd-dev/memd/internal/statedir"
)

// PIDFile is the running agent's claim on a repo: `.git/memd/memd.pid`, held with an
// exclusive flock for the life of the process, so a second `memd run` on the same repo
// refuses to start and a SIGKILLed one never leaves a claim behind (the kernel drops flocks
// with the process).
type PIDFile struct {
	f  *os.File
	sd *statedir.Dir
}

// AcquirePIDFile takes the claim or returns ErrAlreadyRunning naming the holder's pid.
// The state dir and the file are opened through internal/statedir: a symlink at either
// (committed or planted) is refused, never written through.
func AcquirePIDFile(stateDir string) (*PIDFile, error) {
	sd, err := statedir.Create(stateDir)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(stateDir, "memd.pid")
	f, err := sd.OpenInPlace("memd.pid", 0o600)
	if err != nil {
		sd.Close()
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		sd.Close()
		pid := strings.TrimSpace(string(b[:n]))
		return nil, fmt.Errorf("%w (pid %s, %s)", ErrAlreadyRunning, pid, p)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &PIDFile{f: f, sd: sd}, nil
}

// Release removes the file and drops the lock.
func (p *PIDFile) Release() {
	if p == nil || p.f == nil {
		return
	}
	_ = p.sd.Remove("memd.pid")
	p.f.Close()
	p.sd.Close()
}
