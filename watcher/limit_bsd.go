//go:build darwin || freebsd || netbsd || openbsd || dragonfly

package watcher

import (
	"log/slog"
	"syscall"
)

// openMax is darwin's OPEN_MAX: setrlimit refuses a soft limit above it (or above
// kern.maxfilesperproc) even when the hard limit is "unlimited".
const openMax = 10240

// raiseOpenFileLimit lifts RLIMIT_NOFILE's soft limit towards the hard one: kqueue needs
// a file descriptor for every watched directory and file.
func raiseOpenFileLimit(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-file limit", "err", err)
		return
	}
	if lim.Cur >= lim.Max {
		return
	}
	was := lim.Cur
	want := lim
	want.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		if lim.Max > openMax && lim.Cur < openMax {
			want.Cur = openMax
			err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want)
		}
		if err != nil {
			log.Warn("cannot raise the open-file limit", "soft", was, "hard", lim.Max, "err", err)
			return
		}
	}
	log.Debug("raised the open-file limit", "from", was, "to", want.Cur)
}
