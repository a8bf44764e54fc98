package sleep

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/format/writerlock"
	"github.com/memd-dev/memd/internal/commitmsg"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

func TestArchiveReason(t *testing.T) {
	parse := func(m mem) *memfile.Memory { return memfile.ParseBytes([]byte(m.html())) }
	const keep = 1
	after := 30 * 24 * time.Hour
	cases := []struct {
		path string
		m    mem
		want bool
	}{
		{"areas/x/20241231-a.html", mem{typ: "episodic"}, true},                         // 2024 < 2025
		{"areas/x/20250101-a.html", mem{typ: "episodic", created: "2020-01-01"}, false}, // prefix wins: 2025
		{"areas/x/a.html", mem{typ: "episodic", event: "2023-05-01", created: "2026-01-01"}, true},
		{"areas/x/a.html", mem{typ: "episodic", created: "2024-12-31T23:00:00Z"}, true},
		{"areas/x/a.html", mem{typ: "episodic", created: "2025-01-01T00:00:00Z"}, false},
		{"projects/p/tasks/t.html", mem{typ: "task", taskSts: "done", updated: "2026-10-30T02:59:59Z", created: "2026-01-01"}, true},
		{"projects/p/tasks/t.html", mem{typ: "task", taskSts: "done", updated: "2026-10-31T03:00:00Z", created: "2026-01-01"}, false},
		{"projects/p/tasks/t.html", mem{typ: "task", taskSts: "doing", updated: "2020-01-01", created: "2020-01-01"}, false},
		{"resources/go/a.html", mem{typ: "semantic", status: "archived"}, true},
		{"resources/go/a.html", mem{typ: "semantic", created: "2010-01-01"}, false},                  // other types never by age
		{"areas/arcs/x-2010.html", mem{typ: "arc", created: "2010-01-01"}, false},                    // arcs never
		{"areas/arcs/x-2010.html", mem{typ: "arc", status: "archived"}, false},                       // not even when marked
		{"resources/people/sanju.html", mem{typ: "episodic", created: "2010-01-01"}, false},          // people never
		{"resources/people/sanju.html", mem{typ: "semantic", status: "archived"}, false},             // people never
		{"archive/2024/areas/x/20240101-a.html", mem{typ: "episodic", created: "2024-01-01"}, false}, // already archived
	}
	for _, c := range cases {
		got := ArchiveReason(c.path, parse(c.m), fixNow, keep, after) != ""
		if got != c.want {
			t.Errorf("%s %+v: archived=%v, want %v", c.path, c.m, got, c.want)
		}
	}
}

// The whole night on a repo spanning years: one commit per phase with the trailers, each
// rule applied, moves that git sees as R100 and follows, links rewritten, and a second run
// that commits nothing.
func TestFullSleep(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	base := head(t, dir)
	store := openStore(t, dir)
	rep := runSleep(t, dir, store, testConfig(), nil)
	if rep.Failed() {
		t.Fatalf("run failed: %+v", rep)
	}
	msgs := commitsSince(t, dir, base)
	if len(msgs) != 4 {
		t.Fatalf("want 4 sleep commits, got %d:\n%s", len(msgs), strings.Join(msgs, "\n---\n"))
	}
	for i, ph := range []string{"tidy", "archive", "arcs", "expire"} {
		m := msgs[i]
		if !strings.HasPrefix(m, "sleep("+ph+"): ") {
			t.Errorf("commit %d: %q, want sleep(%s)", i, m, ph)
		}
		tr := commitmsg.Trailers(m)
		if tr[TrailerRun] != "20261130T030000Z" || tr[TrailerPhase] != ph || tr[TrailerCounts] == "" {
			t.Errorf("commit %d trailers %v", i, tr)
		}
	}
	byPhase := map[memd.Phase]PhaseResult{}
	for _, p := range rep.Phases {
		byPhase[p.Name] = p
		if p.Commit == "" {
			t.Errorf("phase %s made no commit", p.Name)
		}
	}

	checkFullExpire(t, dir, byPhase["expire"].Counts)
	checkFullArcs(t, dir, byPhase["arcs"].Counts)
	checkFullArchive(t, dir, base, byPhase["archive"].Counts)
	checkFullTidy(t, dir)
	checkNextNights(t, dir, store)
}

