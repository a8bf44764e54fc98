// Package proc probes processes by pid. It imports only errors and syscall, so the fast path
// of `memd status` (internal/fastpath) can use it without waiting on other packages' inits.
package proc

import (
	"errors"
	"syscall"
)

// Alive reports whether a process with this pid exists (signal 0 probes without sending).
// EPERM means it exists but belongs to someone else.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
