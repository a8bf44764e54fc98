package statusline

import "github.com/memd-dev/memd/internal/proc"

// PIDAlive reports whether a process with this pid exists (internal/proc, which the fast path
// of `memd status` shares).
func PIDAlive(pid int) bool { return proc.Alive(pid) }
