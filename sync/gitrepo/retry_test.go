package gitrepo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestRetryPause: the pause after a lost race is a random share of attempt slots (capped
// at maxRetrySlots), a slot being the lost round's duration, at least the jitter and at
// most maxRetrySlot; a draw outside [0,1) counts as 0.
func TestRetryPause(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		attempt     int
		round, jit  time.Duration
		rnd         float64
		want        time.Duration
		explanation string
	}{
		{1, 200 * ms, 50 * ms, 0.5, 100 * ms, "one slot, the round's length"},
		{2, 200 * ms, 50 * ms, 0.5, 200 * ms, "the window grows with the attempt"},
		{9, 200 * ms, 50 * ms, 0.5, 200 * ms, "up to maxRetrySlots slots"},
		{2, 5 * ms, 50 * ms, 0.5, 50 * ms, "a fast round: the jitter is the least slot"},
		{2, 4 * time.Second, 50 * ms, 0.5, 500 * ms, "a slow round: the slot stops at maxRetrySlot"},
		{0, 200 * ms, 50 * ms, 0.5, 100 * ms, "attempt 0 counts as 1"},
		{2, 200 * ms, 50 * ms, 0, 0, "a draw of 0 retries at once"},
		{2, 200 * ms, 50 * ms, 1, 0, "a draw out of range counts as 0"},
		{2, 200 * ms, 50 * ms, -3, 0, "a negative draw counts as 0"},
	} {
		if got := retryPause(c.attempt, c.round, c.jit, c.rnd); got != c.want {
			t.Errorf("%s: retryPause(%d, %s, %s, %v) = %s, want %s", c.explanation, c.attempt, c.round, c.jit, c.rnd, got, c.want)
		}
	}
}

// TestPushRaceCommitsBeforeRetry: between rounds that lost the push race, Sync pauses
// through ro.Sleep (here recorded, not slept) for retryPause's share of the round, then
// calls BeforeRetry, and what BeforeRetry committed is in the push that wins: an edit made
// during the race goes out with it, not in a whole new sync after it.
func TestPushRaceCommitsBeforeRetry(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.bDir, "areas/b.html", "b\n")
	mustCommit(t, w.b, "areas")
	locked := 0
	ro := racingPeer(t, w, 2, &locked)
	ro.PushRetryJitter = 40 * time.Millisecond
	ro.Rand = func() float64 { return 0.5 }
	var pauses []time.Duration
	ro.Sleep = func(ctx context.Context, d time.Duration) error {
		pauses = append(pauses, d)
		return ctx.Err()
	}
	retries := 0
	ro.BeforeRetry = func() {
		retries++
		// What a writer saved while the round ran; the agent commits its pending paths.
		p := fmt.Sprintf("areas/during-race-%d.html", retries)
		testutil.WriteFile(t, w.bDir, p, "edited during the race\n")
		mustCommit(t, w.b, p)
	}
	res, err := w.b.Sync(t.Context(), ro)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if !res.Pushed || res.Rounds != 3 || retries != 2 || len(pauses) != 2 {
		t.Fatalf("Pushed %v, Rounds %d, BeforeRetry calls %d, pauses %v; want true, 3, 2, 2 pauses", res.Pushed, res.Rounds, retries, pauses)
	}
	for i, d := range pauses {
		attempt := i + 1
		slots := float64(min(attempt, maxRetrySlots))
		lo := time.Duration(0.5 * float64(ro.PushRetryJitter) * slots)
		hi := time.Duration(0.5 * float64(maxRetrySlot) * slots)
		if d < lo || d > hi {
			t.Errorf("pause after round %d = %s, want within [%s, %s]", attempt, d, lo, hi)
		}
	}
	if got, want := testutil.RunGit(t, w.bare, "rev-parse", "main"), testutil.RunGit(t, w.bDir, "rev-parse", "HEAD"); got != want {
		t.Errorf("remote main %s is not B's HEAD %s", got, want)
	}
	for _, p := range []string{"areas/b.html", "areas/during-race-1.html", "areas/during-race-2.html", "areas/race-2.html"} {
		testutil.RunGit(t, w.bare, "cat-file", "-e", "main:"+p)
	}
}

// TestPushRaceSleepCanceled: a context canceled during the pause ends Sync with the
// context's error, not another round.
func TestPushRaceSleepCanceled(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	testutil.WriteFile(t, w.bDir, "areas/b.html", "b\n")
	mustCommit(t, w.b, "areas")
	locked := 0
	ro := racingPeer(t, w, 1, &locked)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ro.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	ro.BeforeRetry = func() { t.Error("BeforeRetry after a canceled pause") }
	res, err := w.b.Sync(ctx, ro)
	if err != context.Canceled || res.Rounds != 1 || res.Pushed {
		t.Fatalf("Sync = %+v, %v; want 1 round, not pushed, context.Canceled", res, err)
	}
}
