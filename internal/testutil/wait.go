package testutil

import (
	"testing"
	"time"
)

// PollEvery is how often Poll and WaitFor look at their condition: often enough that a
// wait ends soon after the condition holds, seldom enough that a condition which runs git
// does not load a shared machine.
const PollEvery = 25 * time.Millisecond

// Poll checks cond every PollEvery until it holds (true) or timeout has passed (false). It
// is a deadline, not a sleep: it returns as soon as cond holds.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(PollEvery)
	}
	return true
}

// WaitFor is Poll that fails the test when the deadline passes, naming what it waited for
// and adding describe's account of what it saw (describe may be nil).
func WaitFor(t testing.TB, what string, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	if !Poll(timeout, cond) {
		msg := ""
		if describe != nil {
			msg = describe()
		}
		t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, msg)
	}
}
