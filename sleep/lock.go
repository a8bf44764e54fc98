package sleep

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// acquireWriterLock takes the writer lock (FORMATS §5). PRIVATE STAND-IN until memd.AcquireLock
// lands: O_CREAT|O_EXCL, polled every 50 ms, no stale takeover.
func acquireWriterLock(ctx context.Context, path string, timeout time.Duration, why string) (release func() error, err error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	host, _ := os.Hostname()
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(f, "pid: %d\nhostname: %s\nacquired_at: %s\ncontext: %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339), why)
			f.Close()
			return func() error { return os.Remove(path) }, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("writer lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("writer lock %s: held by another writer after %s", path, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
