package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

func TestJudgeNoteBoundaries(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace := 14 * 24 * time.Hour
	rec := func(js string) *Record {
		r, err := ParseRecord([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	iso := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	cases := []struct {
		name, js     string
		drain, stale bool
		reason       memd.LifecycleMode
	}{
		{"hard 1s past", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + iso(-time.Second) + `"}}`, true, false, memd.ModeHardExpiry},
		{"hard exactly now", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + iso(0) + `"}}`, false, false, ""},
		{"hard 1s ahead", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + iso(time.Second) + `"}}`, false, false, ""},
		{"soft 1s ahead", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + iso(time.Second) + `"}}`, false, false, ""},
		{"soft 1s past", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + iso(-time.Second) + `"}}`, false, true, ""},
		{"soft grace not over", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + iso(-grace+time.Second) + `"}}`, false, true, ""},
		{"soft grace over", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + iso(-grace-time.Second) + `"}}`, true, true, memd.ModeSoftExpiry},
		{"read-count 0", `{"id":"a","type":"note","lifecycle":{"mode":"read-count","remainingReads":0}}`, true, false, memd.ModeReadCount},
		{"read-count -1", `{"id":"a","type":"note","lifecycle":{"mode":"read-count","remainingReads":-1}}`, true, false, memd.ModeReadCount},
		{"read-count 1", `{"id":"a","type":"note","lifecycle":{"mode":"read-count","remainingReads":1}}`, false, false, ""},
		{"persistent", `{"id":"a","type":"note","lifecycle":{"mode":"persistent"}}`, false, false, ""},
		{"rule with a past expiry", `{"id":"a","type":"rule","lifecycle":{"mode":"hard-expiry","expiresAt":"2000-01-01"}}`, false, false, ""},
		{"lesson read out", `{"id":"a","type":"lesson","lifecycle":{"mode":"read-count","remainingReads":0}}`, false, false, ""},
	}
	for _, c := range cases {
		v := JudgeNote(rec(c.js), now, grace)
		if v.Drain != c.drain || v.Stale != c.stale || v.Reason != c.reason {
			t.Errorf("%s: got drain=%v stale=%v reason=%q, want %v %v %q", c.name, v.Drain, v.Stale, v.Reason, c.drain, c.stale, c.reason)
		}
	}
	bad := JudgeNote(rec(`{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"next tuesday"}}`), now, grace)
	if bad.Drain || !strings.Contains(bad.Bad, "next tuesday") {
		t.Errorf("unparseable expiresAt: %+v (want kept, reported naming the value)", bad)
	}
}

// The instants where the inventory's gauge and sleep's drain used to
// disagree (exactly at expiresAt, exactly at the end of the grace, an unparseable
// expiresAt); agent and sleep test their consumers against the same states.
func TestJudgeNoteStateAtBoundaries(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace := 14 * 24 * time.Hour
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	cases := []struct{ name, js, want string }{
		{"hard at expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + at(0) + `"}}`, NoteLive},
		{"soft at expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(0) + `"}}`, NoteLive},
		{"soft at grace end", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(-grace) + `"}}`, NoteStale},
		{"soft past grace end", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(-grace-time.Nanosecond) + `"}}`, NoteExpired},
		{"unparseable expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"soon"}}`, NoteLive},
		{"read-count without reads", `{"id":"a","type":"note","lifecycle":{"mode":"read-count"}}`, NoteLive},
	}
	for _, c := range cases {
		r, err := ParseRecord([]byte(c.js))
		if err != nil {
			t.Fatal(err)
		}
		if got := JudgeNote(r, now, grace).State(); got != c.want {
			t.Errorf("%s: state %q, want %q", c.name, got, c.want)
		}
	}
}
