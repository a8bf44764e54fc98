package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeMap(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return m
}

func TestLedgerUnchangedIsByteIdentical(t *testing.T) {
	files, err := filepath.Glob("testdata/ledger/*.jsonl")
	if err != nil || len(files) < 3 {
		t.Fatalf("testdata: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ParseFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Bytes(); !bytes.Equal(got, data) {
			t.Errorf("%s: rewrite differs\n got %q\nwant %q", f, got, data)
		}
		for _, r := range l.Records() {
			b, err := r.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(data, b) {
				t.Errorf("%s: unchanged record %s marshals to %s, not its original bytes", f, r.ID, b)
			}
		}
	}
	for _, in := range []string{"", "\n", "\n\n", "{}", "{}\n", " \n{}\n\n"} {
		if got := Parse([]byte(in)).Bytes(); string(got) != in {
			t.Errorf("Parse(%q).Bytes() = %q", in, got)
		}
	}
}

func TestLedgerParsesFields(t *testing.T) {
	l := Parse(readTestdata(t, "ledger/sample.jsonl"))
	recs := l.Records()
	ids := []string{}
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	if want := []string{"r-1", "l-1", "n-1", "n-2", "n-3", "n-4"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("ids %v, want %v", ids, want)
	}
	l1 := l.Find("l-1")
	if l1.Text != `Run migrations <before> deploy & "check" é.` || l1.UpdatedAt != "2026-03-01T09:00:00.000Z" || l1.Type != "lesson" {
		t.Errorf("l-1 typed fields: %+v", l1)
	}
	n2 := l.Find("n-2")
	if n2.Lifecycle == nil || n2.Lifecycle.Mode != "read-count" || n2.Lifecycle.RemainingReads == nil || *n2.Lifecycle.RemainingReads != 2 {
		t.Errorf("n-2 lifecycle: %+v", n2.Lifecycle)
	}
	if raw, ok := l.Find("r-1").Get("repos"); !ok || string(raw) != `["memd"]` {
		t.Errorf("Get(repos) = %s %v", raw, ok)
	}
	if _, ok := l.Find("r-1").Get("lifecycle"); ok {
		t.Error("Get of an absent key reported ok")
	}
	n1 := l.Find("n-1")
	exp, ok := n1.Expiry()
	if !ok || !exp.Equal(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("n-1 expiry %v %v", exp, ok)
	}
	if _, ok := l.Find("n-4").Expiry(); ok {
		t.Error("persistent note has an expiry")
	}
}

func TestLedgerBrokenLinesKept(t *testing.T) {
	data := readTestdata(t, "ledger/sample.jsonl")
	l := Parse(data)
	bad := l.Bad()
	if len(bad) != 4 {
		for _, b := range bad {
			t.Log(b.Err)
		}
		t.Fatalf("%d bad lines, want 4", len(bad))
	}
	wantErr := []string{"line 7: invalid JSON", "line 8: invalid JSON", "line 9: not a JSON object", "line 10: bad field: id is 42, want a string"}
	for i, b := range bad {
		if b.Record != nil || !strings.Contains(b.Err.Error(), wantErr[i]) {
			t.Errorf("bad line %d: err %q, want it to contain %q", i, b.Err, wantErr[i])
		}
		if !bytes.Contains(data, b.Raw) || len(b.Raw) == 0 {
			t.Errorf("bad line raw %q is not the input line", b.Raw)
		}
	}
	if !errors.Is(bad[2].Err, ErrNotObject) || !errors.Is(bad[3].Err, ErrBadField) {
		t.Errorf("sentinels: %v / %v", bad[2].Err, bad[3].Err)
	}
	// Removing and changing records elsewhere never drops a bad line or the blank one.
	if n := l.Remove("n-1"); n != 1 {
		t.Fatalf("Remove = %d", n)
	}
	l.Find("r-1").Text = "changed"
	out := l.Bytes()
	for _, b := range bad {
		if !bytes.Contains(out, append(append([]byte("\n"), b.Raw...), '\n')) {
			t.Errorf("bad line %q lost from %s", b.Raw, out)
		}
	}
	if !bytes.Contains(out, []byte("\n\n")) {
		t.Error("blank line lost")
	}
	if bytes.Contains(out, []byte(`"n-1"`)) {
		t.Error("removed record still written")
	}
	if got := len(Parse(out).Bad()); got != 4 {
		t.Errorf("re-parse: %d bad lines", got)
	}
}

