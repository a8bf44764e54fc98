package sleep

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

var deltaRuns int

// sleepDelta runs all phases at now (wall clock an hour ahead: the tree settled) and
// reports which shortcut answered: the idle record as is, or after a delta plan.
func sleepDelta(t *testing.T, dir string, store Store, cfg memd.Config, now time.Time, mutate func(*Options)) (rep Report, idle, delta bool) {
	t.Helper()
	opts := Options{Config: cfg, Now: func() time.Time { return now }, NoGC: true, wallNow: later}
	if mutate != nil {
		mutate(&opts)
	}
	r := NewRunner(dir, store, opts)
	// A run id of its own: a phase committed by an earlier run of the test is not skipped.
	deltaRuns++
	rep, err := r.Run(context.Background(), fmt.Sprintf("%s-%d", RunID(now), deltaRuns))
	if err != nil {
		t.Fatalf("sleep run: %v", err)
	}
	if rep.Failed() {
		t.Fatalf("sleep run failed: %+v", rep)
	}
	return rep, r.idleHit, r.deltaHit
}

func phaseCounts(rep Report, phase string) map[string]int {
	for _, p := range rep.Phases {
		if p.Name == phase {
			return p.Counts
		}
	}
	return nil
}

// fact writes a semantic memory no phase acts on (no date prefix, no expiry, no link).
func fact(t *testing.T, dir, name string) string {
	t.Helper()
	p := "resources/facts/" + name + ".html"
	writeFile(t, dir, p, mem{typ: "semantic", title: "Fact " + name, created: "2026-11-29T10:00:00Z"}.html())
	return p
}

// fullPlan is what planning the whole tree reports at now: a dry run without the idle
// record and its walk (which are put back after).
// planAgainstFull runs sleep after computing what a full plan gives and wants the same
// results; wantDelta says whether the delta plan must answer (true) or no shortcut may.
func planAgainstFull(t *testing.T, what, dir string, store Store, cfg memd.Config, wantDelta bool) Report {
	t.Helper()
	want := fullPlan(t, dir, store, cfg, fixNow)
	rep, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil)
	if wantDelta && (idle || !delta) {
		t.Fatalf("%s: idle %v delta %v, want the delta plan to answer", what, idle, delta)
	}
	if !wantDelta && (idle || delta) {
		t.Fatalf("%s: a shortcut answered (idle %v, delta %v)", what, idle, delta)
	}
	if got := phaseView(rep); !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: results differ from a full plan:\n got %+v\nwant %+v", what, got, want)
	}
	return rep
}

func fullPlan(t *testing.T, dir string, store Store, cfg memd.Config, now time.Time) []PhaseResult {
	t.Helper()
	state := filepath.Join(dir, ".git", "memd")
	var saved [][]byte
	for _, name := range []string{idleName, idleWalkName} {
		b, err := os.ReadFile(filepath.Join(state, name))
		if err != nil {
			t.Fatal(err)
		}
		saved = append(saved, b)
		if err := os.Remove(filepath.Join(state, name)); err != nil {
			t.Fatal(err)
		}
	}
	rep, idle, delta := sleepDelta(t, dir, store, cfg, now, func(o *Options) { o.DryRun = true })
	if idle || delta {
		t.Fatal("a run without a record used one")
	}
	for i, name := range []string{idleName, idleWalkName} {
		if err := os.WriteFile(filepath.Join(state, name), saved[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return phaseView(rep)
}

// New and edited memory files that change no plan, committed (HEAD moves): the delta plan
// answers with exactly what planning the whole tree reports, writes nothing but the
// record, and the record it leaves answers the next unchanged night as is.
func TestDeltaPlanAnswersNewMemories(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	fact(t, dir, "a")
	writeFile(t, dir, "areas/oncall/20261120-standup.html", mem{typ: "episodic", title: "Stand-up",
		entities: []string{"team:new"}, created: "2026-11-20T10:00:00Z", links: []string{"/" + epNew1}}.html())
	writeFile(t, dir, noteFile, strings.Replace(readFile(t, dir, noteFile), "Go notes happened", "Go notes changed", 1))
	writeFile(t, dir, "areas/inbox/task-later.html", mem{typ: "task", taskSts: "done", title: "Later",
		created: "2026-11-01T00:00:00Z", updated: "2026-11-29T00:00:00Z"}.html())
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "the day's writes")
	h, digest := head(t, dir), treeDigest(t, dir)
	planAgainstFull(t, "the day's writes", dir, store, cfg, true)
	if head(t, dir) != h || treeDigest(t, dir) != digest {
		t.Fatal("a delta run changed the repo")
	}
	if _, idle, _ := sleepDelta(t, dir, store, cfg, fixNow, nil); !idle {
		t.Fatal("the record a delta run left did not answer the unchanged tree")
	}
	// Deltas chain: the next day compares with today.
	fact(t, dir, "b")
	if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); !delta {
		t.Fatal("second day: the delta plan did not answer")
	}
	// A dry run uses the delta plan and writes nothing.
	fact(t, dir, "c")
	rec := readFile(t, dir, ".git/memd/"+idleName)
	if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, func(o *Options) { o.DryRun = true }); !delta {
		t.Fatal("dry run: the delta plan did not answer")
	}
	if readFile(t, dir, ".git/memd/"+idleName) != rec {
		t.Fatal("a dry run wrote the idle record")
	}
}

