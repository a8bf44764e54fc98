package demo

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/ledger"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/memorymd"
)

var testNow = time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)

// readTree returns every file under dir by slash path.
func readTree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerate300(t *testing.T) {
	dir := t.TempDir()
	st, err := Generate(dir, Options{Memories: 300, Now: testNow, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	tree := readTree(t, dir)

	var got Stats
	type ey struct {
		entity string
		year   int
	}
	episodes := map[ey]int{}
	types := map[string]int{}
	doneOld, archivedStatus, expired, links := 0, 0, 0, 0
	hashes := map[string]string{}
	for p, b := range tree {
		if !strings.HasSuffix(p, ".html") {
			continue
		}
		if v := memd.PathViolation(p); v != "" {
			t.Errorf("bad path: %s", v)
		}
		m := memfile.ParseBytes(b)
		if !m.Valid() {
			t.Errorf("%s: violations %q", p, m.Violations)
			continue
		}
		if m.ContentHash != m.ComputedHash {
			t.Errorf("%s: stated hash %s, parser computes %s", p, m.ContentHash, m.ComputedHash)
		}
		if len(m.Warnings) > 0 {
			t.Errorf("%s: memhtml would warn: %q", p, m.Warnings)
		}
		// memhtml's index refuses two active (outside archive/) non-task memories with one hash.
		if m.Type != "task" && !memd.IsArchived(p) {
			if other, dup := hashes[m.ComputedHash]; dup {
				t.Errorf("%s and %s have one content hash: memhtml cannot index both", other, p)
			}
			hashes[m.ComputedHash] = p
		}
		if m.UpdatedAt.Before(m.CreatedAt) || m.UpdatedAt.After(testNow) {
			t.Errorf("%s: created %s updated %s", p, m.Created, m.Updated)
		}
		got.Memories++
		types[m.Type]++
		switch m.Type {
		case "episodic":
			got.Episodes++
			d, ok := memd.EpisodeDate(p)
			if !ok {
				t.Errorf("%s: episodic without a date prefix", p)
			}
			if m.EventAt != d {
				t.Errorf("%s: event %v, prefix %v", p, m.EventAt, d)
			}
			for _, e := range m.Entities {
				episodes[ey{e, d.Year()}]++
			}
		case "task":
			got.Tasks++
			if m.TaskStatus == "done" && m.UpdatedAt.Before(testNow.AddDate(0, 0, -30)) {
				doneOld++
			}
			if !strings.Contains(p, "/tasks/") {
				t.Errorf("task outside a tasks folder: %s", p)
			}
		}
		if m.Status == "archived" {
			archivedStatus++
		}
		if !m.ValidUntilAt.IsZero() && m.ValidUntilAt.Before(testNow.AddDate(0, 0, -14)) {
			expired++
		}
		for _, l := range m.Links {
			target, err := memd.HrefToPath(l.Href)
			if err != nil || tree[target] == nil {
				t.Errorf("%s links %s, which is not in the tree (%v)", p, l.Href, err)
			}
			links++
		}
		if strings.HasPrefix(p, memd.InboxDir+"/") && strings.HasSuffix(p, ".html") {
			got.Inbox++
		}
	}
	got.Notes = st.Notes
	if got != st {
		t.Errorf("stats %+v, tree has %+v", st, got)
	}
	if st.Memories != 300 {
		t.Errorf("wrote %d memories, want 300", st.Memories)
	}
	if st.Inbox == 0 || tree[memd.TaskInboxDir+"/.gitkeep"] == nil && !hasPrefix(tree, memd.TaskInboxDir+"/") {
		t.Errorf("nothing in the inbox or task inbox")
	}
	if len(types) < 8 {
		t.Errorf("only types %v", types)
	}
	if doneOld == 0 || archivedStatus == 0 || expired == 0 || links == 0 {
		t.Errorf("sleep has too little work: done-old tasks %d, status archived %d, expired %d, links %d", doneOld, archivedStatus, expired, links)
	}
	// Arcs form: both anchors have >= 3 episodes in every year 2023..2026.
	for _, e := range anchors {
		for y := 2023; y <= 2026; y++ {
			if n := episodes[ey{e, y}]; n < 3 {
				t.Errorf("%s in %d: %d episodes, want >= 3", e, y, n)
			}
		}
	}
	years := map[int]bool{}
	for k := range episodes {
		years[k.year] = true
	}
	if len(years) != 4 {
		t.Errorf("episode years %v, want 2023..2026", years)
	}
	if !hasPrefix(tree, memd.PeopleDir+"/") || !hasPrefix(tree, "projects/") || !hasPrefix(tree, "resources/") {
		t.Errorf("PARA layout incomplete")
	}
	for _, d := range []string{memd.ArcsDir, string(memd.BucketArchive)} {
		if tree[d+"/.gitkeep"] == nil {
			t.Errorf("empty %s has no .gitkeep", d)
		}
	}

	// Root MEMORY.md: the index kind, every bullet well formed and pointing at a file.
	idx := tree["MEMORY.md"]
	if memorymd.Detect(idx) != memorymd.KindIndex {
		t.Fatalf("root MEMORY.md is not index kind:\n%s", idx)
	}
	parsed := memorymd.ParseIndex(idx)
	if len(parsed.Bad()) > 0 {
		t.Errorf("bad index lines: %+v", parsed.Bad())
	}
	if len(parsed.Bullets()) < 20 {
		t.Errorf("%d bullets", len(parsed.Bullets()))
	}
	for _, b := range parsed.Bullets() {
		if err := b.Validate(); err != nil {
			t.Errorf("bullet: %v", err)
		}
		if tree[b.Path] == nil {
			t.Errorf("dangling bullet %s", b.Path)
		}
	}
	if !bytes.Contains(idx, []byte(" \u00b7 type:")) {
		t.Errorf("index separator is not U+00B7")
	}

	// Project MEMORY.md: project kind, off-template so tidy has work; the other in shape.
	pm := tree["projects/checkout-api/MEMORY.md"]
	if memorymd.Detect(pm) != memorymd.KindProject {
		t.Errorf("project MEMORY.md kind %v", memorymd.Detect(pm))
	}
	if memorymd.InspectProject(pm).InTemplate {
		t.Errorf("off-template project MEMORY.md is in template")
	}
	if !memorymd.InspectProject(tree["projects/payments/MEMORY.md"]).InTemplate {
		t.Errorf("payments MEMORY.md should be in template: %+v", memorymd.InspectProject(tree["projects/payments/MEMORY.md"]))
	}

	// Ledger: every line parses; notes in every mode and state.
	led := ledger.Parse(tree["memory.jsonl"])
	modes := map[memd.LifecycleMode]int{}
	kinds := map[string]int{}
	zeroReads, pastHard, futureHard, pastSoft, futureSoft := 0, 0, 0, 0, 0
	for i, l := range led.Lines {
		if l.Err != nil || l.Record == nil {
			t.Fatalf("ledger line %d: %v", i+1, l.Err)
		}
		r := l.Record
		kinds[r.Type]++
		if r.Type != "note" {
			continue
		}
		modes[r.Lifecycle.Mode]++
		exp, hasExp := r.Expiry()
		switch r.Lifecycle.Mode {
		case "read-count":
			if *r.Lifecycle.RemainingReads == 0 {
				zeroReads++
			}
		case "hard-expiry":
			if !hasExp {
				t.Errorf("hard-expiry without a parseable expiresAt: %s", l.Raw)
			} else if exp.Before(testNow) {
				pastHard++
			} else {
				futureHard++
			}
		case "soft-expiry":
			if exp.Before(testNow) {
				pastSoft++
			} else {
				futureSoft++
			}
		}
	}
	if kinds["rule"] == 0 || kinds["lesson"] == 0 || kinds["note"] != st.Notes {
		t.Errorf("ledger kinds %v, notes stat %d", kinds, st.Notes)
	}
	if len(modes) != 4 || zeroReads == 0 || pastHard == 0 || futureHard == 0 || pastSoft < 2 || futureSoft == 0 {
		t.Errorf("ledger lifecycles: modes %v zero-reads %d hard %d/%d soft %d/%d", modes, zeroReads, pastHard, futureHard, pastSoft, futureSoft)
	}
	if !bytes.Contains(tree["memory.jsonl"], []byte(`"source":"demo"`)) {
		t.Errorf("no record with an unknown field")
	}
}

func hasPrefix(tree map[string][]byte, prefix string) bool {
	for p := range tree {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func TestGenerateDeterministic(t *testing.T) {
	a, b, c := t.TempDir(), t.TempDir(), t.TempDir()
	opts := Options{Memories: 200, Now: testNow, Seed: 42}
	if _, err := Generate(a, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(b, opts); err != nil {
		t.Fatal(err)
	}
	ta, tb := readTree(t, a), readTree(t, b)
	if len(ta) != len(tb) {
		t.Fatalf("%d files vs %d", len(ta), len(tb))
	}
	for p, x := range ta {
		if !bytes.Equal(x, tb[p]) {
			t.Fatalf("%s differs between two runs with the same seed", p)
		}
	}
	opts.Seed = 43
	if _, err := Generate(c, opts); err != nil {
		t.Fatal(err)
	}
	tc := readTree(t, c)
	same := 0
	for p, x := range ta {
		if bytes.Equal(x, tc[p]) {
			same++
		}
	}
	if same > len(ta)/2 {
		t.Errorf("seed 43 repeats %d of %d files of seed 42", same, len(ta))
	}
}

func TestGenerateNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "MEMORY.md"), []byte("# mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Generate(dir, Options{Memories: 30, Now: testNow, Seed: 1})
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "MEMORY.md") {
		t.Fatalf("err %v, want ErrExists naming MEMORY.md", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "MEMORY.md")); string(b) != "# mine\n" {
		t.Fatalf("MEMORY.md overwritten: %q", b)
	}
	if _, err := Generate(dir, Options{Memories: -1}); err == nil {
		t.Fatalf("negative Memories accepted")
	}
}

func TestGenerateSmallAndDefaults(t *testing.T) {
	for _, n := range []int{1, 5, 17} {
		dir := t.TempDir()
		st, err := Generate(dir, Options{Memories: n, Now: testNow, Seed: int64(n)})
		if err != nil {
			t.Fatal(err)
		}
		if st.Memories != n {
			t.Errorf("Memories %d, want %d", st.Memories, n)
		}
	}
	dir := t.TempDir()
	st, err := Generate(dir, Options{Now: testNow})
	if err != nil || st.Memories != DefaultMemories {
		t.Fatalf("default: %+v %v", st, err)
	}
	// A Now before 2023 still works and stays in the past.
	st, err = Generate(t.TempDir(), Options{Memories: 50, Now: time.Date(2021, 3, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil || st.Memories != 50 {
		t.Fatalf("early now: %+v %v", st, err)
	}
}

// TestGenerate100k is the scale check behind MEMD_LONG=1.
func TestGenerate100k(t *testing.T) {
	if os.Getenv("MEMD_LONG") == "" {
		t.Skip("set MEMD_LONG=1 to generate 100k memories")
	}
	start := time.Now()
	st, err := Generate(t.TempDir(), Options{Memories: 100000, Now: testNow, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("100k: %+v in %v", st, time.Since(start))
}

// BenchmarkGenerate10k reports, beside ns/op, x_floor: the time against writing the
// same files' bytes with plain sequential os.WriteFile in the same run (file creation
// is the floor on a loaded VM; generation itself should add little).
func BenchmarkGenerate10k(b *testing.B) {
	var gen, floor time.Duration
	for b.Loop() {
		dir := b.TempDir()
		start := time.Now()
		if _, err := Generate(dir, Options{Memories: 10000, Now: testNow, Seed: 1}); err != nil {
			b.Fatal(err)
		}
		gen += time.Since(start)
		b.StopTimer()
		tree := readTree(b, dir)
		dst := b.TempDir()
		start = time.Now()
		made := map[string]bool{}
		for p, data := range tree {
			abs := filepath.Join(dst, filepath.FromSlash(p))
			if d := filepath.Dir(abs); !made[d] {
				if err := os.MkdirAll(d, 0o755); err != nil {
					b.Fatal(err)
				}
				made[d] = true
			}
			if err := os.WriteFile(abs, data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
		floor += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(gen)/float64(floor), "x_floor")
}
