// Package workpool is memd's one worker pool: a fixed number of goroutines that take the
// indexes 0..n-1 in turn, so a slow item does not hold up the rest of its share.
package workpool

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// Each runs fn(i) for every i in [0, n) on min(workers, n) goroutines (at least one) and
// returns when all have run. Every fn runs, whatever the others return: the error is the
// join of the non-nil ones in index order (nil when there are none), as if they had run one
// after another. fn is called concurrently; a result goes in its own slot (out[i]) or over a
// channel.
func Each(n, workers int, fn func(i int) error) error {
	if n <= 0 {
		return nil
	}
	type failure struct {
		i   int
		err error
	}
	var (
		next  atomic.Int64
		mu    sync.Mutex
		fails []failure
		wg    sync.WaitGroup
	)
	for range min(max(workers, 1), n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					mu.Lock()
					fails = append(fails, failure{i, err})
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	slices.SortFunc(fails, func(a, b failure) int { return a.i - b.i })
	errs := make([]error, len(fails))
	for k, f := range fails {
		errs[k] = f.err
	}
	return errors.Join(errs...)
}