// checkFullExpire checks what expire did to the fixture.
func checkFullExpire(t *testing.T, dir string, c map[string]int) {
	t.Helper()
	if c["drained"] != 3 || c["stale"] != 2 || c["archived"] != 1 || c["unparseable"] != 1 {
		t.Errorf("expire counts %v", c)
	}
	ledger := readFile(t, dir, "memory.jsonl")
	for _, id := range []string{"r1", "l1", "p1", "h-future", "h-exact", "s-grace", "s-future", "rc1"} {
		mustContain(t, "ledger", ledger, `"id":"`+id+`"`)
	}
	for _, id := range []string{"h-past", "s-drain", "rc0"} {
		mustNotContain(t, "ledger", ledger, `"id":"`+id+`"`)
	}
	mustContain(t, "ledger keeps the broken line", ledger, "{this line is broken\n")
	d25 := readFile(t, dir, "archive/2025/memory.drained.jsonl")
	mustContain(t, "2025 drained", d25, `"id":"h-past"`)
	mustContain(t, "unknown field kept", d25, `"x-keep":{"a":[1,2]}`)
	mustContain(t, "drainedAt", d25, `"drainedAt":"2026-11-30T03:00:00Z"`)
	mustContain(t, "drainReason", d25, `"drainReason":"hard-expiry"`)
	d26 := readFile(t, dir, "archive/2026/memory.drained.jsonl")
	mustContain(t, "2026 drained", d26, `"id":"s-drain"`)
	mustContain(t, "2026 drained", d26, `"id":"rc0"`)
	mustContain(t, "read-count reason", d26, `"drainReason":"read-count"`)
	if exists(dir, expiredF) || !exists(dir, "archive/2026/"+expiredF) {
		t.Error("memory past its valid-until + grace not archived")
	}
	if !exists(dir, validF) {
		t.Error("memory within its valid-until grace was moved")
	}
}

// checkFullArcs checks the arcs written for the fixture.
func checkFullArcs(t *testing.T, dir string, c map[string]int) {
	t.Helper()
	if c["created"] != 2 {
		t.Errorf("arcs counts %v, want created=2", c)
	}
	arc24 := readFile(t, dir, "areas/arcs/person-sanju-rao-2024.html")
	arc25 := readFile(t, dir, "areas/arcs/person-sanju-rao-2025.html")
	if m := memfile.ParseBytes([]byte(arc25)); !m.Valid() || m.Type != "arc" {
		t.Errorf("arc 2025 invalid: %v", m.Violations)
	}
	mustContain(t, "arc 2025 claim", arc25, "person:Sanju Rao in 2025: 3 episodes, 2025-02-03 to 2025-10-20.")
	for _, p := range []string{"areas/arcs/service-checkout-api-2025.html", "areas/arcs/service-db-2024.html"} {
		if exists(dir, p) {
			t.Errorf("%s written below min_episodes", p)
		}
	}
	// The archived year keeps its arc, which now links the archive paths.
	mustContain(t, "arc 2024 links archive", arc24, `href="/archive/2026/`+epOld1+`"`)
	mustNotContain(t, "arc 2024 links old path", arc24, `href="/`+epOld1+`"`)
}