// Each change that could make a plan non-empty stops the delta plan, and the full plan
// acts on it. Every case also adds a memory file that changes nothing, so the idle record
// alone cannot answer.
func TestDeltaPlanInvalidation(t *testing.T) {
	type check func(t *testing.T, rep Report)
	committed := func(phase, key string, n int) check {
		return func(t *testing.T, rep Report) { wantCommitted(t, rep, phase, key, n) }
	}
	cases := []struct {
		name   string
		change func(t *testing.T, dir string, store Store, cfg *memd.Config) time.Time // returns the clock
		want   check
	}{
		{"new episode past the archive age", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, "areas/oncall/20230101-new-year.html", mem{typ: "episodic", title: "New year", created: "2023-01-01T00:00:00Z"}.html())
			return fixNow
		}, committed(PhaseArchive, "archived", 1)},
		{"new done task past done_tasks_after", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, "areas/inbox/task-old.html", mem{typ: "task", taskSts: "done", title: "Old",
				created: "2026-01-01T00:00:00Z", updated: "2026-02-01T00:00:00Z"}.html())
			return fixNow
		}, committed(PhaseArchive, "archived", 1)},
		{"new memory past its valid-until", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, "areas/inbox/expired-flag.html", mem{typ: "semantic", title: "Expired flag",
				created: "2026-01-01T00:00:00Z", validUntil: "2026-10-01T00:00:00Z"}.html())
			return fixNow
		}, committed(PhaseExpire, "archived", 1)},
		{"new episode brings a group to exactly min_episodes", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, "projects/shop/20250501-api-errors.html", mem{typ: "episodic", title: "API errors",
				entities: []string{"service:checkout-api"}, created: "2025-05-01T10:00:00Z"}.html())
			return fixNow
		}, committed(PhaseArcs, "created", 1)},
		{"changed episode of an arc", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, epNew1, strings.Replace(readFile(t, dir, epNew1), "<title>Checkout outage", "<title>Checkout down", 1))
			return fixNow
		}, committed(PhaseArcs, "updated", 1)},
		{"edited arc file", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			arc := memd.ArcPath(sanju, 2025)
			writeFile(t, dir, arc, strings.Replace(readFile(t, dir, arc), `name="memd-members" content="sha256:`, `name="memd-members" content="sha256:0`, 1))
			git(t, dir, "commit", "-q", "-am", "someone edits an arc") // so the re-render is a change
			return fixNow
		}, committed(PhaseArcs, "updated", 1)},
		{"new memory linking to an archived file", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, "resources/go/rollbacks.html", mem{typ: "semantic", title: "Rollbacks", links: []string{"/" + epOld1}}.html())
			return fixNow
		}, committed(PhaseTidy, "links", 1)},
		{"new file in the archive that a link now points at", func(t *testing.T, dir string, store Store, cfg *memd.Config) time.Time {
			// A memory linking to a path that does not exist: planned in full, nothing to do.
			writeFile(t, dir, "resources/go/pointer.html", mem{typ: "semantic", title: "Pointer", links: []string{"/resources/go/later.html"}}.html())
			if _, idle, delta := sleepDelta(t, dir, store, *cfg, fixNow, nil); idle || delta {
				t.Fatal("a link to a missing file was answered by a shortcut")
			}
			writeFile(t, dir, "archive/2025/resources/go/later.html", mem{typ: "semantic", title: "Later"}.html())
			return fixNow
		}, committed(PhaseTidy, "links", 1)},
		{"new non-memory file in the archive that a link now points at", func(t *testing.T, dir string, store Store, cfg *memd.Config) time.Time {
			writeFile(t, dir, "resources/go/pointer.html", mem{typ: "semantic", title: "Pointer", links: []string{"/resources/go/later.txt"}}.html())
			if _, idle, delta := sleepDelta(t, dir, store, *cfg, fixNow, nil); idle || delta {
				t.Fatal("a link to a missing file was answered by a shortcut")
			}
			writeFile(t, dir, "archive/2025/resources/go/later.txt", "later\n")
			return fixNow
		}, committed(PhaseTidy, "links", 1)},
		{"edited MEMORY.md", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, projectMD, "# shop\n\n## Active Warnings\n- cart is flaky\n\n## Notes\n- misc\n")
			return fixNow
		}, committed(PhaseTidy, "repaired", 1)},
		{"changed ledger", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			writeFile(t, dir, "memory.jsonl", readFile(t, dir, "memory.jsonl")+
				`{"id":"late","type":"note","role":"dev","text":"late","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-01-01T00:00:00Z"}}`+"\n")
			return fixNow
		}, committed(PhaseExpire, "drained", 1)},
		{"clock past the record's until", func(t *testing.T, dir string, _ Store, _ *memd.Config) time.Time {
			return fixNow.Add(time.Second) // h-exact expires at fixNow exactly
		}, committed(PhaseExpire, "drained", 1)},
		{"config arcs.min_episodes", func(t *testing.T, dir string, _ Store, cfg *memd.Config) time.Time {
			cfg.Arcs.MinEpisodes = 2
			return fixNow
		}, committed(PhaseArcs, "created", 1)},
		{"deleted arc member", func(t *testing.T, dir string, store Store, cfg *memd.Config) time.Time {
			fourMembers(t, dir, store, *cfg)
			if err := os.Remove(filepath.Join(dir, epNew1)); err != nil {
				t.Fatal(err)
			}
			return fixNow
		}, committed(PhaseArcs, "updated", 1)},
		{"undated episode retyped out of its arc", func(t *testing.T, dir string, store Store, cfg *memd.Config) time.Time {
			// An episode is one by type, whatever its name: one without a date prefix is a
			// member too, and when it stops being an episode the arc loses it.
			for i, d := range []string{"2026-03-01", "2026-04-01", "2026-05-01", "2026-06-01"} {
				writeFile(t, dir, fmt.Sprintf("areas/oncall/undated-%d.html", i), mem{typ: "episodic", title: "Undated " + d,
					entities: []string{"team:undated"}, event: d, created: "2026-11-20T10:00:00Z"}.html())
			}
			if rep, idle, delta := sleepDelta(t, dir, store, *cfg, fixNow, nil); idle || delta || phaseCounts(rep, PhaseArcs)["created"] != 1 {
				t.Fatal("undated episodes made no arc, or a shortcut answered")
			}
			sleepDelta(t, dir, store, *cfg, fixNow, nil) // records the idle run
			if _, idle, _ := sleepDelta(t, dir, store, *cfg, fixNow, nil); !idle {
				t.Fatal("not settled after the undated arc")
			}
			p := "areas/oncall/undated-0.html"
			writeFile(t, dir, p, strings.Replace(readFile(t, dir, p), `content="episodic"`, `content="semantic"`, 1))
			return fixNow
		}, committed(PhaseArcs, "updated", 1)},
		{"episode edited out of its arc", func(t *testing.T, dir string, store Store, cfg *memd.Config) time.Time {
			fourMembers(t, dir, store, *cfg)
			writeFile(t, dir, epNew1, strings.Replace(readFile(t, dir, epNew1), `<meta name="memhtml-entity" content="person:Sanju Rao">`+"\n", "", 1))
			return fixNow
		}, committed(PhaseArcs, "updated", 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, store := settledFixture(t)
			cfg := testConfig()
			now := tc.change(t, dir, store, &cfg)
			fact(t, dir, "unrelated")
			rep, idle, delta := sleepDelta(t, dir, store, cfg, now, nil)
			if idle || delta {
				t.Fatalf("a shortcut answered after the change (idle %v, delta %v)", idle, delta)
			}
			tc.want(t, rep)
		})
	}
}

