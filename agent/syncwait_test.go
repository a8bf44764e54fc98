package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepo"

	"github.com/memd-dev/memd/internal/gitpath"
)

// TestSyncRetryWait: a failed sync waits out the backoff, except when the remote answers and
// only time can fix it (a push race lost sync after sync, a commit memd refuses to check
// out): then never longer than pull_interval, however far the backoff has grown.
func TestSyncRetryWait(t *testing.T) {
	grown, pull := 8*time.Minute, time.Second
	for _, c := range []struct {
		name       string
		err        error
		contention bool
		backoff    time.Duration
		want       time.Duration
	}{
		{"offline", fmt.Errorf("fetch origin: %w", gitremote.ErrOffline), false, grown, grown},
		{"auth", fmt.Errorf("fetch origin: %w", gitremote.ErrAuth), false, grown, grown},
		{"race lost past maxContention", fmt.Errorf("push origin: still rejected: %w", gitremote.ErrPushRejected), true, grown, pull},
		{"checkout raced past maxContention", fmt.Errorf("sync: %w", gitrepo.ErrCheckoutRaced), true, grown, pull},
		{"unsafe tree", fmt.Errorf("sync: %w", gitpath.ErrUnsafeTree), false, grown, pull},
		{"a short backoff stays short", fmt.Errorf("push: %w", gitremote.ErrPushRejected), true, 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		if got := syncRetryWait(c.err, c.contention, c.backoff, pull); got != c.want {
			t.Errorf("%s: wait %s, want %s", c.name, got, c.want)
		}
	}
}

// TestSyncRetryWaitPushRefused: a push the remote refused for its own reason (a hook, push
// protection) is asked again no faster than pull_interval, and never sooner than the
// backoff.
func TestSyncRetryWaitPushRefused(t *testing.T) {
	refused := fmt.Errorf("push origin: %w", gitremote.ErrPushRefused)
	pull := time.Minute
	for _, c := range []struct{ backoff, want time.Duration }{
		{time.Second, pull}, {8 * time.Minute, 8 * time.Minute},
	} {
		if got := syncRetryWait(refused, false, c.backoff, pull); got != c.want {
			t.Errorf("backoff %s: wait %s, want %s", c.backoff, got, c.want)
		}
	}
}
