//go:build !linux

package procgroup

import "os/exec"

// TreeMarkerVar is set in every command's environment (on Linux the fallback finds a run's
// processes by it; elsewhere it only marks them).
const TreeMarkerVar = "MEMD_PROCTREE"

// KillMode says which mechanism ends a run's descendants.
type KillMode string

// ModeGroup: outside Linux there is neither a cgroup nor a subreaper; the process group is
// killed, and a descendant that made a session of its own (setsid) escapes it.
const ModeGroup KillMode = "process group"

// Mode reports the mechanism the next run will use.
func Mode() KillMode { return ModeGroup }

type tree struct{}

func newTree(cmd *exec.Cmd) *tree { return &tree{} }
func (t *tree) kill(wait bool)    {}
func (t *tree) close()            {}
func (t *tree) refused() bool     { return false }

// Prepare reports the mode; outside Linux there is nothing to set up.
func Prepare() KillMode { return Mode() }