// checkFullArchive checks the fixture's moves, its rename commit and the links repointed.
func checkFullArchive(t *testing.T, dir, base string, c map[string]int) {
	t.Helper()
	if c["archived"] != 5 {
		t.Errorf("archive counts %v, want archived=5", c)
	}
	// memhtml's archive rule: the year of the archiving run (fixNow, 2026), whatever the
	// memory's own year, and memhtml's stamps on each moved file.
	for _, p := range []string{epOld1, epOld2, epOld3, semArch, taskDone} {
		if exists(dir, p) || !exists(dir, "archive/2026/"+p) {
			t.Errorf("%s not archived to archive/2026", p)
			continue
		}
		got := readFile(t, dir, "archive/2026/"+p)
		for _, want := range []string{`<meta name="memhtml-status" content="archived">`,
			`<meta name="memhtml-updated" content="2026-11-30T03:00:00Z">`,
			`<meta name="memhtml-archived" content="2026-11-30T03:00:00Z">`} {
			mustContain(t, "archive stamps", got, want)
		}
		if m := memfile.ParseBytes([]byte(got)); !m.Valid() || m.ComputedHash != m.ContentHash && m.ContentHash != "" {
			t.Errorf("%s: stamped file invalid or its article changed: %v", p, m.Violations)
		}
	}
	for _, p := range []string{epNew1, epThis, personF, semOld, taskFresh, taskOpen, oldArc, noteFile} {
		if !exists(dir, p) {
			t.Errorf("%s was moved; it must stay", p)
		}
	}
	ac := phaseCommit(t, dir, "archive")
	// The stamps ride in the move commit, as memhtml's do: git still sees each move as a
	// rename and follows it.
	ns := testutil.RunGit(t, dir, "diff", "-M", "--name-status", ac+"~1", ac)
	for _, p := range []string{epOld1, epOld2, epOld3, semArch, taskDone} {
		if !regexp.MustCompile(`(?m)^R\d+\t` + regexp.QuoteMeta(p) + `\tarchive/2026/`).MatchString(ns) {
			t.Errorf("archive diff: no rename of %s:\n%s", p, ns)
		}
	}
	follow := testutil.RunGit(t, dir, "log", "--follow", "--format=%H", "--", "archive/2026/"+epOld1)
	if !strings.Contains(follow, base) {
		t.Errorf("git log --follow does not reach the first commit %s:\n%s", base, follow)
	}
	notes := readFile(t, dir, noteFile)
	mustContain(t, "links rewritten", notes, `href="/archive/2026/`+epOld1+`"`)
	mustContain(t, "links rewritten", notes, `href="/archive/2026/`+epOld2+`"`)
	mustContain(t, "link to a staying file kept", notes, `href="/`+epNew1+`"`)
	idx := readFile(t, dir, indexMD)
	mustContain(t, "index repointed", idx, "- [[archive/2026/"+epOld1+"|Rollback]] \u00b7 type:episodic subject:oncall \u00b7 the rollback\n")
	mustContain(t, "index repointed", idx, "- [[archive/2026/"+semArch+"|Old flags]]")
	mustContain(t, "index kept", idx, "- [["+epNew1+"|Checkout outage]]")
}

// checkFullTidy checks the project MEMORY.md in template with a backup, and the link inside
// an archived file repointed in tidy's own commit (the archive commit left its bytes alone).
func checkFullTidy(t *testing.T, dir string) {
	t.Helper()
	pmd := readFile(t, dir, projectMD)
	if r := memorymd.InspectProject([]byte(pmd)); !r.InTemplate {
		t.Errorf("project MEMORY.md not in template: %+v\n%s", r, pmd)
	}
	mustContain(t, "unsorted kept", pmd, "### Unsorted: Notes")
	mustContain(t, "backup", readFile(t, dir, "projects/shop/"+memorymd.PreMigrationName), "## Notes\n- misc\n")
	moved3 := readFile(t, dir, "archive/2026/"+epOld3)
	mustContain(t, "archived file repointed by tidy", moved3, `href="/archive/2026/`+epOld1+`"`)
	tc := phaseCommit(t, dir, "tidy")
	tns := testutil.RunGit(t, dir, "diff", "--name-status", tc+"~1", tc)
	mustContain(t, "tidy touched the archived file", tns, "M\tarchive/2026/"+epOld3)
}

