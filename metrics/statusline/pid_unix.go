//go:build unix

package statusline

import (
	"errors"
	"syscall"
)

// PIDAlive reports whether a process with this pid exists (signal 0 probes without sending).
// EPERM means it exists but belongs to someone else.
func PIDAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
