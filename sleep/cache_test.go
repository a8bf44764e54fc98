package sleep

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

// plannerView is the part of a parse the planners use; a cached parse must equal a fresh one.
func plannerView(m *memd.Memory) memd.Memory {
	return memd.Memory{Type: m.Type, Status: m.Status, Title: m.Title, Gist: m.Gist, TaskStatus: m.TaskStatus,
		Updated: m.Updated, ValidUntil: m.ValidUntil, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, EventAt: m.EventAt,
		ValidUntilAt: m.ValidUntilAt, Entities: m.Entities, Tags: m.Tags, Links: m.Links,
		Metas: map[string][]string{memd.MetaMembers: {m.Meta(memd.MetaMembers)}}}
}

func sameParses(t *testing.T, got, want *snapshot) {
	t.Helper()
	if len(got.mems) != len(want.mems) {
		t.Fatalf("%d parses, want %d", len(got.mems), len(want.mems))
	}
	for p, w := range want.mems {
		g, ok := got.mems[p]
		if !ok {
			t.Fatalf("%s missing", p)
		}
		if gv, wv := plannerView(g), plannerView(w); !reflect.DeepEqual(gv, wv) {
			t.Fatalf("%s: cached parse differs:\n got %+v\nwant %+v", p, gv, wv)
		}
		if g.Year(p) != w.Year(p) {
			t.Fatalf("%s: year %d, want %d", p, g.Year(p), w.Year(p))
		}
	}
}

// loadCached walks dir and builds the snapshot with the cache in state, the walk stamped at
// wall (the racy rule's reference), then saves the cache as a run would.
func loadCached(t *testing.T, dir, state string, wall time.Time) *snapshot {
	t.Helper()
	tr, err := walkTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshotOf(dir, tr, wall.UnixNano(), state, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.saveCache(state); err != nil {
		t.Fatal(err)
	}
	return s
}

// The parse cache gives the same parses as parsing, reads only what it must, and never
// trusts a stat that changed or is racy.
func TestParseCache(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	// Times with zone offsets: the cached year must be the file's own.
	writeFile(t, dir, "areas/x/offset.html", mem{typ: "semantic", created: "2024-12-31T23:30:00-05:00", event: "2024-12-31T22:00:00-05:00",
		validUntil: "2027-01-01T01:00:00+09:00"}.html())
	state := t.TempDir()
	fresh, err := loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := len(fresh.mems)

	first := loadCached(t, dir, state, later())
	if first.parsed != n || first.checked != 0 {
		t.Fatalf("no cache: parsed %d checked %d, want %d 0", first.parsed, first.checked, n)
	}
	sameParses(t, first, fresh)
	hit := loadCached(t, dir, state, later())
	if hit.parsed != 0 || hit.checked != 0 || hit.cacheDirty {
		t.Fatalf("unchanged tree: parsed %d checked %d dirty %v", hit.parsed, hit.checked, hit.cacheDirty)
	}
	sameParses(t, hit, fresh)

	// Racy: the cache was saved within the window of the files' stamps. Every file is read
	// and compared with its hash, none parsed.
	racy := t.TempDir()
	loadCached(t, dir, racy, time.Now())
	r := loadCached(t, dir, racy, later())
	if r.parsed != 0 || r.checked != n {
		t.Fatalf("racy cache: parsed %d checked %d, want 0 %d", r.parsed, r.checked, n)
	}

	// A touch (same bytes, new mtime): read and hashed, not parsed.
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, epNew1), future, future); err != nil {
		t.Fatal(err)
	}
	touched := loadCached(t, dir, state, later().Add(time.Minute))
	if touched.parsed != 0 || touched.checked != 1 {
		t.Fatalf("touch: parsed %d checked %d, want 0 1", touched.parsed, touched.checked)
	}

	// A same-size edit with the mtime put back: ctime tells, and the new content is parsed.
	p := filepath.Join(dir, taskOpen)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	old := readFile(t, dir, taskOpen)
	edited := strings.Replace(old, "Write docs", "Write DOCS", -1)
	writeFile(t, dir, taskOpen, edited)
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	ed := loadCached(t, dir, state, later().Add(2*time.Minute))
	if ed.parsed != 1 || ed.mems[taskOpen].Title != "Write DOCS" {
		t.Fatalf("same-size edit: parsed %d, title %q", ed.parsed, ed.mems[taskOpen].Title)
	}

	// Removed and added files: the merge keeps the order right.
	if err := os.Remove(filepath.Join(dir, epOld2)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "areas/aaa/20260101-first.html", mem{typ: "episodic", created: "2026-01-01T00:00:00Z"}.html())
	writeFile(t, dir, "resources/zzz/last.html", mem{typ: "semantic"}.html())
	fresh, err = loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	mixed := loadCached(t, dir, state, later().Add(3*time.Minute))
	if mixed.parsed != 2 {
		t.Fatalf("two new files: parsed %d", mixed.parsed)
	}
	sameParses(t, mixed, fresh)
}