// checkNextNights: nothing left uncommitted after the full run, and the nights after it
// (the same run id, then another) commit nothing.
func checkNextNights(t *testing.T, dir string, store *gitrepo.Repo) {
	t.Helper()
	store.WaitIndexRefresh()
	if st := testutil.RunGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("tree not clean after sleep:\n%s", st)
	}
	h := head(t, dir)
	rep2 := runSleep(t, dir, store, testConfig(), nil)
	if head(t, dir) != h {
		t.Fatalf("second run (same id) committed: %s", strings.Join(commitsSince(t, dir, h), "\n"))
	}
	for _, p := range rep2.Phases {
		if !p.Skipped {
			t.Errorf("phase %s not skipped on the same run id", p.Name)
		}
	}
	// A different run id (the next night at the same clock) plans again and finds nothing.
	rep3, err := NewRunner(dir, store, Options{Config: testConfig(), Now: func() time.Time { return fixNow }, NoGC: true}).Run(context.Background(), "manual-2")
	if err != nil || rep3.Failed() {
		t.Fatalf("third run: %v %+v", err, rep3)
	}
	if head(t, dir) != h {
		t.Fatalf("third run committed: %s", strings.Join(commitsSince(t, dir, h), "\n"))
	}
	st, err := ReadState(filepath.Join(dir, ".git", "memd"))
	if err != nil || st.Phases["tidy"].Run != "manual-2" {
		t.Errorf("sleep.json after runs: %+v %v", st, err)
	}
}

// Arcs: created at exactly min_episodes, not one below, rewritten when a member is added,
// untouched (no commit, same bytes) when nothing changed.
func TestArcsThresholdAndUpdate(t *testing.T) {
	dir := t.TempDir()
	ep := func(day, entity string) mem {
		return mem{typ: "episodic", title: "Ep " + day, entities: []string{entity}, created: "2026-" + day + "T10:00:00Z"}
	}
	testutil.WriteFile(t, dir, "areas/x/20260101-a.html", ep("01-01", "team:red").html())
	testutil.WriteFile(t, dir, "areas/x/20260201-b.html", ep("02-01", "team:red").html())
	testutil.WriteFile(t, dir, "areas/x/20260301-c.html", ep("03-01", "team:red").html())
	testutil.WriteFile(t, dir, "areas/x/20260101-d.html", ep("01-01", "team:blue").html())
	testutil.WriteFile(t, dir, "areas/x/20260201-e.html", ep("02-01", "team:blue").html())
	initRepo(t, dir)
	store := openStore(t, dir)
	cfg := testConfig()
	arcsOnly := func(o *Options) { o.Phases = []memd.Phase{"arcs"} }
	h0 := head(t, dir)
	rep := runSleep(t, dir, store, cfg, arcsOnly)
	if rep.Phases[0].Counts["created"] != 1 {
		t.Fatalf("counts %v", rep.Phases[0].Counts)
	}
	if !exists(dir, "areas/arcs/team-red-2026.html") {
		t.Fatal("no arc at exactly min_episodes")
	}
	if exists(dir, "areas/arcs/team-blue-2026.html") {
		t.Fatal("arc one below min_episodes")
	}
	if n := len(commitsSince(t, dir, h0)); n != 1 {
		t.Fatalf("%d commits", n)
	}
	red := readFile(t, dir, "areas/arcs/team-red-2026.html")

	// Nothing changed: no commit, same bytes (a new run id so the trailers don't skip it).
	h1 := head(t, dir)
	if _, err := NewRunner(dir, store, Options{Config: cfg, Phases: []memd.Phase{"arcs"}, Now: func() time.Time { return fixNow }, NoGC: true}).Run(context.Background(), "again"); err != nil {
		t.Fatal(err)
	}
	if head(t, dir) != h1 || readFile(t, dir, "areas/arcs/team-red-2026.html") != red {
		t.Fatal("unchanged arc rewritten or committed")
	}

	// A member added: the arc is rewritten; blue reaches the threshold.
	testutil.WriteFile(t, dir, "areas/x/20260401-f.html", ep("04-01", "team:red").html())
	testutil.WriteFile(t, dir, "areas/x/20260301-g.html", ep("03-01", "team:blue").html())
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "more")
	h2 := head(t, dir)
	rep, err := NewRunner(dir, store, Options{Config: cfg, Phases: []memd.Phase{"arcs"}, Now: func() time.Time { return fixNow }, NoGC: true}).Run(context.Background(), "third")
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Phases[0].Counts; c["updated"] != 1 || c["created"] != 1 {
		t.Fatalf("counts after adding members: %v, want updated=1 created=1", c)
	}
	red2 := readFile(t, dir, "areas/arcs/team-red-2026.html")
	if red2 == red {
		t.Fatal("arc bytes unchanged after a member was added")
	}
	mustContain(t, "updated arc", red2, "team:red in 2026: 4 episodes, 2026-01-01 to 2026-04-01.")
	if !exists(dir, "areas/arcs/team-blue-2026.html") {
		t.Fatal("blue arc not created once it reached 3")
	}
	if n := len(commitsSince(t, dir, h2)); n != 1 {
		t.Fatalf("want one arcs commit, got %d", n)
	}
}

