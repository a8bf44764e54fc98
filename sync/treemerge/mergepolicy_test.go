package treemerge

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
)

func lines(s ...string) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	return []byte(strings.Join(s, "\n") + "\n")
}

func TestKindOf(t *testing.T) {
	p := Policy{}
	idx := []byte("# Memory\n- [[areas/a.html|A]] · type:semantic subject:x · d\n")
	proj := []byte("# P\n## CRITICAL RULES\n- None yet.\n")
	cases := []struct {
		path     string
		contents [][]byte
		want     FileKind
	}{
		{"memory.jsonl", nil, KindLedger},
		{"sub/memory.jsonl", nil, KindOther},
		{"archive/2025/memory.drained.jsonl", nil, KindLineUnion},
		{"memory.conflicts.jsonl", nil, KindLineUnion},
		{"areas/arcs/person-x-2025.html", nil, KindDerived},
		{"areas/arcsx/a.html", nil, KindOther},
		{"areas/inbox/index.html", nil, KindDerived},
		{"index.html", nil, KindDerived},
		{"projects/x/sitemap.xml", nil, KindDerived},
		{"areas/inbox/xindex.html", nil, KindOther},
		{"MEMORY.md", [][]byte{idx, idx, nil}, KindIndexMD},
		{"MEMORY.md", [][]byte{idx, proj}, KindOther},
		{"MEMORY.md", [][]byte{{}, idx, idx}, KindIndexMD},
		{"MEMORY.md", [][]byte{nil, nil}, KindOther},
		{"projects/p/MEMORY.md", [][]byte{proj}, KindProjectMD},
		{"projects/p/MEMORY.md", [][]byte{proj, []byte("## Notes\n")}, KindOther},
		{"areas/x.html", nil, KindOther},
	}
	for _, c := range cases {
		if got := p.KindOf(c.path, c.contents...); got != c.want {
			t.Errorf("KindOf(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	custom := Policy{Ledgers: []string{"ledger/notes.jsonl"}}
	if got := custom.KindOf("ledger/notes.jsonl"); got != KindLedger {
		t.Errorf("custom ledger kind = %v", got)
	}
	if got := custom.KindOf("memory.jsonl"); got != KindOther {
		t.Errorf("memory.jsonl with custom ledger = %v, want other", got)
	}
}

func TestConflictPaths(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 5, 4, 0, time.FixedZone("x", 3600))
	got := memd.ConflictCopyPath("areas/oncall/rollback.html", "Laptop.local", now)
	want := "areas/oncall/rollback.conflict-laptop-20261130T070504Z.html"
	if got != want {
		t.Errorf("ConflictCopyPath = %q, want %q", got, want)
	}
	if got := memd.ConflictCopyPath(".env", "h_1", now); got != ".env.conflict-h-1-20261130T070504Z" {
		t.Errorf("dotfile copy = %q", got)
	}
	if got := memd.ConflictCopyPath("x", "", now); got != "x.conflict-host-20261130T070504Z" {
		t.Errorf("no host = %q", got)
	}
	if got := ConflictsPathFor("memory.jsonl"); got != "memory.conflicts.jsonl" {
		t.Errorf("ConflictsPathFor = %q", got)
	}
	if got := ConflictsPathFor("a/b.jsonl"); got != "a/b.conflicts.jsonl" {
		t.Errorf("ConflictsPathFor nested = %q", got)
	}
}

func TestMergeLineUnion(t *testing.T) {
	base := lines("a", "b")
	ours := lines("a", "b", "o1", "o2")
	theirs := lines("a", "b", "t1")
	got := string(MergeLineUnion(base, ours, theirs))
	if want := "a\nb\nt1\no1\no2\n"; got != want {
		t.Errorf("union = %q, want %q", got, want)
	}
	// same line appended on both: once
	got = string(MergeLineUnion(base, lines("a", "b", "x"), lines("a", "b", "x")))
	if want := "a\nb\nx\n"; got != want {
		t.Errorf("same append = %q", got)
	}
	// theirs dropped a line ours still has: union keeps it
	got = string(MergeLineUnion(base, lines("a", "b"), lines("a")))
	if want := "a\nb\n"; got != want {
		t.Errorf("kept = %q", got)
	}
	// missing final newline and empty sides
	got = string(MergeLineUnion(nil, []byte("o"), nil))
	if got != "o\n" {
		t.Errorf("no newline = %q", got)
	}
}

func TestAppendMissingLines(t *testing.T) {
	got := string(AppendMissingLines([]byte("a\nb"), [][]byte{[]byte("b"), []byte("c"), []byte("c")}))
	if got != "a\nb\nc\n" {
		t.Errorf("AppendMissingLines = %q", got)
	}
	if got := AppendMissingLines([]byte("x\n"), nil); string(got) != "x\n" {
		t.Errorf("nothing to add = %q", got)
	}
}

const (
	recA  = `{"id":"a","type":"note","text":"A","createdAt":"2026-01-01T00:00:00Z"}`
	recB  = `{"id":"b","type":"rule","text":"B","createdAt":"2026-01-01T00:00:00Z"}`
	recC  = `{"id":"c","type":"lesson","text":"C","createdAt":"2026-01-01T00:00:00Z"}`
	recA1 = `{"id":"a","type":"note","text":"A ours","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-03-01T00:00:00Z"}`
	recA2 = `{"id":"a","type":"note","text":"A theirs","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-02-01T00:00:00Z"}`
	recB1 = `{"id":"b","type":"rule","text":"B ours","createdAt":"2026-01-01T00:00:00Z"}`
	recC2 = `{"id":"c","type":"lesson","text":"C theirs","createdAt":"2026-01-01T00:00:00Z"}`
	recD  = `{"id":"d","type":"note","text":"D ours","createdAt":"2026-04-01T00:00:00Z"}`
	recE  = `{"id":"e","type":"note","text":"E theirs","createdAt":"2026-04-01T00:00:00Z"}`
)

func TestMergeLedger(t *testing.T) {
	cases := []struct {
		name               string
		base, ours, theirs []byte
		want               []byte
		losers             []string
	}{
		{"both append different records",
			lines(recA), lines(recA, recD), lines(recA, recE),
			lines(recA, recE, recD), nil},
		{"each changes a different record",
			lines(recA, recB, recC), lines(recA, recB1, recC), lines(recA, recB, recC2),
			lines(recA, recB1, recC2), nil},
		{"both change one id: later updatedAt (ours) wins",
			lines(recA), lines(recA1), lines(recA2),
			lines(recA1), []string{recA2}},
		{"both change one id: later updatedAt (theirs) wins",
			lines(recA), lines(recA2), lines(recA1),
			lines(recA1), []string{recA2}},
		{"tie: theirs wins, ours to conflicts",
			lines(recB), lines(recB1), lines(strings.Replace(recB, "B", "B theirs", 1)),
			lines(strings.Replace(recB, "B", "B theirs", 1)), []string{recB1}},
		{"drained on theirs, unchanged on ours: stays deleted",
			lines(recA, recB), lines(recA, recB, recD), lines(recB),
			lines(recB, recD), nil},
		{"drained on ours, unchanged on theirs: stays deleted",
			lines(recA, recB), lines(recB), lines(recA, recB, recE),
			lines(recB, recE), nil},
		{"drained on ours, changed on theirs: change survives",
			lines(recA, recB), lines(recB), lines(recA2, recB),
			lines(recA2, recB), nil},
		{"drained on theirs, changed on ours: change survives",
			lines(recA, recB), lines(recA1, recB), lines(recB),
			lines(recB, recA1), nil},
		{"both drained the same",
			lines(recA, recB), lines(recB), lines(recB),
			lines(recB), nil},
		{"both added the same id differently",
			lines(recB), lines(recB, recA1), lines(recB, recA2),
			lines(recB, recA1), []string{recA2}},
		{"unparseable lines from both sides kept",
			lines(recA, "garbage-base"), lines(recA, "garbage-base", "{broken ours"), lines(recA, "garbage-base", "not json theirs"),
			lines(recA, "garbage-base", "not json theirs", "{broken ours"), nil},
		{"record without id is kept verbatim",
			lines(recA), lines(recA, `{"text":"no id"}`), lines(recA),
			lines(recA, `{"text":"no id"}`), nil},
		{"identical changes on both sides",
			lines(recA), lines(recA1, recD), lines(recA1, recD),
			lines(recA1, recD), nil},
		{"empty base, both new",
			nil, lines(recD), lines(recE),
			lines(recE, recD), nil},
		{"blank lines dropped",
			lines(recA), lines(recA, "", recD), lines(recA),
			lines(recA, recD), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, losers := MergeLedger(c.base, c.ours, c.theirs)
			if string(got) != string(c.want) {
				t.Errorf("merged:\n%s\nwant:\n%s", got, c.want)
			}
			if len(losers) != len(c.losers) {
				t.Fatalf("losers = %q, want %q", losers, c.losers)
			}
			for i := range losers {
				if string(losers[i]) != c.losers[i] {
					t.Errorf("loser %d = %s, want %s", i, losers[i], c.losers[i])
				}
			}
		})
	}
}

func TestMergeLedgerDuplicateIDsKept(t *testing.T) {
	dup := `{"id":"a","text":"second copy"}`
	got, losers := MergeLedger(lines(recA, dup), lines(recA, dup, recD), lines(recA, dup))
	if want := lines(recA, dup, recD); string(got) != string(want) {
		t.Errorf("dups: %s", got)
	}
	if len(losers) != 0 {
		t.Errorf("losers %q", losers)
	}
}

func TestMergeIndexMDUnion(t *testing.T) {
	h := "# Memory index"
	b1 := "- [[areas/a.html|A]] · type:semantic subject:a · one"
	b2 := "- [[areas/b.html|B]] · type:semantic subject:b · two"
	b3 := "- [[areas/c.html|C]] · type:semantic subject:c · three"
	b2r := "- [[archive/2024/areas/b.html|B]] · type:semantic subject:b · two"
	cases := []struct {
		name               string
		base, ours, theirs []byte
		want               []byte
	}{
		{"union ours first", lines(h, b1), lines(h, b1, b2), lines(h, b1, b3), lines(h, b1, b2, b3)},
		{"duplicates once", lines(h), lines(h, b2, b1), lines(h, b1, b2), lines(h, b2, b1)},
		{"repointed on theirs: old bullet gone", lines(h, b1, b2), lines(h, b1, b2, b3), lines(h, b1, b2r), lines(h, b1, b3, b2r)},
		{"removed on ours stays removed", lines(h, b1, b2), lines(h, b1), lines(h, b1, b2, b3), lines(h, b1, b3)},
		{"theirs' new header line kept after ours", nil, lines(b1), lines(h, b2), lines(b1, h, b2)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := memorymd.MergeIndex(c.base, c.ours, c.theirs); string(got) != string(c.want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// TestMergeLedgerNothingLost checks, on random three-way ledgers, that every
// line a side added or changed ends in the merge or the losers, that
// unparseable lines survive, and that a record deleted on one side and left
// alone on the other stays deleted.
func TestMergeLedgerNothingLost(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rec := func(id, text string, day int) string {
		return fmt.Sprintf(`{"id":%q,"text":%q,"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-02-%02dT00:00:00Z"}`, id, text, day)
	}
	for iter := 0; iter < 2000; iter++ {
		var base []string
		baseByID := map[string]string{}
		for i := 0; i < rng.IntN(6); i++ {
			id := fmt.Sprintf("r%d", i)
			l := rec(id, "base", 1)
			base = append(base, l)
			baseByID[id] = l
		}
		side := func(name string) ([]string, map[string]string) {
			var out []string
			byID := map[string]string{}
			for i, l := range base {
				id := fmt.Sprintf("r%d", i)
				switch rng.IntN(4) {
				case 0: // delete
				case 1:
					l = rec(id, name+" edit", 2+rng.IntN(20))
					fallthrough
				default:
					out = append(out, l)
					byID[id] = l
				}
			}
			for i := 0; i < rng.IntN(3); i++ {
				id := fmt.Sprintf("n%d", rng.IntN(4))
				if _, dup := byID[id]; dup {
					continue
				}
				l := rec(id, name+" new", 2+rng.IntN(20))
				out = append(out, l)
				byID[id] = l
			}
			if rng.IntN(3) == 0 {
				out = append(out, "garbage from "+name)
			}
			return out, byID
		}
		ours, oursByID := side("ours")
		theirs, theirsByID := side("theirs")
		merged, losers := MergeLedger(lines(base...), lines(ours...), lines(theirs...))
		have := map[string]bool{}
		for _, l := range splitLines(merged) {
			have[string(l)] = true
		}
		for _, l := range losers {
			if have[string(l)] {
				t.Fatalf("iter %d: loser also in merge: %s", iter, l)
			}
			have[string(l)] = true
		}
		for _, sideLines := range [][]string{ours, theirs} {
			for _, l := range sideLines {
				if strings.HasPrefix(l, "garbage") && !strings.Contains(string(merged), l) {
					t.Fatalf("iter %d: unparseable line lost: %s", iter, l)
				}
			}
		}
		for _, byID := range []map[string]string{oursByID, theirsByID} {
			for id, l := range byID {
				if l != baseByID[id] && !have[l] {
					t.Fatalf("iter %d: change lost: %s\nbase %q\nours %q\ntheirs %q\nmerged %s", iter, l, base, ours, theirs, merged)
				}
			}
		}
		for id, bl := range baseByID {
			o, inO := oursByID[id]
			th, inT := theirsByID[id]
			if (!inO && inT && th == bl) || (!inT && inO && o == bl) || (!inO && !inT) {
				if have[bl] && strings.Contains(string(merged), bl) {
					t.Fatalf("iter %d: drained record %s came back", iter, id)
				}
			}
		}
	}
}

func TestMergeLineUnionNothingLost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 1000; iter++ {
		mk := func() []string {
			var out []string
			for i := 0; i < rng.IntN(6); i++ {
				out = append(out, fmt.Sprintf("l%d", rng.IntN(5)))
			}
			return out
		}
		base, ours, theirs := mk(), mk(), mk()
		got := string(MergeLineUnion(lines(base...), lines(ours...), lines(theirs...)))
		if !strings.HasPrefix(got, string(lines(theirs...))) {
			t.Fatalf("theirs not first: %q vs %q", got, theirs)
		}
		count := map[string]int{}
		for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
			count[l]++
		}
		for _, l := range ours {
			if count[l] == 0 {
				t.Fatalf("ours' line %q lost: %q", l, got)
			}
		}
	}
}

// BenchmarkMergeLedger: a 10k-record ledger, 100 records changed or added
// on each side.
func BenchmarkMergeLedger(b *testing.B) {
	var base, ours, theirs []string
	for i := 0; i < 10000; i++ {
		l := fmt.Sprintf(`{"id":"r%d","type":"note","text":"record %d","createdAt":"2026-01-01T00:00:00Z"}`, i, i)
		base = append(base, l)
		switch {
		case i%100 == 0:
			ours = append(ours, strings.Replace(l, "record", "ours", 1))
			theirs = append(theirs, l)
		case i%100 == 50:
			ours = append(ours, l)
			theirs = append(theirs, strings.Replace(l, "record", "theirs", 1))
		default:
			ours = append(ours, l)
			theirs = append(theirs, l)
		}
	}
	bb, ob, tb := lines(base...), lines(ours...), lines(theirs...)
	b.SetBytes(int64(len(bb)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		MergeLedger(bb, ob, tb)
	}
}
