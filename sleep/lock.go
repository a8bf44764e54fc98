package sleep

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"time"

	"github.com/memd-dev/memd/format/writerlock"
)

// acquireWriterLock takes the writer lock (docs/FORMATS.md §5) through writerlock.Acquire: re-entrant
// in one process, so an owner job that already holds it does not deadlock. The lock is
// stamped with the real time even under --now: other writers read it.
func acquireWriterLock(ctx context.Context, path string, timeout time.Duration, why string, log *slog.Logger) (release func() error, err error) {
	lk, err := writerlock.Acquire(ctx, path, writerlock.Options{Timeout: timeout, Context: why, Logger: log})
	if err != nil {
		return nil, err
	}
	return lk.Release, nil
}

// clearStaleLock removes a writer lock left by a dead process on this host (a sleep killed
// while it held the lock), even when this run has nothing to apply and so never takes the
// lock itself. A lock held by a live process, or one from another host, is left alone.
func clearStaleLock(ctx context.Context, path string, log *slog.Logger) {
	info, err := writerlock.ReadInfo(path)
	if errors.Is(err, fs.ErrNotExist) || err != nil || !writerlock.IsStale(info) {
		return
	}
	// writerlock.Acquire takes a stale lock over (atomically, one winner); release it at once.
	release, err := acquireWriterLock(ctx, path, time.Second, "memd sleep: clearing a stale lock", log)
	if err != nil {
		return
	}
	if err := release(); err != nil {
		log.Warn("release writer lock", "err", err)
	}
}