// A phase that fails midway leaves the tree as it was (files moved back, rewrites undone),
// is recorded, and the phases after it still run and commit.
func TestFailedPhaseIsUndoneAndLaterPhasesRun(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	// Run expire and arcs first so the archive run starts from a committed tree.
	runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"expire", "arcs"} })
	h := head(t, dir)
	notesBefore, indexBefore := readFile(t, dir, noteFile), readFile(t, dir, indexMD)
	boom := errors.New("injected failure")
	failAt := func(o *Options) {
		o.afterOp = func(phase memd.Phase, i int) error {
			if phase == "archive" && i == 4 {
				return boom
			}
			return nil
		}
	}
	// Archive alone: the tree is exactly as before.
	before := treeDigest(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"archive"}; failAt(o) })
	if !rep.Failed() || !errors.Is(rep.Phases[0].Err, boom) || rep.Phases[0].Commit != "" {
		t.Fatalf("archive result %+v", rep.Phases[0])
	}
	if treeDigest(t, dir) != before {
		t.Fatalf("tree changed by the failed phase: %v", treeList(t, dir))
	}
	if exists(dir, filepath.Join(".git", "memd", journalDirName)) {
		t.Error("journal left behind")
	}
	if exists(dir, "archive/2024") {
		t.Error("directory made by the failed phase left behind")
	}
	if head(t, dir) != h {
		t.Fatal("failed phase committed")
	}
	// Archive then tidy: archive fails, tidy still runs and commits its own work only.
	rep = runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"archive", "tidy"}; failAt(o) })
	if !rep.Failed() || rep.Phases[0].Err == nil {
		t.Fatalf("archive result %+v", rep.Phases[0])
	}
	if rep.Phases[1].Err != nil || rep.Phases[1].Commit == "" {
		t.Fatalf("tidy after a failed archive: %+v", rep.Phases[1])
	}
	msgs := commitsSince(t, dir, h)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "sleep(tidy)") {
		t.Fatalf("commits after failure: %v", msgs)
	}
	store.WaitIndexRefresh()
	if st := testutil.RunGit(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("tree not clean:\n%s", st)
	}
	for _, p := range []string{epOld1, epOld2, epOld3, semArch, taskDone} {
		if !exists(dir, p) {
			t.Errorf("%s not back in place", p)
		}
	}
	if readFile(t, dir, noteFile) != notesBefore || readFile(t, dir, indexMD) != indexBefore {
		t.Error("link rewrites of the failed phase not undone")
	}
}

// A real failure, no hook: archive/2026 (the run's year) is a file, so the archive directory
// cannot be made; the stamps written before the moves are undone with them.
func TestFailedPhaseRealError(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	testutil.WriteFile(t, dir, "archive/2026", "I am a file in the way\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "obstacle")
	store := openStore(t, dir)
	before := treeDigest(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"archive"} })
	if !rep.Failed() {
		t.Fatal("archive succeeded through a file where a directory must be")
	}
	if !strings.Contains(rep.Phases[0].Error, "archive/2026") {
		t.Errorf("error does not name the path: %s", rep.Phases[0].Error)
	}
	if treeDigest(t, dir) != before {
		t.Fatalf("tree changed: %v", treeList(t, dir))
	}
}