// A file whose move was skipped (its archive destination exists) is reported in the
// record's results; once edited so it no longer expires, a full plan no longer reports
// it, and neither may the answer.
func TestDeltaPlanEditedReportedFile(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	dup := "areas/inbox/dup.html"
	expired := mem{typ: "semantic", title: "Dup", created: "2026-01-01T00:00:00Z", validUntil: "2026-10-01T00:00:00Z"}
	writeFile(t, dir, dup, expired.html())
	writeFile(t, dir, "archive/2026/"+dup, expired.html())
	rep, _, _ := sleepDelta(t, dir, store, cfg, fixNow, nil)
	if phaseCounts(rep, PhaseExpire)["skipped"] != 1 {
		t.Fatalf("expire: %v, want the move skipped", phaseCounts(rep, PhaseExpire))
	}
	if _, idle, _ := sleepDelta(t, dir, store, cfg, fixNow, nil); !idle {
		t.Fatal("not settled")
	}
	expired.validUntil = "2027-10-01T00:00:00Z"
	writeFile(t, dir, dup, expired.html())
	rep = planAgainstFull(t, "a file the record reports", dir, store, cfg, false)
	if phaseCounts(rep, PhaseExpire)["skipped"] != 0 {
		t.Fatalf("expire: %v, want nothing skipped", phaseCounts(rep, PhaseExpire))
	}
}

