package sleep

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/testutil"
)

// plannerView is the part of a parse the planners use; a cached parse must equal a fresh one.
func plannerView(m *memfile.Memory) memfile.Memory {
	return memfile.Memory{Type: m.Type, Status: m.Status, Title: m.Title, Gist: m.Gist, TaskStatus: m.TaskStatus,
		Updated: m.Updated, ValidUntil: m.ValidUntil, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, EventAt: m.EventAt,
		ValidUntilAt: m.ValidUntilAt, Entities: m.Entities, Tags: m.Tags, Links: m.Links,
		Metas: map[string][]string{memfile.MetaMembers: {m.Meta(memfile.MetaMembers)}}}
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
	testutil.WriteFile(t, dir, "areas/x/offset.html", mem{typ: "semantic", created: "2024-12-31T23:30:00-05:00", event: "2024-12-31T22:00:00-05:00",
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
	testutil.WriteFile(t, dir, taskOpen, edited)
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
	testutil.WriteFile(t, dir, "areas/aaa/20260101-first.html", mem{typ: "episodic", created: "2026-01-01T00:00:00Z"}.html())
	testutil.WriteFile(t, dir, "resources/zzz/last.html", mem{typ: "semantic"}.html())
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
	testutil.WriteFile(t, dir, "resources/sub/.git/config", "nested repo\n")
	testutil.WriteFile(t, dir, "areas/x/notes.txt", "text\n")
	testutil.WriteFile(t, dir, "areas/x/MEMORY.md", "# x\n")
	testutil.WriteFile(t, dir, "loose.html", mem{typ: "semantic"}.html())
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
		wantStat := isMemoryPathSlow(f.rel) || filepath.Base(f.rel) == memd.MemoryMDName
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

// later is a wall clock an hour ahead: every file written so far is past the racy window.
func later() time.Time { return time.Now().Add(time.Hour) }

// runs gives each test run a run id of its own: a phase committed by an earlier run of the
// test is not skipped.
var runs int

// sleepLater runs every phase at fixNow with the racy rule's clock an hour ahead (as on a
// real next night), failing the test if the run fails.
func sleepLater(t *testing.T, dir string, store Store) Report {
	t.Helper()
	runs++
	opts := Options{Config: testConfig(), Now: func() time.Time { return fixNow }, NoGC: true, wallNow: later}
	rep, err := NewRunner(dir, store, opts).Run(context.Background(), fmt.Sprintf("%s-%d", RunID(fixNow), runs))
	if err != nil || rep.Failed() {
		t.Fatalf("sleep run: %v %+v", err, rep)
	}
	return rep
}

// fact writes a semantic memory no phase acts on.
func fact(t *testing.T, dir, name string) string {
	t.Helper()
	p := "resources/facts/" + name + ".html"
	testutil.WriteFile(t, dir, p, mem{typ: "semantic", title: "Fact " + name, created: "2026-11-29T10:00:00Z"}.html())
	return p
}

// A run that applies nothing and reads only a few files past the parse cache leaves the
// cache as it is (those files are read again next time, and parsed right); once they add
// up past minCacheRewrite, it is rewritten.
func TestParseCacheRewriteThreshold(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	// A run on the settled tree: the cache it saves trusts every entry by its stat.
	if rep := sleepLater(t, dir, store); rep.Counts["archived"]+rep.Counts["arcs"] != 0 {
		t.Fatalf("the settled fixture still had work: %v", rep.Counts)
	}
	cachePath := filepath.Join(dir, ".git", "memd", parseCacheName)
	before := readFile(t, dir, ".git/memd/"+parseCacheName)
	fact(t, dir, "one")
	for _, p := range sleepLater(t, dir, store).Phases {
		if p.Commit != "" {
			t.Fatalf("a new fact made %s commit", p.Name)
		}
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
	sleepLater(t, dir, store)
	if readFile(t, dir, ".git/memd/"+parseCacheName) == before {
		t.Fatal("more than minCacheRewrite files read past the cache: not rewritten")
	}
}

// The caches of earlier versions (the gob parse cache, the idle record and its walk) are
// removed when the parse cache is saved: nothing reads them any more.
func TestRetiredCachesRemoved(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	for _, name := range retiredStateFiles {
		testutil.WriteFile(t, dir, ".git/memd/"+name, "old\n")
	}
	fact(t, dir, "new")
	if err := os.Remove(filepath.Join(dir, ".git", "memd", parseCacheName)); err != nil {
		t.Fatal(err)
	}
	sleepLater(t, dir, store)
	for _, name := range retiredStateFiles {
		if exists(dir, ".git/memd/"+name) {
			t.Errorf("%s left in the state dir", name)
		}
	}
}