// A writer changing a file between plan and apply: the apply refuses (ErrConflict), nothing
// is written.
func TestApplyRefusesChangedFile(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	r := NewRunner(dir, store, Options{Config: testConfig(), Now: func() time.Time { return fixNow }, NoGC: true})
	snap, err := loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planExpire(snap, &planEnv{ctx: context.Background(), cfg: testConfig(), now: fixNow, log: r.log})
	if err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, dir, "memory.jsonl", readFile(t, dir, "memory.jsonl")+`{"id":"new","type":"note","text":"written meanwhile"}`+"\n")
	before := treeDigest(t, dir)
	if _, err := r.applyAndCommit(context.Background(), "x", "expire", p); !errors.Is(err, ErrConflict) {
		t.Fatalf("apply over a changed ledger: %v, want ErrConflict", err)
	}
	if treeDigest(t, dir) != before {
		t.Fatal("tree changed")
	}
}

// --dry-run plans every phase (each on what the previous would leave) and writes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	before := treeDigest(t, dir)
	h := head(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.DryRun = true })
	if treeDigest(t, dir) != before || head(t, dir) != h {
		t.Fatal("dry run wrote")
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "memd", StateFile)); err == nil {
		t.Error("dry run wrote sleep.json")
	}
	counts := map[memd.Phase]map[string]int{}
	var items []Item
	for _, p := range rep.Phases {
		counts[p.Name] = p.Counts
		items = append(items, p.Items...)
	}
	if counts["expire"]["drained"] != 3 || counts["arcs"]["created"] != 2 || counts["archive"]["archived"] != 5 || counts["tidy"]["repaired"] != 1 {
		t.Errorf("dry-run counts %v", counts)
	}
	// The archive plan saw the arcs the arcs plan would write: it rewrites their links.
	found := false
	for _, it := range items {
		if it.Action == "rewrite-link" && it.Path == "areas/arcs/person-sanju-rao-2024.html" {
			found = true
		}
	}
	if !found {
		t.Error("dry-run archive plan does not rewrite the links of the arc the arcs plan writes")
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// A writer holding the lock: the phase waits, times out, fails, and changes nothing.
func TestHeldWriterLockBlocksApply(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	host, _ := os.Hostname()
	// A live holder: another process's pid, written the way a Python writer writes it.
	holder := exec.Command("sleep", "60")
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	testutil.WriteFile(t, dir, ".memory.lock", "pid: "+itoa(holder.Process.Pid)+"\nhostname: "+host+"\nacquired_at: 2026-11-30T02:59:00Z\ncontext: python writer\n")
	before := treeDigest(t, dir)
	h := head(t, dir)
	cfg := testConfig()
	cfg.Lock.Timeout = memd.Duration(300 * time.Millisecond)
	rep := runSleep(t, dir, store, cfg, func(o *Options) { o.Phases = []memd.Phase{"expire"} })
	if !rep.Failed() || !errors.Is(rep.Phases[0].Err, writerlock.ErrTimeout) {
		t.Fatalf("expire under a held lock: %+v", rep.Phases[0])
	}
	mustContain(t, "lock error names the holder", rep.Phases[0].Error, "python writer")
	if treeDigest(t, dir) != before || head(t, dir) != h {
		t.Fatal("changed under a held lock")
	}
	if err := os.Remove(filepath.Join(dir, ".memory.lock")); err != nil {
		t.Fatal(err)
	}
	rep = runSleep(t, dir, store, cfg, func(o *Options) { o.Phases = []memd.Phase{"expire"} })
	if rep.Failed() || rep.Phases[0].Commit == "" {
		t.Fatalf("expire after release: %+v", rep.Phases[0])
	}
	if exists(dir, ".memory.lock") {
		t.Error("sleep left the lock file")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The parse cache never hides a change: a file edited after a run (same size, new mtime)
// is parsed again, and acted on.
func TestParseCacheSeesEdits(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	if !exists(dir, ".git/memd/"+parseCacheName) {
		t.Fatal("no parse cache written")
	}
	// A run an hour later (as the racy rule sees it) re-saves the cache with every entry
	// trusted by its stat, as on a real next night.
	runSleep(t, dir, store, testConfig(), func(o *Options) { o.wallNow = func() time.Time { return time.Now().Add(time.Hour) } })
	old := readFile(t, dir, semOld)
	edited := strings.Replace(old, `content="active"`, `content="archived"`, 1)
	edited = strings.Replace(edited, "GC tuning happened", "GC tuning happen", 1) // same size: "archived" is 2 longer
	if len(edited) != len(old) {
		t.Fatalf("edit changed the size: %d vs %d", len(edited), len(old))
	}
	testutil.WriteFile(t, dir, semOld, edited)
	future := time.Now().Add(time.Minute)
	if err := os.Chtimes(filepath.Join(dir, semOld), future, future); err != nil {
		t.Fatal(err)
	}
	// The sleep runs' commits refresh .git/index in the background; the user's git commit
	// waits for that to end (memd holds index.lock only for a rename, but a loaded machine
	// can still stretch a rename).
	store.WaitIndexRefresh()
	testutil.RunGit(t, dir, "commit", "-qam", "writer archives gc-tuning")
	rep, err := NewRunner(dir, store, Options{Config: testConfig(), Now: func() time.Time { return fixNow }, NoGC: true}).Run(context.Background(), "next")
	if err != nil || rep.Failed() {
		t.Fatal(err, rep)
	}
	if exists(dir, semOld) || !exists(dir, "archive/2026/"+semOld) {
		t.Fatal("an edited file's new status was not seen (stale parse cache)")
	}
}

// failingStore refuses commits whose message starts with prefix.
type failingStore struct {
	Store
	prefix string
}

func (f failingStore) CommitPathsMessage(paths []string, msg string, kind memd.CommitKind) (memd.CommitResult, error) {
	if strings.HasPrefix(msg, f.prefix) {
		return memd.CommitResult{}, errors.New("disk on fire")
	}
	return f.Store.CommitPathsMessage(paths, msg, kind)
}

// A commit that fails undoes the applied phase in the tree.
func TestFailedCommitIsUndone(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := failingStore{Store: openStore(t, dir), prefix: "sleep(expire)"}
	before := treeDigest(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"expire"} })
	if !rep.Failed() || !strings.Contains(rep.Phases[0].Error, "disk on fire") {
		t.Fatalf("%+v", rep.Phases[0])
	}
	if treeDigest(t, dir) != before {
		t.Fatalf("tree not restored after a failed commit: %v", treeList(t, dir))
	}
}

// tidy repoints what points at a path that now lives in the archive (moved by hand or by an
// earlier run): index bullets and memory links, archived files' own links included.
func TestTidyRepointsToArchive(t *testing.T) {
	dir := t.TempDir()
	gone := "areas/x/20230101-a.html"
	testutil.WriteFile(t, dir, "archive/2023/"+gone, mem{typ: "episodic", title: "A", created: "2023-01-01T00:00:00Z",
		links: []string{"/areas/x/20230105-b.html"}}.html())
	testutil.WriteFile(t, dir, "archive/2023/areas/x/20230105-b.html", mem{typ: "episodic", title: "B", created: "2023-01-05T00:00:00Z"}.html())
	testutil.WriteFile(t, dir, "resources/r/ref.html", mem{typ: "semantic", title: "Ref", links: []string{"/" + gone, "/resources/r/missing.html"}}.html())
	testutil.WriteFile(t, dir, "MEMORY.md", "# MEMORY\n\n- [["+gone+"|A]] \u00b7 type:episodic subject:x \u00b7 a\n- [[resources/r/ref.html|Ref]] \u00b7 type:semantic subject:r \u00b7 ref\n")
	initRepo(t, dir)
	store := openStore(t, dir)
	h := head(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"tidy"} })
	if rep.Failed() {
		t.Fatal(rep.Phases[0].Err)
	}
	if c := rep.Phases[0].Counts; c["links"] != 2 || c["bullets"] != 1 {
		t.Errorf("tidy counts %v, want links=2 bullets=1", c)
	}
	mustContain(t, "index", readFile(t, dir, "MEMORY.md"), "- [[archive/2023/"+gone+"|A]] \u00b7 type:episodic subject:x \u00b7 a\n")
	ref := readFile(t, dir, "resources/r/ref.html")
	mustContain(t, "ref", ref, `href="/archive/2023/`+gone+`"`)
	mustContain(t, "dangling link with no archive copy left alone", ref, `href="/resources/r/missing.html"`)
	mustContain(t, "archived file's own link", readFile(t, dir, "archive/2023/"+gone), `href="/archive/2023/areas/x/20230105-b.html"`)
	if n := len(commitsSince(t, dir, h)); n != 1 {
		t.Fatalf("%d commits, want 1", n)
	}
}