// MEMORY.md files are planned by tidy alone: an index bullet to an existing file and a new
// index are answered by the delta plan, exactly as a full plan reports; a bullet to an
// archived path (repointed) or a project MEMORY.md tidy reports on is planned in full.
func TestDeltaPlanMemoryMD(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	writeFile(t, dir, indexMD, readFile(t, dir, indexMD)+"- [["+taskOpen+"|Write docs]] \u00b7 type:task subject:shop \u00b7 docs\n")
	writeFile(t, dir, "areas/oncall/MEMORY.md", "# MEMORY\n\n- [["+epThis+"|Drill]] \u00b7 type:episodic subject:oncall \u00b7 drill\n")
	planAgainstFull(t, "index bullets to existing files", dir, store, cfg, true)

	t.Run("bullet to an archived path", func(t *testing.T) {
		writeFile(t, dir, indexMD, readFile(t, dir, indexMD)+"- [["+epOld2+"|Pager storm]] \u00b7 type:episodic subject:oncall \u00b7 storm\n")
		rep, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil)
		if idle || delta {
			t.Fatalf("a shortcut answered (idle %v, delta %v)", idle, delta)
		}
		if c := phaseCounts(rep, PhaseTidy); c["bullets"] != 1 || !strings.Contains(readFile(t, dir, indexMD), "archive/2024/"+epOld2) {
			t.Fatalf("tidy %v: the bullet was not repointed", c)
		}
	})
	t.Run("project MEMORY.md with a long bullet", func(t *testing.T) {
		sleepDelta(t, dir, store, cfg, fixNow, nil) // settle after the tidy commit
		writeFile(t, dir, projectMD, readFile(t, dir, projectMD)+"- "+strings.Repeat("very long ", 70)+"\n")
		rep := planAgainstFull(t, "a long bullet", dir, store, cfg, false)
		if c := phaseCounts(rep, PhaseTidy); c["long_bullets"] != 1 {
			t.Fatalf("tidy %v, want long_bullets=1", c)
		}
	})
}

// A record whose walk was taken within the racy window of an unchanged file proves
// nothing about that file's bytes: no delta plan from it.
func TestDeltaPlanRacyRecord(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	walk, err := walkTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	touched := time.Unix(0, idleKey(dir, walk, cfg).maxStamp) // the latest touch of a file it vouches for
	recPath := filepath.Join(dir, ".git", "memd", idleName)
	rec := readIdle(filepath.Dir(recPath))
	if rec == nil {
		t.Fatal("no idle record")
	}
	rec.Saved = touched.Add(time.Second).UnixNano() // a file touched 1s before that walk
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fact(t, dir, "a")
	if _, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, func(o *Options) { o.DryRun = true }); idle || delta {
		t.Fatalf("racy record: idle %v delta %v", idle, delta)
	}
	rec.Saved = touched.Add(3 * time.Second).UnixNano()
	if b, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); !delta {
		t.Fatal("a settled record: the delta plan did not answer")
	}
}

