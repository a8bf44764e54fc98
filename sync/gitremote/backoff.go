package gitremote

import (
	"math/rand/v2"
	"time"
)

// Backoff defaults: the first retry after about a second, doubling, capped
// at ten minutes (docs/ARCHITECTURE.md §4).
const (
	DefaultBackoffMin = time.Second
	DefaultBackoffMax = 10 * time.Minute
)

// Backoff computes retry delays for a failing remote: exponential with
// jitter, capped, reset on success. The zero value is ready to use with the
// defaults. Not safe for concurrent use (the owner loop holds it).
type Backoff struct {
	Min, Max time.Duration // zero → DefaultBackoffMin / DefaultBackoffMax
	// Rand returns a number in [0,1); nil → math/rand/v2. Inject it for
	// deterministic tests.
	Rand func() float64

	n int // failures since the last Reset
}

// Next returns the delay before the next attempt and counts a failure.
// The delay is drawn from [d/2, d) where d = Min·2^n capped at Max ("equal
// jitter"): never a burst of instant retries, and clients that failed
// together spread out.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = DefaultBackoffMin
	}
	if hi <= 0 {
		hi = DefaultBackoffMax
	}
	if hi < lo {
		hi = lo
	}
	d := lo
	for i := 0; i < b.n && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	b.n++
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	f := r()
	if f < 0 || f >= 1 {
		f = 0
	}
	return d/2 + time.Duration(f*float64(d/2))
}

// Failures is the number of Next calls since the last Reset.
func (b *Backoff) Failures() int { return b.n }

// Reset starts over after a success.
func (b *Backoff) Reset() { b.n = 0 }

// NewBackoff returns a Backoff from min to max (zero = defaults) drawing
// jitter from rnd (nil = math/rand/v2).
func NewBackoff(min, max time.Duration, rnd func() float64) *Backoff {
	return &Backoff{Min: min, Max: max, Rand: rnd}
}
