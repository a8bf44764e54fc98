package treemerge

import "testing"

// A minute-precision updatedAt (accepted by the model, memd.ParseTime) was read by the
// merge as no time, so the older edit won. The newer edit wins whichever side it is on.
func TestMergeLedgerMinutePrecisionUpdatedAt(t *testing.T) {
	base := `{"id":"a","type":"note","text":"A","createdAt":"2026-01-01T00:00:00Z"}`
	newer := `{"id":"a","type":"note","text":"A newer","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-11-30T14:32"}`
	older := `{"id":"a","type":"note","text":"A older","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-11-30T14:31:00Z"}`
	for _, c := range []struct{ name, ours, theirs string }{
		{"newer on ours", newer, older},
		{"newer on theirs", older, newer},
	} {
		got, losers := MergeLedger(lines(base), lines(c.ours), lines(c.theirs))
		if string(got) != string(lines(newer)) {
			t.Errorf("%s: merged %s, want the newer edit", c.name, got)
		}
		if len(losers) != 1 || string(losers[0]) != older {
			t.Errorf("%s: losers %q, want the older edit", c.name, losers)
		}
	}
}

// An id that spells another id plus a duplicate's "#n" keeps its own identity.
func TestMergeLedgerIDLikeDuplicateSuffix(t *testing.T) {
	a := `{"id":"a","text":"first"}`
	dup := `{"id":"a","text":"second copy"}`
	hash := `{"id":"a#1","text":"own record"}`
	hashOurs := `{"id":"a#1","text":"own record, edited","updatedAt":"2026-02-01T00:00:00Z"}`
	got, losers := MergeLedger(lines(a, dup, hash), lines(a, dup, hashOurs), lines(a, dup, hash))
	if want := lines(a, dup, hashOurs); string(got) != string(want) || len(losers) != 0 {
		t.Errorf("merged %s losers %q, want %s", got, losers, want)
	}
}