// A changed ledger is planned by expire's own ledger code: notes that drain nothing
// are answered with the ledger's new counts and items, exactly as a full plan reports.
func TestDeltaPlanLedger(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	// A memory file whose move expire skips: its item comes after the ledger's.
	dup := "areas/inbox/dup.html"
	expired := mem{typ: "semantic", title: "Dup", created: "2026-01-01T00:00:00Z", validUntil: "2026-10-01T00:00:00Z"}.html()
	writeFile(t, dir, dup, expired)
	writeFile(t, dir, "archive/2026/"+dup, expired)
	sleepDelta(t, dir, store, cfg, fixNow, nil)
	appendLedger := func(line string) {
		writeFile(t, dir, "memory.jsonl", readFile(t, dir, "memory.jsonl")+line+"\n")
	}
	for _, tc := range []struct{ name, line string }{
		{"live note", `{"id":"live","type":"note","role":"dev","text":"live","createdAt":"2026-11-29T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2027-01-01T00:00:00Z"}}`},
		{"stale note within the grace", `{"id":"s-new","type":"note","role":"dev","text":"soft","createdAt":"2026-11-01T00:00:00Z","lifecycle":{"mode":"soft-expiry","expiresAt":"2026-11-25T00:00:00Z"}}`},
		{"unparseable line", `{broken`},
		{"invalid expiry", `{"id":"bad","type":"note","role":"dev","text":"bad","createdAt":"2026-11-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"soon"}}`},
	} {
		appendLedger(tc.line)
		fact(t, dir, "f-"+strings.ReplaceAll(tc.name, " ", "-"))
		planAgainstFull(t, tc.name, dir, store, cfg, true)
	}
	if c := phaseCounts(fullPlanRep(t, dir, store, cfg), PhaseExpire); c["stale"] != 2 || c["unparseable"] != 2 || c["invalid"] != 1 || c["skipped"] != 1 {
		t.Fatalf("expire counts %v: the ledger's new lines are not all counted", c)
	}
}

func fullPlanRep(t *testing.T, dir string, store Store, cfg memd.Config) Report {
	t.Helper()
	return Report{Phases: fullPlan(t, dir, store, cfg, fixNow)}
}

// A note added to the ledger bounds the record a delta run leaves: past its expiry the
// next run plans in full and drains it.
func TestDeltaPlanLedgerThreshold(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "resources/go/gc.html", mem{typ: "semantic", title: "GC"}.html())
	writeFile(t, dir, "memory.jsonl", "")
	initRepo(t, dir)
	store := openStore(t, dir)
	cfg := testConfig()
	if _, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); idle || delta {
		t.Fatal("first run used a shortcut")
	}
	expires := fixNow.Add(time.Hour)
	writeFile(t, dir, "memory.jsonl", `{"id":"n","type":"note","role":"dev","text":"n","createdAt":"2026-11-29T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"`+expires.Format(time.RFC3339)+`"}}`+"\n")
	if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); !delta {
		t.Fatal("a live note: the delta plan did not answer")
	}
	fact(t, dir, "unrelated")
	if _, _, delta := sleepDelta(t, dir, store, cfg, expires, func(o *Options) { o.DryRun = true }); !delta {
		t.Fatal("at exactly its expiry the note is live (past is strict), but the delta plan did not answer")
	}
	rep, idle, delta := sleepDelta(t, dir, store, cfg, expires.Add(time.Nanosecond), nil)
	if idle || delta || rep.Counts["expired"] != 1 {
		t.Fatalf("past the new note's expiry: idle %v delta %v counts %v", idle, delta, rep.Counts)
	}
}

// An unchanged ledger vouches for its bytes only outside the racy window of the record's
// walk, like any file: here it is the only file touched late enough to matter.
func TestDeltaPlanRacyLedger(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "resources/go/gc.html", mem{typ: "semantic", title: "GC"}.html())
	writeFile(t, dir, "memory.jsonl", "")
	initRepo(t, dir)
	store := openStore(t, dir)
	cfg := testConfig()
	future := time.Now().Add(time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(dir, "memory.jsonl"), future, future); err != nil {
		t.Fatal(err)
	}
	wall := func() time.Time { return future.Add(time.Hour) }
	sleepDelta(t, dir, store, cfg, fixNow, func(o *Options) { o.wallNow = wall })
	recPath := filepath.Join(dir, ".git", "memd", idleName)
	rec := readIdle(filepath.Dir(recPath))
	if rec == nil {
		t.Fatal("no idle record")
	}
	for _, tc := range []struct {
		saved time.Time
		delta bool
	}{{future.Add(time.Second), false}, {future.Add(3 * time.Second), true}} {
		rec.Saved = tc.saved.UnixNano()
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(recPath, b, 0o600); err != nil {
			t.Fatal(err)
		}
		fact(t, dir, fmt.Sprint("f", tc.delta))
		if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, func(o *Options) { o.DryRun = true; o.wallNow = wall }); delta != tc.delta {
			t.Fatalf("record saved %v after the ledger's stamp: delta %v, want %v", tc.saved.Sub(future), delta, tc.delta)
		}
	}
}

