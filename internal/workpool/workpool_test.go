package workpool

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
)

// Every index runs exactly once, on no more goroutines than asked for.
func TestEachRunsEveryIndexOnce(t *testing.T) {
	for _, c := range []struct{ n, workers, want int }{
		{0, 4, 0}, {1, 4, 1}, {5, 1, 1}, {100, 3, 3}, {7, 0, 1}, {3, 16, 3},
	} {
		seen := make([]atomic.Int32, c.n)
		var running, peak atomic.Int32
		gate := make(chan struct{})
		started := make(chan struct{}, c.n)
		done := make(chan error, 1)
		go func() {
			done <- Each(c.n, c.workers, func(i int) error {
				r := running.Add(1)
				for p := peak.Load(); r > p && !peak.CompareAndSwap(p, r); p = peak.Load() {
				}
				started <- struct{}{}
				<-gate // hold every worker until want of them are in: the peak is then exact
				running.Add(-1)
				seen[i].Add(1)
				return nil
			})
		}()
		for range c.want {
			<-started
		}
		close(gate)
		if err := <-done; err != nil {
			t.Fatalf("n=%d workers=%d: %v", c.n, c.workers, err)
		}
		if got := int(peak.Load()); got != c.want {
			t.Errorf("n=%d workers=%d: %d goroutines at once, want %d", c.n, c.workers, got, c.want)
		}
		for i := range seen {
			if got := seen[i].Load(); got != 1 {
				t.Errorf("n=%d workers=%d: index %d ran %d times", c.n, c.workers, i, got)
			}
		}
	}
}

// A failing item stops nothing; the errors come back joined in index order.
func TestEachJoinsErrorsInIndexOrder(t *testing.T) {
	var ran atomic.Int32
	errA, errB := errors.New("a"), errors.New("b")
	err := Each(50, 8, func(i int) error {
		ran.Add(1)
		switch i {
		case 3:
			return errA
		case 40:
			return fmt.Errorf("item %d: %w", i, errB)
		}
		return nil
	})
	if ran.Load() != 50 {
		t.Fatalf("%d of 50 items ran", ran.Load())
	}
	if !errors.Is(err, errA) || !errors.Is(err, errB) || err.Error() != "a\nitem 40: b" {
		t.Fatalf("err = %q, want a then item 40: b", err)
	}
	if err := Each(10, 4, func(int) error { return nil }); err != nil {
		t.Fatalf("no failures: %v", err)
	}
}