func TestLedgerUnknownFieldsKept(t *testing.T) {
	data := readTestdata(t, "ledger/sample.jsonl")
	l := Parse(data)
	inLines := bytes.Split(data, []byte("\n"))

	// A direct edit of a typed field: other keys keep order and bytes.
	l1 := l.Find("l-1")
	before := decodeMap(t, l1.raw)
	l1.Text = "Run migrations first."
	// An edit through the lifecycle pointer keeps the unknown lifecycle key.
	n2 := l.Find("n-2")
	*n2.Lifecycle.RemainingReads = 1
	// Set of a new key adds it at the end.
	if err := l.Find("n-4").Set("x-memd", map[string]string{"seen": "<now>"}); err != nil {
		t.Fatal(err)
	}
	out := l.Bytes()
	outLines := bytes.Split(out, []byte("\n"))
	if len(outLines) != len(inLines) {
		t.Fatalf("%d lines, want %d", len(outLines), len(inLines))
	}
	changed := map[int]string{
		1:  `{"id":"l-1","type":"lesson","role":"backend","text":"Run migrations first.","createdAt":"2026-02-03T10:00:00.000Z","updatedAt":"2026-03-01T09:00:00.000Z","x-future":{"nested":[1,2.50,{"a":null}]}}`,
		3:  `{"id":"n-2","type":"note","role":"general","text":"Check the flaky test.","createdAt":"2026-11-20T10:00:00.000Z","lifecycle":{"mode":"read-count","remainingReads":1,"x-seen":["s1"]}}`,
		10: `{"id":"n-4","type":"note","role":"general","text":"Persistent.","createdAt":"2026-11-22T10:00:00Z","lifecycle":{"mode":"persistent"},"x-memd":{"seen":"<now>"}}`,
	}
	for i := range inLines {
		want, ok := changed[i]
		if !ok {
			want = string(inLines[i])
		}
		if string(outLines[i]) != want {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, outLines[i], want)
		}
	}
	// Meaning: the changed record decodes to the old one with only text different.
	after := decodeMap(t, outLines[1])
	before["text"] = "Run migrations first."
	if !reflect.DeepEqual(before, after) {
		t.Errorf("meaning changed:\n%v\n%v", before, after)
	}
	// Once written, the new bytes are the record's original bytes.
	again := Parse(out)
	if !bytes.Equal(again.Bytes(), out) {
		t.Error("second round trip differs")
	}
}