// fourMembers gives Sanju's 2025 arc a fourth member and settles the tree: one member
// leaving still leaves an arc to rewrite.
func fourMembers(t *testing.T, dir string, store Store, cfg memd.Config) {
	t.Helper()
	writeFile(t, dir, "projects/shop/20251101-checkout-retro.html", mem{typ: "episodic", title: "Checkout retro",
		entities: []string{sanju}, created: "2025-11-01T10:00:00Z"}.html())
	if rep, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); idle || delta || phaseCounts(rep, PhaseArcs)["updated"] != 1 {
		t.Fatal("a fourth member was answered by a shortcut or not added to the arc")
	}
	sleepDelta(t, dir, store, cfg, fixNow, nil) // records the idle run
	if _, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); !idle || delta {
		t.Fatal("not settled after the fourth member")
	}
}

// The new files' own thresholds bound the record a delta run leaves: a new memory whose
// valid-until passes later than nothing else in the tree, then a day with only an
// unrelated write, at a clock past that memory's valid-until plus the grace.
func TestDeltaPlanNewFileThreshold(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "resources/go/gc.html", mem{typ: "semantic", title: "GC"}.html())
	writeFile(t, dir, "memory.jsonl", "")
	initRepo(t, dir)
	store := openStore(t, dir)
	cfg := testConfig()
	grace := cfg.Expire.SoftGrace.D()
	if _, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); idle || delta {
		t.Fatal("first run used a shortcut")
	}
	flag := "areas/inbox/trial.html"
	validUntil := fixNow.Add(24 * time.Hour)
	writeFile(t, dir, flag, mem{typ: "semantic", title: "Trial", created: "2026-11-01T00:00:00Z", validUntil: validUntil.Format(time.RFC3339)}.html())
	if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); !delta {
		t.Fatal("a memory valid for another day was not answered by the delta plan")
	}
	fact(t, dir, "unrelated")
	edge := validUntil.Add(grace)
	if _, _, delta := sleepDelta(t, dir, store, cfg, edge, func(o *Options) { o.DryRun = true }); !delta {
		t.Fatal("at exactly valid-until plus the grace nothing changes (past is strict), but the delta plan did not answer")
	}
	rep, idle, delta := sleepDelta(t, dir, store, cfg, edge.Add(time.Nanosecond), nil)
	if idle || delta {
		t.Fatal("past the new memory's valid-until plus the grace a shortcut answered")
	}
	if rep.Counts["archived"] != 1 || !exists(dir, "archive/2026/"+flag) {
		t.Fatalf("the expired memory was not archived: %v", rep.Counts)
	}
}

// A damaged or foreign walk record means a full plan, never a wrong answer.
func TestDeltaPlanDamagedWalk(t *testing.T) {
	dir, store := settledFixture(t)
	cfg := testConfig()
	walkFile := filepath.Join(dir, ".git", "memd", idleWalkName)
	good, err := os.ReadFile(walkFile)
	if err != nil {
		t.Fatal(err)
	}
	for i, bad := range [][]byte{good[:len(good)/2], good[:len(good)-1], append(slices.Clone(good), 0), []byte("nonsense")} {
		if err := os.WriteFile(walkFile, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		fact(t, dir, fmt.Sprint("f", i))
		if _, idle, delta := sleepDelta(t, dir, store, cfg, fixNow, func(o *Options) { o.DryRun = true }); idle || delta {
			t.Fatalf("damaged walk %d: idle %v delta %v", i, idle, delta)
		}
	}
	if err := os.WriteFile(walkFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, delta := sleepDelta(t, dir, store, cfg, fixNow, nil); !delta {
		t.Fatal("the good walk back: the delta plan did not answer")
	}
}

// walkCompare orders paths exactly as walkTree lists them, names that sort differently
// by byte and by directory ('-' and '.' before '/') included.
func TestWalkCompareMatchesWalk(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a-b", "a.b", "a/b", "a/a-b/c", "a/a/c", "a/a.b", "a/z", "b", "a-/x", "aa/b", "a0"} {
		writeFile(t, dir, p, "x")
	}
	tr, err := walkTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tr.files {
		got = append(got, f.rel)
	}
	if !slices.IsSortedFunc(got, walkCompare) {
		t.Fatalf("walk order is not walkCompare's: %v", got)
	}
	shuffled := slices.Clone(got)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, walkCompare)
	if !reflect.DeepEqual(shuffled, got) {
		t.Fatalf("sorted by walkCompare %v, walked %v", shuffled, got)
	}
}

