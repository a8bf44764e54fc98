package sleep

import (
	"context"
	"log/slog"
	"time"

	"github.com/memd-dev/memd"
)

// acquireWriterLock takes the writer lock (FORMATS §5) through memd.AcquireLock: re-entrant
// in one process, so an owner job that already holds it does not deadlock. The lock is
// stamped with the real time even under --now: other writers read it.
func acquireWriterLock(ctx context.Context, path string, timeout time.Duration, why string, log *slog.Logger) (release func() error, err error) {
	lk, err := memd.AcquireLock(ctx, path, memd.LockOptions{Timeout: timeout, Context: why, Logger: log})
	if err != nil {
		return nil, err
	}
	return lk.Release, nil
}