func TestRecordSetDeleteAndTypes(t *testing.T) {
	r, err := ParseRecord([]byte(`{"id":"n","type":"note","text":"a","lifecycle":{"mode":"soft-expiry","expiresAt":"2026-12-01T00:00:00Z"},"extra":1,"extra":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := r.Get("extra"); string(raw) != "2" {
		t.Errorf("repeated key: Get = %s, want the last (2)", raw)
	}
	if err := r.Set("id", 5); !errors.Is(err, ErrBadField) || !strings.Contains(err.Error(), "set id") {
		t.Errorf("Set(id, 5) = %v", err)
	}
	if err := r.Set("lifecycle", "soon"); err == nil {
		t.Error("Set(lifecycle, string) accepted")
	}
	if err := r.Set("extra", json.RawMessage(`{bad`)); err == nil {
		t.Error("invalid raw JSON accepted")
	}
	if err := r.Set("text", "a<b>&c"); err != nil || r.Text != "a<b>&c" {
		t.Fatalf("Set text: %v %q", err, r.Text)
	}
	if err := r.Set("extra", 3); err != nil {
		t.Fatal(err)
	}
	if err := r.Set("lifecycle", Lifecycle{Mode: "hard-expiry", ExpiresAt: "2027-01-01T00:00:00Z"}); err != nil {
		t.Fatal(err)
	}
	if r.Lifecycle.Mode != "hard-expiry" {
		t.Errorf("typed lifecycle not updated: %+v", r.Lifecycle)
	}
	if r.Delete("updatedAt") {
		t.Error("Delete of an absent key reported true")
	}
	if !r.Delete("type") || r.Type != "" {
		t.Error("Delete(type)")
	}
	b, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"n","text":"a<b>&c","lifecycle":{"mode":"hard-expiry","expiresAt":"2027-01-01T00:00:00Z"},"extra":3}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// Setting a lifecycle to nil removes the key; clearing updatedAt removes it.
	r2, _ := ParseRecord([]byte(`{"id":"x","updatedAt":"2026-01-01T00:00:00Z","lifecycle":{"mode":"persistent"}}`))
	r2.Lifecycle = nil
	r2.UpdatedAt = ""
	if b, _ := r2.MarshalJSON(); string(b) != `{"id":"x"}` {
		t.Errorf("got %s", b)
	}
	// A clone is independent.
	r3, _ := ParseRecord([]byte(`{"id":"y","lifecycle":{"mode":"read-count","remainingReads":3}}`))
	c := r3.Clone()
	*c.Lifecycle.RemainingReads = 0
	if *r3.Lifecycle.RemainingReads != 3 || !c.changed() || r3.changed() {
		t.Error("clone shares state")
	}
}

func TestLedgerAppendNewRecord(t *testing.T) {
	l := Parse([]byte(`{"id":"a","type":"rule","text":"no final newline"}`))
	three := 3
	r := &Record{ID: "n-9", Type: "note", Role: "general", Text: "new <one>", CreatedAt: "2026-11-30T08:00:00Z",
		Lifecycle: &Lifecycle{Mode: "read-count", RemainingReads: &three}}
	if err := r.Set("context", []string{"sync/**"}); err != nil {
		t.Fatal(err)
	}
	l.Append(r)
	l.AppendRaw([]byte("kept {broken\n"))
	got := string(l.Bytes())
	want := `{"id":"a","type":"rule","text":"no final newline"}
{"id":"n-9","type":"note","role":"general","text":"new <one>","createdAt":"2026-11-30T08:00:00Z","lifecycle":{"mode":"read-count","remainingReads":3},"context":["sync/**"]}
kept {broken
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	back := Parse([]byte(got))
	if len(back.Records()) != 2 || len(back.Bad()) != 1 || back.Find("n-9").Text != "new <one>" {
		t.Errorf("re-parse: %+v", back.Lines)
	}
}

func TestRecordExpiryFormats(t *testing.T) {
	want := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	for _, s := range []string{"2026-12-01T10:30:00Z", "2026-12-01T10:30:00.000Z", "2026-12-01T11:30:00+01:00", "2026-12-01T10:30:00.000000+00:00", "2026-12-01T10:30:00"} {
		r := &Record{Lifecycle: &Lifecycle{Mode: "hard-expiry", ExpiresAt: s}}
		got, ok := r.Expiry()
		if !ok || !got.Equal(want) {
			t.Errorf("Expiry(%q) = %v %v", s, got, ok)
		}
	}
	for _, s := range []string{"", "tomorrow", "2026-13-01"} {
		r := &Record{Lifecycle: &Lifecycle{Mode: "hard-expiry", ExpiresAt: s}}
		if _, ok := r.Expiry(); ok {
			t.Errorf("Expiry(%q) ok", s)
		}
	}
}

func TestReadLedgerMissingAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	l, err := ParseFile(filepath.Join(dir, "memory.jsonl"))
	if err != nil || len(l.Lines) != 0 || len(l.Bytes()) != 0 {
		t.Fatalf("missing ledger: %v %v", l, err)
	}
	_, err = ParseFile(dir) // a directory
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("reading a directory: %v", err)
	}
}

// FuzzParseLedger: never panics; an unchanged parse writes the input back byte for byte;
// a record changed with Set still decodes to its old meaning plus the change.
func FuzzParseLedger(f *testing.F) {
	for _, name := range []string{"sample.jsonl", "no-final-newline.jsonl", "crlf.jsonl"} {
		f.Add(readTestdata(f, "ledger/"+name))
	}
	f.Add([]byte(`{"a":"\"}\\","b":[{"c":"]"}],"id":"x"}` + "\n"))
	f.Add([]byte("{\"id\":\"\\ud800\"}\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := Parse(data)
		if got := l.Bytes(); !bytes.Equal(got, data) {
			t.Fatalf("round trip:\n got %q\nwant %q", got, data)
		}
		for _, ln := range l.Lines {
			if ln.Record == nil {
				continue
			}
			var before map[string]any
			if err := json.Unmarshal(ln.Raw, &before); err != nil {
				t.Fatalf("parsed record %q does not decode: %v", ln.Raw, err)
			}
			c := ln.Record.Clone()
			if err := c.Set("x-fuzz", 1); err != nil {
				t.Fatal(err)
			}
			b, err := c.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var after map[string]any
			if err := json.Unmarshal(b, &after); err != nil {
				t.Fatalf("changed record %q is not JSON: %v", b, err)
			}
			before["x-fuzz"] = float64(1)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("meaning changed:\n%s\n%s", ln.Raw, b)
			}
		}
	})
}

// ledger100k builds a ledger of n lines: rules, lessons and notes of every lifecycle, with
// unknown fields, as a writer would leave it.
func ledger100k(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, `{"id":"r-%d","type":"rule","role":"general","text":"Rule number %d: never force-push main, ask first.","createdAt":"2026-01-02T10:00:00.000Z","context":["**/*.go","sync/**"],"repos":["memd"]}`, i, i)
		case 1:
			fmt.Fprintf(&b, `{"id":"l-%d","type":"lesson","role":"backend","text":"Lesson %d: run migrations before the deploy \"step\".","createdAt":"2026-02-03T10:00:00.000Z","updatedAt":"2026-03-01T09:00:00.000Z","x-future":{"n":[1,2,3]}}`, i, i)
		case 2:
			fmt.Fprintf(&b, `{"id":"n-%d","type":"note","role":"general","text":"Note %d: deploy freeze this week.","createdAt":"2026-11-20T10:00:00.000Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-11-27T00:00:00.000Z"}}`, i, i)
		default:
			fmt.Fprintf(&b, `{"id":"n-%d","type":"note","role":"general","text":"Note %d: check the flaky test.","createdAt":"2026-11-20T10:00:00.000Z","lifecycle":{"mode":"read-count","remainingReads":2}}`, i, i)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// jsonRoundTrip is the baseline: decode and encode every line with encoding/json.
func jsonRoundTrip(data []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.SplitSeq(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			out.Write(line)
		} else {
			b, _ := json.Marshal(m)
			out.Write(b)
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// BenchmarkLedger100k: parse + Bytes of a 100k-line ledger, against encoding/json decoding
// and encoding every line. The Ratio sub-benchmark runs both on the same data and reports
// memd's time as a fraction of encoding/json's (x-of-json, lower is better).
func BenchmarkLedger100k(b *testing.B) {
	data := ledger100k(100_000)
	b.Run("memd", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			l := Parse(data)
			_ = l.Bytes()
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			_ = jsonRoundTrip(data)
		}
	})
	b.Run("Ratio", func(b *testing.B) {
		// Wall time and process CPU time (rusage, GC workers included): on a loaded machine
		// the CPU ratio is the steadier of the two.
		var memd, base, memdCPU, baseCPU time.Duration
		for b.Loop() {
			runtime.GC()
			c0, t0 := processCPU(), time.Now()
			_ = Parse(data).Bytes()
			runtime.GC()
			c1, t1 := processCPU(), time.Now()
			_ = jsonRoundTrip(data)
			runtime.GC()
			c2, t2 := processCPU(), time.Now()
			memd += t1.Sub(t0)
			base += t2.Sub(t1)
			memdCPU += c1 - c0
			baseCPU += c2 - c1
		}
		b.ReportMetric(float64(memd)/float64(base), "x-of-json")
		b.ReportMetric(float64(memdCPU)/float64(baseCPU), "x-of-json-cpu")
	})
}

// processCPU is the process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// FuzzJSONValid: memd's one-pass validator agrees with json.Valid on every input.
func FuzzJSONValid(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]}`, `{"a":01}`, `{"a":1.}`,
		`"\ud800"`, `-`, `1e`, ` {"a" : { } } `, `{"a":"` + "\x01" + `"}`, `[1,]`, `{"a":1,}`, "\"\xff\"", `tru`, `nul`,
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001), strings.Repeat("[", 10000) + strings.Repeat("]", 10000)} {
		f.Add([]byte(s))
	}
	for _, name := range []string{"sample.jsonl", "crlf.jsonl"} {
		for _, line := range bytes.Split(readTestdata(f, "ledger/"+name), []byte("\n")) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonValid(b), json.Valid(b); got != want {
			t.Fatalf("jsonValid(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}

// FuzzJSONUnquote: memd's string decoder agrees with encoding/json on every valid literal.
func FuzzJSONUnquote(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u20AC"`, `"\ud83d\ude00"`, `"\ud800"`, `"\ud800\u0041"`,
		`"\udc00\ud800"`, "\"\xff\xfe\"", "\"\xed\xa0\x80\"", `"\ud83d\\"`, `"\ud83d\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want string
		if end, ok := jsonValidString(b, 0); len(b) < 2 || b[0] != '"' || !ok || end != len(b) || json.Unmarshal(b, &want) != nil {
			return // not exactly one string literal, as the scanner hands the decoder
		}
		got, ok := jsonDecodeStringIn(b, "")
		if !ok || got != want {
			t.Fatalf("decode %q: got %q %v, want %q", b, got, ok, want)
		}
	})
}

// A ledger may carry a mode memd does not know: it is decoded as written, reported unknown,
// judged live (never drained) and written back byte for byte.
func TestUnknownModeIsCarried(t *testing.T) {
	line := `{"id":"a","type":"note","lifecycle":{"mode":"Forever","expiresAt":"2000-01-01"}}`
	r, err := ParseRecord([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if r.Lifecycle.Mode != "Forever" || r.Lifecycle.Mode.Known() {
		t.Fatalf("mode = %q known=%v, want Forever, unknown", r.Lifecycle.Mode, r.Lifecycle.Mode.Known())
	}
	if !memd.ModeSoftExpiry.Known() {
		t.Fatal("soft-expiry not known")
	}
	if v := JudgeNote(r, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), 0); v.Drain || v.Stale || v.State() != NoteLive {
		t.Fatalf("unknown mode judged %+v, want live", v)
	}
	out, err := r.MarshalJSON()
	if err != nil || string(out) != line {
		t.Fatalf("re-encoded %q (%v), want the line verbatim", out, err)
	}
}

// The ledger reads expiresAt with ParseTime (a minute-precision time is a time).
func TestExpiryReadsParseTime(t *testing.T) {
	r, _ := ParseRecord([]byte(`{"id":"a","type":"note","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-11-30T14:32Z"}}`))
	if exp, ok := r.Expiry(); !ok || !exp.Equal(time.Date(2026, 11, 30, 14, 32, 0, 0, time.UTC)) {
		t.Errorf("Expiry = %v %v", exp, ok)
	}
}
