package memd

import (
	"errors"
	"strings"
	"testing"
)

// ParsePhase takes exactly the names config and flags spell (byte for
// byte: no case folding, no trimming) and names the bad input with the sentinel callers test.
func TestParseNames(t *testing.T) {
	type result struct {
		got string
		err error
	}
	phase := func(s string) result { p, err := ParsePhase(s); return result{string(p), err} }
	cases := []struct {
		name     string
		parse    func(string) result
		in       string
		sentinel error // nil: in parses to itself
		lists    string
	}{
		{"phase expire", phase, "expire", nil, ""},
		{"phase arcs", phase, "arcs", nil, ""},
		{"phase archive", phase, "archive", nil, ""},
		{"phase tidy", phase, "tidy", nil, ""},
		{"phase unknown", phase, "nap", ErrUnknownPhase, "expire, arcs, archive, tidy"},
		{"phase case", phase, "Expire", ErrUnknownPhase, "expire, arcs, archive, tidy"},
		{"phase spaced", phase, " tidy", ErrUnknownPhase, "expire, arcs, archive, tidy"},
		{"phase empty", phase, "", ErrUnknownPhase, "expire, arcs, archive, tidy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.parse(c.in)
			if c.sentinel == nil {
				if r.err != nil || r.got != c.in {
					t.Fatalf("parse(%q) = %q, %v; want itself", c.in, r.got, r.err)
				}
				return
			}
			if !errors.Is(r.err, c.sentinel) {
				t.Fatalf("parse(%q) err = %v, want %v", c.in, r.err, c.sentinel)
			}
			if r.got != "" {
				t.Errorf("parse(%q) returned %q beside its error", c.in, r.got)
			}
			if msg := r.err.Error(); !strings.Contains(msg, `"`+c.in+`"`) || !strings.Contains(msg, c.lists) {
				t.Errorf("parse(%q) error %q: want the input quoted and %q listed", c.in, msg, c.lists)
			}
		})
	}
}

// BucketOf runs on every path a walk sees: it must not
// allocate, on a hit or a miss.
func TestBucketOfDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(200, func() {
		_ = BucketOf("areas/x.html")
		_ = BucketOf(".memhtml/index.db")
		_ = ModeSoftExpiry.Known()
		_ = LifecycleMode("forever").Known()
	}); n != 0 {
		t.Fatalf("%v allocations a run, want 0", n)
	}
}
