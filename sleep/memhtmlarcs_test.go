package sleep

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/testutil"
)

// Arcs as memhtml sees entities and arcs: spellings memhtml takes for one entity make one arc
// with every episode; an episode memhtml refuses (a <time> with a UTC offset) is in no arc and
// is never dated by its file name; each member gets the memhtml-part-of link in the arcs
// commit, its article untouched; an arc memd did not write, at memd's path, is never
// rewritten; a second night changes nothing.
func TestArcsFollowMemhtml(t *testing.T) {
	dir := t.TempDir()
	ep := func(title, entity, event string) string {
		return mem{typ: "episodic", title: title, entities: []string{entity}, event: event, created: event + "T09:00:00Z"}.html()
	}
	members := map[string]string{
		"areas/x/20250303-a.html": ep("A", "person:Alice Chen", "2025-03-03"),
		"areas/x/20250404-b.html": ep("B", "person:alice chen", "2025-04-04"),
		"areas/x/20250505-c.html": ep("C", "person:ALICE  CHEN", "2025-05-05"),
	}
	for p, h := range members {
		testutil.WriteFile(t, dir, p, h)
	}
	offset := "areas/x/20250606-offset.html"
	testutil.WriteFile(t, dir, offset, strings.Replace(ep("Offset", "person:Alice Chen", "2025-06-06"),
		`datetime="2025-06-06"`, `datetime="2025-06-06T10:00:00+02:00"`, 1))
	for i, d := range []string{"2025-03-01", "2025-04-01", "2025-05-01"} {
		testutil.WriteFile(t, dir, "areas/y/b"+string(rune('0'+i))+".html", ep("Bob "+d, "person:Bob Stone", d))
	}
	curated := "areas/arcs/person-bob-stone-2025.html"
	curatedHTML := mem{typ: "arc", title: "Bob Stone in 2025", entities: []string{"person:Bob Stone"}, created: "2026-12-01T00:00:00Z"}.html()
	testutil.WriteFile(t, dir, curated, curatedHTML)
	initRepo(t, dir)
	store := openStore(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{memd.PhaseArcs} })
	if rep.Failed() {
		t.Fatalf("%+v", rep)
	}
	arc := readFile(t, dir, "areas/arcs/person-alice-chen-2025.html")
	mustContain(t, "arc claim", arc, "in 2025: 3 episodes, 2025-03-03 to 2025-05-05.")
	mustNotContain(t, "arc members", arc, offset)
	mustContain(t, "arc signed", arc, `<meta name="memhtml-author" content="agent:memd">`)
	if readFile(t, dir, curated) != curatedHTML {
		t.Errorf("the curated arc was rewritten:\n%s", readFile(t, dir, curated))
	}
	for p, before := range members {
		got := readFile(t, dir, p)
		mustContain(t, p, got, `<link rel="memhtml-part-of" href="/areas/arcs/person-alice-chen-2025.html">`)
		if memfile.ParseBytes([]byte(got)).ComputedHash != memfile.ParseBytes([]byte(before)).ComputedHash {
			t.Errorf("%s: the link changed the article", p)
		}
	}
	mustNotContain(t, "offset episode", readFile(t, dir, offset), "memhtml-part-of")
	ac := phaseCommit(t, dir, "arcs")
	names := testutil.RunGit(t, dir, "diff", "--name-only", ac+"~1", ac)
	for p := range members {
		mustContain(t, "arcs commit", names, p)
	}
	h := head(t, dir)
	store.WaitIndexRefresh()
	if _, err := NewRunner(dir, store, Options{Config: testConfig(), Now: func() time.Time { return fixNow }, NoGC: true,
		Phases: []memd.Phase{memd.PhaseArcs}}).Run(context.Background(), "next"); err != nil {
		t.Fatal(err)
	}
	if head(t, dir) != h {
		t.Error("a second night committed")
	}
}
