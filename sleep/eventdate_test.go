package sleep

import (
	"strings"
	"testing"

	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/internal/testutil"
)

// memhtml's write path names a file by its WRITE date; the event is the first <time
// datetime> in the article. Episodes written in 2026 about 2023 land in the 2023 arc (and are
// archived as 2023's; memhtml's archive files them under the year of the archiving run,
// archive/2026/), and an episode with no date in its name counts (by <time>, else created).
func TestEventDateDecidesArcAndArchiveYear(t *testing.T) {
	dir := t.TempDir()
	ep := func(title, event, created string) string {
		return mem{typ: "episodic", title: title, entities: []string{"team:ops"}, event: event, created: created}.html()
	}
	testutil.WriteFile(t, dir, "areas/x/20261120-kickoff.html", ep("Kickoff", "2023-02-01", "2026-11-20T09:00:00Z"))
	testutil.WriteFile(t, dir, "areas/x/20261121-incident.html", ep("Incident", "2023-09-01", "2026-11-21T09:00:00Z"))
	testutil.WriteFile(t, dir, "areas/x/ops-review.html", ep("Review", "2023-05-05", "2026-11-22T09:00:00Z"))
	testutil.WriteFile(t, dir, "areas/x/ops-retro.html", ep("Retro", "", "2023-12-01T09:00:00Z")) // no <time>: created
	// A memory superseded by an episode that moves: its superseded-by meta follows.
	sup := strings.Replace(mem{typ: "semantic", title: "Old runbook"}.html(), "</head>",
		`<meta name="memhtml-superseded-by" content="/areas/x/20261120-kickoff.html">`+"\n</head>", 1)
	testutil.WriteFile(t, dir, "areas/x/old-runbook.html", sup)
	// A task past its valid-until: tasks are never expired by it (memhtml exempts them).
	testutil.WriteFile(t, dir, "projects/p/tasks/renew-cert.html", mem{typ: "task", title: "Renew the cert", taskSts: "todo", validUntil: "2025-01-01"}.html())
	// memhtml's generated listings are never memories, even one shaped like an episode.
	testutil.WriteFile(t, dir, "areas/x/index.html", ep("Listing", "2023-03-03", "2026-11-20T09:00:00Z"))
	testutil.WriteFile(t, dir, ".memhtml/sleep/run.html", ep("Report", "2023-03-04", "2026-11-20T09:00:00Z"))
	initRepo(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)

	if exists(dir, "areas/arcs/team-ops-2026.html") {
		t.Error("an arc for the write year 2026")
	}
	arc := readFile(t, dir, "areas/arcs/team-ops-2023.html")
	mustContain(t, "arc", arc, "team:ops in 2023: 4 episodes, 2023-02-01 to 2023-12-01.")
	m := memfile.ParseBytes([]byte(arc))
	if !m.Valid() || len(m.Warnings) > 0 || len(m.Links) > 0 || m.Meta(memfile.MetaAuthor) != memfile.ArcAuthor {
		t.Errorf("arc: violations %q, warnings %q, links %v", m.Violations, m.Warnings, m.Links)
	}
	// List order is event order, and after archiving the members are linked where they went.
	order := []string{
		`href="/archive/2026/areas/x/20261120-kickoff.html"`,
		`href="/archive/2026/areas/x/ops-review.html"`,
		`href="/archive/2026/areas/x/20261121-incident.html"`,
		`href="/archive/2026/areas/x/ops-retro.html"`,
	}
	last := -1
	for _, h := range order {
		i := strings.Index(arc, h)
		if i < 0 || i < last {
			t.Errorf("arc lacks %s, or out of event order:\n%s", h, arc)
		}
		last = i
	}
	for _, p := range []string{"areas/x/20261120-kickoff.html", "areas/x/20261121-incident.html", "areas/x/ops-review.html", "areas/x/ops-retro.html"} {
		if exists(dir, p) || !exists(dir, "archive/2026/"+p) {
			t.Errorf("%s not archived under the run's year 2026", p)
		}
	}
	mustContain(t, "superseded memory", readFile(t, dir, "areas/x/old-runbook.html"),
		`<meta name="memhtml-superseded-by" content="/archive/2026/areas/x/20261120-kickoff.html">`)
	for _, p := range []string{"areas/x/index.html", ".memhtml/sleep/run.html"} {
		if !exists(dir, p) || strings.Contains(arc, p) {
			t.Errorf("%s, not a memory, was moved or counted", p)
		}
	}
	if !exists(dir, "projects/p/tasks/renew-cert.html") {
		t.Error("a task was expired by its valid-until")
	}
}
