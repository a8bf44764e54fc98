package fastpath

import (
	"errors"
	"syscall"
)

// pidAlive is statusline.PIDAlive: signal 0 probes without sending; EPERM means the process
// exists but belongs to someone else.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