// diffWalk finds exactly the memory files and MEMORY.md files added and changed wherever
// they sort in the walk (new directories before, between and after old ones, names that
// order differently by byte and by directory), and refuses any other difference.
func TestDiffWalk(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	old := []string{"areas/b/x.html", "areas/b-c/y.html", "areas/b/z/w.html", "projects/p/MEMORY.md", "projects/p/q.html", "notes.txt"}
	for _, p := range old {
		writeFile(t, dir, p, "old "+p)
	}
	t0, err := walkTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeIdleWalk(state, "k", t0, map[arcKey]int{{"e", 2026}: 2}); err != nil {
		t.Fatal(err)
	}
	diff := func() (added, changed []string, ok bool) {
		t.Helper()
		t1, err := walkTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		w := readIdleWalk(state, "k")
		if w == nil {
			t.Fatal("walk record not readable")
		}
		added, changed, _, ok = diffWalk(w, t1)
		if g, gok := w.groups(); ok && (!gok || g[arcKey{"e", 2026}] != 2) {
			t.Fatalf("groups %v %v", g, gok)
		}
		slices.Sort(added)
		slices.Sort(changed)
		return added, changed, ok
	}
	if a, c, ok := diff(); !ok || len(a)+len(c) != 0 {
		t.Fatalf("unchanged tree: added %v changed %v ok %v", a, c, ok)
	}
	if readIdleWalk(state, "other key") != nil {
		t.Fatal("a walk record was read for another record's key")
	}
	newFiles := []string{"areas/a/n.html", "areas/b-a/n.html", "areas/b/a.html", "areas/b/z/a/n.html", "areas/b/zz.html",
		"areas/c/n.html", "projects/p/MEMORY.md.d/n.html", "projects/r/MEMORY.md", "resources/n.html", "areas/b.html"}
	for _, p := range newFiles {
		writeFile(t, dir, p, "new "+p)
	}
	writeFile(t, dir, "areas/b-c/y.html", "edited, a longer file")
	writeFile(t, dir, "projects/p/MEMORY.md", "edited, a longer file")
	writeFile(t, dir, "notes.txt", "edited, a longer file") // only its existence is seen
	wantAdded := slices.Sorted(slices.Values(newFiles))
	a, c, ok := diff()
	if !ok || !reflect.DeepEqual(a, wantAdded) || !reflect.DeepEqual(c, []string{"areas/b-c/y.html", "projects/p/MEMORY.md"}) {
		t.Fatalf("added %v\nwant  %v\nchanged %v ok %v", a, wantAdded, c, ok)
	}
	add := func(p string) (func(), func()) {
		return func() { writeFile(t, dir, p, "x") }, func() { _ = os.Remove(filepath.Join(dir, p)) }
	}
	del := func(p string) (func(), func()) {
		return func() { _ = os.Remove(filepath.Join(dir, p)) }, func() { writeFile(t, dir, p, "back") }
	}
	type change struct {
		name     string
		do, undo func()
	}
	mk := func(name string, f func(string) (func(), func()), p string) change {
		do, undo := f(p)
		return change{name, do, undo}
	}
	for _, tc := range []change{
		mk("another kind of file added", add, "areas/b/new.txt"),
		mk("memory file deleted", del, "areas/b/z/w.html"),
		mk("non-memory file deleted", del, "notes.txt"),
		mk("file added after every other", add, "zzz/last.txt"),
	} {
		tc.do()
		if a, c, ok := diff(); ok {
			t.Fatalf("%s: accepted (added %v, changed %v)", tc.name, a, c)
		}
		tc.undo()
		if _, _, ok := diff(); !ok {
			t.Fatalf("%s, undone: refused", tc.name)
		}
	}
}
