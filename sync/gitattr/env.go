package gitattr

import "os"

// filterEnv is a driver's environment: memd's own, never a prompt on a terminal (memd is
// a daemon; a gpg or credential prompt must fail, not wait).
func filterEnv() []string {
	return append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
}
