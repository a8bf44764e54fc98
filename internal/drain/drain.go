// Package drain reads and discards what a caller pipes into a short-lived command. Claude Code
// writes its session JSON to the stdin of its status line command; reading it means the writer
// never sees a broken pipe. It imports only what package os already does, so the fast path of
// `memd status` (internal/fastpath) can use it without waiting on other packages' inits.
package drain

import (
	"io"
	"os"
	"time"
)

// Input reads r to its end, or to max bytes, or for at most wait, whichever comes first, and
// discards it. A terminal (any character device) is never read, so a person running the
// command by hand is never kept waiting; nil is nothing to read.
func Input(r io.Reader, max int64, wait time.Duration) {
	if r == nil {
		return
	}
	if f, ok := r.(*os.File); ok {
		fi, err := f.Stat()
		if err != nil || fi.Mode()&os.ModeCharDevice != 0 {
			return
		}
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(r, max))
		close(done)
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
	}
}
