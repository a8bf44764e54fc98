package agent

import (
	"testing"
	"time"

	"github.com/memd-dev/memd/format/ledger"
)

// The gauge's state at the instants where it used to disagree with sleep's drain: at
// exactly expiresAt (live: "past" is strict), at exactly the end of the grace (still
// stale), and for an unparseable expiresAt (kept, so live). sleep's
// TestExpireAtNoteBoundaries checks the drain gives the same answers.
func TestNoteStateAtBoundaries(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace := 14 * 24 * time.Hour
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	cases := []struct{ name, js, want string }{
		{"hard at expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + at(0) + `"}}`, "live"},
		{"hard just past", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + at(-time.Nanosecond) + `"}}`, "expired"},
		{"soft at expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(0) + `"}}`, "live"},
		{"soft at grace end", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(-grace) + `"}}`, "stale"},
		{"soft past grace end", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(-grace-time.Nanosecond) + `"}}`, "expired"},
		{"unparseable expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"next tuesday"}}`, "live"},
	}
	for _, c := range cases {
		r, err := ledger.ParseRecord([]byte(c.js))
		if err != nil {
			t.Fatal(err)
		}
		if got := noteState(r, now, grace); got != c.want {
			t.Errorf("%s: gauge state %q, want %q", c.name, got, c.want)
		}
	}
}
