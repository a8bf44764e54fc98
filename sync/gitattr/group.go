package gitattr

import (
	"os/exec"
	"syscall"
	"time"
)

// ownGroup puts c in a process group of its own, so a kill reaches what `sh -c` started
// (git-lfs under the shell), and bounds how long Wait waits for a child holding a pipe.
func ownGroup(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.WaitDelay = 2 * time.Second
	if c.Cancel != nil { // made with CommandContext: the timeout kills the group
		c.Cancel = func() error { return killGroup(c) }
	}
}

// killGroup kills c's whole process group.
func killGroup(c *exec.Cmd) error {
	if c.Process == nil {
		return nil
	}
	return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}
