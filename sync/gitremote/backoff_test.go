package gitremote

import (
	"testing"
	"time"
)

func TestBackoffGrowsCapsAndResets(t *testing.T) {
	b := Backoff{Rand: func() float64 { return 0.999999 }}
	var prev time.Duration
	for i := 0; i < 30; i++ {
		d := b.Next()
		if d > DefaultBackoffMax {
			t.Fatalf("attempt %d: %v over the cap", i, d)
		}
		if d < prev && prev < DefaultBackoffMax*9/10 {
			t.Fatalf("attempt %d: %v shrank from %v before the cap", i, d, prev)
		}
		prev = d
	}
	if prev < DefaultBackoffMax*9/10 {
		t.Fatalf("after 30 failures delay %v never neared the cap", prev)
	}
	if b.Failures() != 30 {
		t.Fatalf("Failures = %d", b.Failures())
	}
	b.Reset()
	if d := b.Next(); d > DefaultBackoffMin {
		t.Fatalf("after Reset delay %v, want <= %v", d, DefaultBackoffMin)
	}
}

func TestBackoffJitterRange(t *testing.T) {
	lo := Backoff{Min: 4 * time.Second, Max: time.Minute, Rand: func() float64 { return 0 }}
	hi := Backoff{Min: 4 * time.Second, Max: time.Minute, Rand: func() float64 { return 0.999999999 }}
	want := []time.Duration{4, 8, 16, 32, 60, 60}
	for i, w := range want {
		w *= time.Second
		l, h := lo.Next(), hi.Next()
		if l != w/2 {
			t.Errorf("step %d: low jitter %v, want %v", i, l, w/2)
		}
		if h >= w || h < w*99/100 {
			t.Errorf("step %d: high jitter %v, want just under %v", i, h, w)
		}
	}
	// A broken random source never produces a negative or huge delay.
	bad := Backoff{Rand: func() float64 { return 7 }}
	if d := bad.Next(); d != DefaultBackoffMin/2 {
		t.Errorf("bad rand: %v", d)
	}
	// Default random source stays in range.
	var def Backoff
	for i := 0; i < 100; i++ {
		if d := def.Next(); d < 0 || d > DefaultBackoffMax {
			t.Fatalf("default rand: %v", d)
		}
	}
}

func TestNewBackoff(t *testing.T) {
	b := NewBackoff(2*time.Second, 5*time.Second, func() float64 { return 0 })
	got := []time.Duration{b.Next(), b.Next(), b.Next()}
	want := []time.Duration{time.Second, 2 * time.Second, 2500 * time.Millisecond}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %v, want %v", i, got[i], want[i])
		}
	}
}
