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

// ProcessGroups, when set, is told of each driver process group as it starts (running
// true) and after it ended: a filter memd runs in the work tree is not "a git running in
// the repo" (gitrepo sets it to gitstore.OwnProcessGroup).
var ProcessGroups func(pgid int, running bool)

// startOwn starts c and registers its process group; wait waits and forgets it.
func startOwn(c *exec.Cmd) (wait func() error, err error) {
	if err := c.Start(); err != nil {
		return nil, err
	}
	pid := c.Process.Pid
	if f := ProcessGroups; f != nil {
		f(pid, true)
	}
	return func() error {
		err := c.Wait()
		if f := ProcessGroups; f != nil {
			f(pid, false)
		}
		return err
	}, nil
}

// killGroup kills c's whole process group.
func killGroup(c *exec.Cmd) error {
	if c.Process == nil {
		return nil
	}
	return syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}