// A damaged cache file is a miss, never a panic or a wrong parse.
func TestParseCacheDamaged(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	state := t.TempDir()
	fresh, err := loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	loadCached(t, dir, state, later())
	good, err := os.ReadFile(filepath.Join(state, parseCacheName))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := walkTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for cut := 0; cut < len(good); cut += 1 + len(good)/97 {
		for _, bad := range [][]byte{good[:cut], append(append([]byte{}, good[:cut]...), append([]byte{good[cut] ^ 0xff}, good[cut+1:]...)...)} {
			if err := os.WriteFile(filepath.Join(state, parseCacheName), bad, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := snapshotOf(dir, tr, later().UnixNano(), state, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A flipped byte inside a string can change a cached value undetected (as with
			// any cache without a checksum); structure damage must never lose a file.
			if len(s.mems) != len(fresh.mems) {
				t.Fatalf("cut %d: %d parses, want %d", cut, len(s.mems), len(fresh.mems))
			}
			if len(bad) == cut {
				sameParses(t, s, fresh)
			}
		}
	}
}

// walkTree lists what filepath.WalkDir lists (regular files, no .git, no symlinks) and
// stats exactly the files the planners read.
func TestWalkTreeMatchesWalkDir(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	writeFile(t, dir, "resources/sub/.git/config", "nested repo\n")
	writeFile(t, dir, "areas/x/notes.txt", "text\n")
	writeFile(t, dir, "areas/x/MEMORY.md", "# x\n")
	writeFile(t, dir, "loose.html", mem{typ: "semantic"}.html())
	if err := os.Symlink(epNew1, filepath.Join(dir, "projects/shop/20250204-link.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("projects", filepath.Join(dir, "areas/linked-dir")); err != nil {
		t.Fatal(err)
	}
	var want []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(dir, p)
			want = append(want, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := walkTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tr.files {
		got = append(got, f.rel)
		wantStat := isMemoryPathSlow(f.rel) || filepath.Base(f.rel) == memoryMDName
		if f.statted != wantStat || f.mem != isMemoryPathSlow(f.rel) {
			t.Errorf("%s: statted %v mem %v", f.rel, f.statted, f.mem)
		}
		if f.statted {
			fi, err := os.Lstat(filepath.Join(dir, f.rel))
			if err != nil || fi.Size() != f.st.Size || fi.ModTime().UnixNano() != f.st.Mtime {
				t.Errorf("%s: stat %+v vs %v", f.rel, f.st, fi)
			}
		}
	}
	if !tr.complete {
		t.Error("walk not complete")
	}
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("walk:\n got %v\nwant %v", got, want)
	}
	again, err := walkTree(dir, nil)
	if err != nil || again.fingerprint() != tr.fingerprint() {
		t.Fatal("two walks of one tree fingerprint differently")
	}
}

func isMemoryPathSlow(rel string) bool {
	return strings.HasSuffix(rel, memd.MemoryExt) && memd.ValidMemoryPath(rel)
}

// plainMemoryPath only ever says yes where memd.ValidMemoryPath does.
func FuzzPlainMemoryPath(f *testing.F) {
	for _, s := range []string{"areas/a.html", "projects/x/20260101-a.html", "archive/2024/areas/a.html", "areas/.html",
		"areas//a.html", "areas/./a.html", "areas/../a.html", "/areas/a.html", "other/a.html", "a.html", "areas/a b.html",
		"areas/\x7fa.html", "areas/a\\b.html", "areas/é.html", "areas/a.htm", "resources/..html", "areas/a/.html", "areas/.../a.html"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if plainMemoryPath(p) && !memd.ValidMemoryPath(p) {
			t.Fatalf("plainMemoryPath(%q) but ValidMemoryPath says %q", p, memd.PathViolation(p))
		}
		if isMemoryPath(p) != isMemoryPathSlow(p) {
			t.Fatalf("isMemoryPath(%q) = %v", p, isMemoryPath(p))
		}
	})
}

// p.until is exact: planning just before it gives the same plan, planning at it does not.
// Walks the fixture through every clock threshold of expire and archive.
func TestPlanUntilIsExact(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	s, err := loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.virtual = true
	cfg := testConfig()
	type planner func(*snapshot, *planEnv) (*plan, error)
	view := func(p *plan) string {
		var b strings.Builder
		for _, o := range p.ops {
			// Not the bytes: a drained record carries drainedAt, the clock itself.
			b.WriteString(string(o.kind) + " " + o.path + " " + o.to + "\n")
		}
		for _, it := range p.items {
			b.WriteString(it.Action + " " + it.Path + " " + it.To + " " + it.Reason + "\n")
		}
		keys := make([]string, 0, len(p.counts))
		for k := range p.counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b.WriteString(k + "=" + itoa(p.counts[k]) + "\n")
		}
		return b.String()
	}
	for name, pl := range map[string]planner{"expire": planExpire, "archive": planArchive} {
		at := func(now time.Time) *plan {
			p, err := pl(s, &planEnv{ctx: context.Background(), cfg: cfg, now: now, log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		steps := 0
		for ; steps < 50; steps++ {
			p := at(now)
			if p.until.IsZero() {
				break
			}
			if !p.until.After(now) {
				t.Fatalf("%s at %v: until %v is not after now", name, now, p.until)
			}
			before := p.until.Add(-time.Nanosecond)
			if before.Year() == now.Year() && view(at(before)) != view(p) {
				t.Fatalf("%s: the plan changed before until %v (from %v)", name, p.until, now)
			}
			if view(at(p.until)) == view(p) {
				t.Fatalf("%s: nothing changes at until %v (from %v): not the earliest change", name, p.until, now)
			}
			now = p.until
		}
		if steps < 2 {
			t.Fatalf("%s: only %d thresholds in the fixture", name, steps)
		}
	}
}

// After a run that wrote and moved files, the cache it saved covers them: the next load
// parses nothing (the run's own writes are checked by content hash, being racy) and
// gives the parses a fresh parse gives.
func TestParseCacheAfterApply(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	rep := runSleep(t, dir, store, testConfig(), nil)
	if rep.Counts["archived"] == 0 || rep.Counts["arcs"] == 0 || rep.Counts["links"] == 0 {
		t.Fatalf("the fixture run should move, write arcs and rewrite links: %v", rep.Counts)
	}
	fresh, err := loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := loadCached(t, dir, filepath.Join(dir, ".git", "memd"), later())
	if s.parsed != 0 || s.checked == 0 {
		t.Fatalf("after the run: parsed %d, checked %d; want 0 parsed, the run's own files checked", s.parsed, s.checked)
	}
	sameParses(t, s, fresh)
}

// A full plan that applies nothing and reads only a few files past the parse cache leaves
// the cache as it is (those files are read again next time, and parsed right); once they
// add up past minCacheRewrite, it is rewritten.
func TestParseCacheRewriteThreshold(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	cachePath := filepath.Join(dir, ".git", "memd", parseCacheName)
	before := readFile(t, dir, ".git/memd/"+parseCacheName)
	// A new non-memory file: the delta plan cannot answer, the phases plan in full.
	writeFile(t, dir, "areas/inbox/readme.txt", "hello\n")
	fact(t, dir, "one")
	want := fullPlan(t, dir, store, cfg, fixNow)
	rep, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil)
	if idle || delta {
		t.Fatal("a shortcut answered")
	}
	if got := phaseView(rep); !reflect.DeepEqual(got, want) {
		t.Fatalf("results differ:\n got %+v\nwant %+v", got, want)
	}
	if readFile(t, dir, ".git/memd/"+parseCacheName) != before {
		t.Fatal("one file read past the cache: the cache was rewritten")
	}
	tr, err := walkTree(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := snapshotOf(dir, tr, later().UnixNano(), filepath.Dir(cachePath), nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.parsed != 1 || s.mems["resources/facts/one.html"] == nil {
		t.Fatalf("next load: parsed %d (want the one new file)", s.parsed)
	}
	for i := range minCacheRewrite {
		fact(t, dir, fmt.Sprint("many-", i))
	}
	writeFile(t, dir, "areas/inbox/readme2.txt", "hello\n")
	sleepDelta(t, dir, store, cfg, fixNow, nil)
	if readFile(t, dir, ".git/memd/"+parseCacheName) == before {
		t.Fatal("more than minCacheRewrite files read past the cache: not rewritten")
	}
}