// arcs.key: tag groups by the first tag.
func TestArcsByTag(t *testing.T) {
	dir := t.TempDir()
	for i, day := range []string{"01", "02", "03"} {
		testutil.WriteFile(t, dir, "areas/x/202603"+day+"-t"+strconv.Itoa(i)+".html",
			mem{typ: "episodic", title: "T" + day, tags: []string{"incident", "db"}, created: "2026-03-" + day + "T00:00:00Z"}.html())
	}
	initRepo(t, dir)
	cfg := testConfig()
	cfg.Arcs.Key = "tag"
	runSleep(t, dir, openStore(t, dir), cfg, func(o *Options) { o.Phases = []memd.Phase{"arcs"} })
	if !exists(dir, "areas/arcs/incident-2026.html") || exists(dir, "areas/arcs/db-2026.html") {
		t.Fatalf("tag arcs: %v", treeList(t, dir))
	}
}

func TestRewriteHrefs(t *testing.T) {
	in := `<link rel="a" href="/x/a.html"><a href='/x/a.html#top'>a</a> <a href="/x/a.html?v=1">q</a>
<a href="/x/a.html2">other</a> <a href="/y/x/a.html">other</a> <a data-href="/x/a.html">data</a> <a href="/x/b.html">b</a>`
	want := `<link rel="a" href="/archive/2024/x/a.html"><a href='/archive/2024/x/a.html#top'>a</a> <a href="/archive/2024/x/a.html?v=1">q</a>
<a href="/x/a.html2">other</a> <a href="/y/x/a.html">other</a> <a data-href="/x/a.html">data</a> <a href="/archive/2023/x/b.html">b</a>`
	got := string(rewriteHrefs([]byte(in), map[string]string{"x/a.html": "archive/2024/x/a.html", "x/b.html": "archive/2023/x/b.html"}))
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// memhtml-superseded-by names its successor by href, in content= (text is not an attribute).
	meta := `<meta name="memhtml-superseded-by" content="/x/a.html"><meta name="memhtml-tag" content="/x/a.htmlx"><p>content="/x/a.html"</p>`
	if got := string(rewriteHrefs([]byte(meta), map[string]string{"x/a.html": "archive/2024/x/a.html"})); got !=
		`<meta name="memhtml-superseded-by" content="/archive/2024/x/a.html"><meta name="memhtml-tag" content="/x/a.htmlx"><p>content="/x/a.html"</p>` {
		t.Errorf("superseded-by not rewritten: %s", got)
	}
	if out := rewriteHrefs([]byte(in), map[string]string{"z.html": "archive/2020/z.html"}); string(out) != in {
		t.Error("no match must leave the bytes as they were")
	}
}

// A lock left by a sleep killed while holding it is cleared by the next run, even one that
// has nothing to do (and so never takes the lock for an apply).
func TestStaleLockClearedByIdleRun(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	testutil.WriteFile(t, dir, ".memory.lock", "pid: "+itoa(dead.Process.Pid)+"\nhostname: "+host+"\nacquired_at: 2026-11-30T03:00:00Z\ncontext: memd sleep archive\n")
	runSleep(t, dir, store, testConfig(), nil) // same run id: every phase skipped
	if exists(dir, ".memory.lock") {
		t.Fatal("stale lock of a dead process left behind")
	}
}
