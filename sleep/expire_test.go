package sleep

import (
	"log/slog"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
)

// Sleep's drain at the instants where it used to disagree with the inventory's gauge (agent
// TestNoteStateAtBoundaries holds the gauge to the same states): at exactly expiresAt the
// note stays, at exactly the end of the grace it is stale but stays, an unparseable
// expiresAt is kept and reported.
func TestExpireAtNoteBoundaries(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	grace := 14 * 24 * time.Hour
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }
	cases := []struct {
		name, js string
		drained  int
		stale    int
		invalid  int
	}{
		{"hard at expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + at(0) + `"}}`, 0, 0, 0},
		{"hard just past", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"` + at(-time.Nanosecond) + `"}}`, 1, 0, 0},
		{"soft at expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(0) + `"}}`, 0, 0, 0},
		{"soft at grace end", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(-grace) + `"}}`, 0, 1, 0},
		{"soft past grace end", `{"id":"a","type":"note","lifecycle":{"mode":"soft-expiry","expiresAt":"` + at(-grace-time.Nanosecond) + `"}}`, 1, 1, 0},
		{"unparseable expiresAt", `{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"next tuesday"}}`, 0, 0, 1},
	}
	cfg := memd.DefaultConfig()
	cfg.Expire.SoftGrace = memd.Duration(grace)
	env := &planEnv{cfg: cfg, now: now, log: slog.New(slog.DiscardHandler)}
	for _, c := range cases {
		s := &snapshot{files: map[string]bool{}, mems: map[string]*memfile.Memory{}, overlay: map[string][]byte{}, virtual: true}
		p := newPlan()
		if err := planLedger(s, env, p, "memory.jsonl", []byte(c.js+"\n"), grace); err != nil {
			t.Fatal(err)
		}
		if p.counts["drained"] != c.drained || p.counts["stale"] != c.stale || p.counts["invalid"] != c.invalid {
			t.Errorf("%s: drained=%d stale=%d invalid=%d, want %d %d %d", c.name,
				p.counts["drained"], p.counts["stale"], p.counts["invalid"], c.drained, c.stale, c.invalid)
		}
	}
}
