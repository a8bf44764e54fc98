package sleep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
)

// benchLedger is n records, a tenth of them expired hard-expiry notes.
func benchLedger(n int) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		var lc string
		switch i % 10 {
		case 0:
			lc = `,"lifecycle":{"mode":"hard-expiry","expiresAt":"2025-06-01T00:00:00Z"}`
		case 1:
			lc = `,"lifecycle":{"mode":"soft-expiry","expiresAt":"2027-06-01T00:00:00Z"}`
		case 2:
			lc = `,"lifecycle":{"mode":"read-count","remainingReads":3}`
		case 3, 4:
			lc = `,"lifecycle":{"mode":"persistent"}`
		}
		typ := "note"
		if lc == "" {
			typ = []string{"rule", "lesson"}[i%2]
		}
		fmt.Fprintf(&b, `{"id":"rec-%06d","type":"%s","role":"dev","text":"record number %d about the checkout service and its rollback order","createdAt":"2025-01-01T00:00:00Z","context":["projects/checkout/**"],"repos":["shop"]%s}`+"\n", i, typ, i, lc)
	}
	return b.Bytes()
}

// BenchmarkExpireLedger100k plans expire on a 100k-line ledger (parse, judge, drain with
// drainedAt/drainReason, re-encode); compare with BenchmarkJSONRoundTrip100k on the same data:
//
//	go test -run '^$' -bench 'Ledger100k|JSONRoundTrip100k' ./sleep/
func BenchmarkExpireLedger100k(b *testing.B) {
	data := benchLedger(100000)
	env := &planEnv{cfg: memd.DefaultConfig(), now: fixNow, log: slog.New(slog.DiscardHandler)}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		s := &snapshot{files: map[string]bool{}, mems: map[string]*memfile.Memory{}, overlay: map[string][]byte{}, virtual: true}
		p := newPlan()
		if err := planLedger(s, env, p, "memory.jsonl", data, 14*24*time.Hour); err != nil {
			b.Fatal(err)
		}
		if p.counts["drained"] != 10000 {
			b.Fatalf("drained %d", p.counts["drained"])
		}
	}
}

// BenchmarkJSONRoundTrip100k is the baseline: encoding/json decode + encode of every line.
func BenchmarkJSONRoundTrip100k(b *testing.B) {
	data := benchLedger(100000)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		var out bytes.Buffer
		for _, line := range bytes.Split(bytes.TrimRight(data, "\n"), []byte{'\n'}) {
			var m map[string]any
			if err := json.Unmarshal(line, &m); err != nil {
				b.Fatal(err)
			}
			enc, _ := json.Marshal(m)
			out.Write(enc)
			out.WriteByte('\n')
		}
	}
}
