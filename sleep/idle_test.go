package sleep

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

// later is the racy rule's wall clock for a tree that settled long ago: every file is an
// hour older than the walk. Changes a test makes after that are still seen by their stat
// (size, mtime, ctime, inode), which is what these tests prove.
func later() time.Time { return time.Now().Add(time.Hour) }

// sleepAt runs all phases at now with the given wall clock and reports whether the idle
// record answered. It fails the test if the run errors.
func sleepAt(t *testing.T, dir string, store Store, cfg memd.Config, now time.Time, wall func() time.Time, mutate func(*Options)) (Report, bool) {
	t.Helper()
	opts := Options{Config: cfg, Now: func() time.Time { return now }, NoGC: true, wallNow: wall}
	if mutate != nil {
		mutate(&opts)
	}
	r := NewRunner(dir, store, opts)
	rep, err := r.Run(context.Background(), RunID(now)+"-"+now.Format("150405.000000000"))
	if err != nil {
		t.Fatalf("sleep run: %v", err)
	}
	if rep.Failed() {
		t.Fatalf("sleep run failed: %+v", rep)
	}
	return rep, r.idleHit
}

// settledFixture is the fixture after its full run, then an idle run that recorded the
// idle fingerprint; the next identical run is answered by the record.
func settledFixture(t *testing.T) (string, Store) {
	t.Helper()
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	h := head(t, dir)
	if _, hit := sleepAt(t, dir, store, testConfig(), fixNow, later, nil); hit {
		t.Fatal("the first idle run after the full run was answered by a record")
	}
	if !exists(dir, ".git/memd/"+idleName) {
		t.Fatal("an all-empty run on a settled tree wrote no idle record")
	}
	if head(t, dir) != h {
		t.Fatal("the idle run committed")
	}
	return dir, store
}

func phaseView(rep Report) []PhaseResult {
	var out []PhaseResult
	for _, p := range rep.Phases {
		out = append(out, PhaseResult{Name: p.Name, Counts: p.Counts, Items: p.Items, Commit: p.Commit, Skipped: p.Skipped})
	}
	return out
}

// An idle run answered by the record reports exactly what planning reports (counts, the
// stale notes and other report items), commits nothing and changes nothing.
func TestIdleRecordAnswersUnchangedTree(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	planned, hit := sleepAt(t, dir, store, testConfig(), fixNow, later, nil)
	if hit {
		t.Fatal("first idle run used a record")
	}
	h, digest := head(t, dir), treeDigest(t, dir)
	replayed, hit := sleepAt(t, dir, store, testConfig(), fixNow, later, nil)
	if !hit {
		t.Fatal("an unchanged tree at the same clock was planned again")
	}
	if !reflect.DeepEqual(phaseView(planned), phaseView(replayed)) {
		t.Fatalf("replayed results differ:\nplanned  %+v\nreplayed %+v", phaseView(planned), phaseView(replayed))
	}
	if !reflect.DeepEqual(planned.Counts, replayed.Counts) || planned.Counts["stale"] == 0 {
		t.Fatalf("run counts: planned %v, replayed %v (the fixture has a stale note)", planned.Counts, replayed.Counts)
	}
	if head(t, dir) != h || treeDigest(t, dir) != digest {
		t.Fatal("an idle run changed the repo")
	}
	st, err := ReadState(filepath.Join(dir, ".git", "memd"))
	if err != nil || len(st.Phases) != 4 {
		t.Fatalf("an answered run still records its phases as done: %+v, %v", st, err)
	}
	// A dry run reads the record too and writes nothing.
	dry, hit := sleepAt(t, dir, store, testConfig(), fixNow, later, func(o *Options) { o.DryRun = true })
	if !hit || !reflect.DeepEqual(phaseView(planned), phaseView(dry)) {
		t.Fatalf("dry run: hit %v, %+v", hit, phaseView(dry))
	}
	// A dry run that plans for real records nothing either.
	if err := os.Remove(filepath.Join(dir, ".git", "memd", idleName)); err != nil {
		t.Fatal(err)
	}
	if _, hit := sleepAt(t, dir, store, testConfig(), fixNow, later, func(o *Options) { o.DryRun = true }); hit || exists(dir, ".git/memd/"+idleName) {
		t.Fatalf("dry run without a record: hit %v, record written %v", hit, exists(dir, ".git/memd/"+idleName))
	}
}

// Each change the planners could see makes the next run plan for real, and the change is
// acted on.
func TestIdleRecordInvalidation(t *testing.T) {
	type check func(t *testing.T, dir string, rep Report)
	committed := func(phase, key string, n int) check {
		return func(t *testing.T, _ string, rep Report) { wantCommitted(t, rep, phase, key, n) }
	}
	cases := []struct {
		name   string
		change func(t *testing.T, dir string, cfg *memd.Config) time.Time // returns the clock
		want   check
	}{
		{"same-size edit with the mtime put back", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			p := filepath.Join(dir, taskOpen)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			old := readFile(t, dir, taskOpen)
			edited := strings.Replace(old, `content="active"`, `content="archived"`, 1)
			edited = strings.Replace(edited, "Write docs happened", "Write docs happen", 1)
			if len(edited) != len(old) || edited == old {
				t.Fatalf("edit: %d vs %d bytes", len(edited), len(old))
			}
			writeFile(t, dir, taskOpen, edited)
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			return fixNow
		}, committed(PhaseArchive, "archived", 1)},
		{"added memory file", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			writeFile(t, dir, "areas/oncall/20230101-new-year.html", mem{typ: "episodic", title: "New year", created: "2023-01-01T00:00:00Z"}.html())
			return fixNow
		}, committed(PhaseArchive, "archived", 1)},
		{"added non-memory file", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			writeFile(t, dir, "areas/inbox/readme.txt", "hello\n")
			return fixNow
		}, nil},
		{"removed memory file", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			if err := os.Remove(filepath.Join(dir, taskOpen)); err != nil {
				t.Fatal(err)
			}
			return fixNow
		}, nil},
		{"ledger appended", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			writeFile(t, dir, "memory.jsonl", readFile(t, dir, "memory.jsonl")+
				`{"id":"late","type":"note","role":"dev","text":"late","createdAt":"2025-01-01T00:00:00Z","lifecycle":{"mode":"hard-expiry","expiresAt":"2026-01-01T00:00:00Z"}}`+"\n")
			return fixNow
		}, committed(PhaseExpire, "drained", 1)},
		{"MEMORY.md edited", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			writeFile(t, dir, projectMD, "# shop\n\n## Active Warnings\n- cart is flaky\n\n## Notes\n- misc\n")
			return fixNow
		}, committed(PhaseTidy, "repaired", 1)},
		{"config arcs.min_episodes", func(t *testing.T, dir string, cfg *memd.Config) time.Time {
			cfg.Arcs.MinEpisodes = 2
			return fixNow
		}, committed(PhaseArcs, "created", 1)},
		{"config expire.soft_grace", func(t *testing.T, dir string, cfg *memd.Config) time.Time {
			cfg.Expire.SoftGrace = memd.Duration(24 * time.Hour) // s-grace expired 2026-11-20
			return fixNow
		}, committed(PhaseExpire, "drained", 1)},
		{"clock past a note's expiry", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			return fixNow.Add(time.Second) // h-exact expires at fixNow exactly
		}, committed(PhaseExpire, "drained", 1)},
		{"clock before the record", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			return fixNow.Add(-time.Hour)
		}, nil},
		{"HEAD moved", func(t *testing.T, dir string, _ *memd.Config) time.Time {
			git(t, dir, "commit", "-q", "--allow-empty", "-m", "someone else")
			return fixNow
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir, store := settledFixture(t)
			cfg := testConfig()
			now := tc.change(t, dir, &cfg)
			h := head(t, dir)
			rep, hit := sleepAt(t, dir, store, cfg, now, later, nil)
			if hit {
				t.Fatal("the idle record answered after the change")
			}
			if tc.want != nil {
				tc.want(t, dir, rep)
			} else if len(commitsSince(t, dir, h)) != 0 {
				t.Fatalf("unexpected commits: %v", commitsSince(t, dir, h))
			}
			// The run that planned for real leaves a record (or none) for the tree it left;
			// a record never outlives the change.
			if _, hit := sleepAt(t, dir, store, cfg, now, later, nil); tc.want != nil && hit {
				t.Fatal("the run after a committing run was answered by a record")
			}
		})
	}
}

// A tree where only the year rule and a done task's age depend on the clock: the record
// holds inside the year and before the task ages, and not a nanosecond after either.
func TestIdleRecordClockBoundaries(t *testing.T) {
	dir := t.TempDir()
	episode := "areas/oncall/20250601-summer.html"
	task := "projects/shop/tasks/ship.html"
	writeFile(t, dir, episode, mem{typ: "episodic", title: "Summer", created: "2025-06-01T00:00:00Z"}.html())
	writeFile(t, dir, task, mem{typ: "task", taskSts: "done", title: "Ship", created: "2026-11-01T00:00:00Z", updated: "2026-12-01T12:00:00Z"}.html())
	initRepo(t, dir)
	store := openStore(t, dir)
	cfg := testConfig()
	cfg.Archive.DoneTasksAfter = memd.Duration(30 * 24 * time.Hour) // the task ages at 2026-12-31T12:00Z
	ages := time.Date(2026, 12, 31, 12, 0, 0, 0, time.UTC)
	from := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

	if _, hit := sleepAt(t, dir, store, cfg, from, later, nil); hit {
		t.Fatal("first run used a record")
	}
	if _, hit := sleepAt(t, dir, store, cfg, ages, later, nil); !hit {
		t.Fatal("at exactly the task's age limit nothing changes (past is strict), but the record did not hold")
	}
	if _, hit := sleepAt(t, dir, store, cfg, ages.Add(time.Nanosecond), later, func(o *Options) { o.DryRun = true }); hit {
		t.Fatal("a nanosecond past the task's age limit the record still held")
	}
	// The same instant as before, seen from UTC+5, is already 2027 there: keep_years turns.
	east := time.FixedZone("UTC+5", 5*3600)
	newYear := time.Date(2026, 12, 31, 20, 0, 0, 0, time.UTC).In(east)
	cfg.Archive.DoneTasksAfter = memd.Duration(365 * 24 * time.Hour) // take the task out of it
	if _, hit := sleepAt(t, dir, store, cfg, from, later, nil); hit {
		t.Fatal("changed config used the record")
	}
	if _, hit := sleepAt(t, dir, store, cfg, time.Date(2026, 12, 31, 18, 59, 0, 0, time.UTC).In(east), later, nil); !hit {
		t.Fatal("still 2026 in UTC+5: the record should hold")
	}
	rep, hit := sleepAt(t, dir, store, cfg, newYear, later, nil)
	if hit {
		t.Fatal("the record held across the year boundary of the clock's zone")
	}
	if rep.Counts["archived"] != 1 || !exists(dir, "archive/2025/"+episode) {
		t.Fatalf("the 2025 episode was not archived in 2027: %v", rep.Counts)
	}
}

// Files touched within the racy window of the walk prove nothing by their stat: no
// record is written, so a same-tick rewrite cannot hide.
func TestIdleRecordRacy(t *testing.T) {
	dir, store := settledFixture(t)
	writeFile(t, dir, taskOpen, readFile(t, dir, taskOpen)) // same bytes, fresh mtime/ctime
	fi, err := os.Stat(filepath.Join(dir, taskOpen))
	if err != nil {
		t.Fatal(err)
	}
	touched := fi.ModTime()
	soon := func() time.Time { return touched.Add(time.Second) }
	if _, hit := sleepAt(t, dir, store, testConfig(), fixNow, soon, nil); hit {
		t.Fatal("a changed tree was answered by the record")
	}
	if exists(dir, ".git/memd/"+idleName) {
		t.Fatal("a walk within the racy window of a write recorded an idle fingerprint")
	}
	if _, hit := sleepAt(t, dir, store, testConfig(), fixNow, soon, nil); hit {
		t.Fatal("racy tree answered by a record")
	}
	settled := func() time.Time { return touched.Add(3 * time.Second) }
	if _, hit := sleepAt(t, dir, store, testConfig(), fixNow, settled, nil); hit {
		t.Fatal("no record should exist yet")
	}
	if _, hit := sleepAt(t, dir, store, testConfig(), fixNow, settled, nil); !hit {
		t.Fatal("once the tree settled, the record was not used")
	}
	// A record is checked against the racy rule when read too.
	in := idleInputs{key: "k", ok: true, maxStamp: touched.UnixNano()}
	rec := &idleRecord{Version: idleVersion, Key: "k", Saved: touched.Add(time.Second).UnixNano(), From: fixNow, Year: fixNow.Year()}
	if rec.holds(in, fixNow, nil) {
		t.Fatal("a record saved within the racy window of a file's stamp holds")
	}
	if rec.Saved = touched.Add(3 * time.Second).UnixNano(); !rec.holds(in, fixNow, nil) {
		t.Fatal("a settled record does not hold")
	}
}

// A planner reading a file the fingerprint does not cover (here: through a symlink) makes
// the run record nothing.
func TestSnapshotReadOutsideFingerprint(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "areas/x/20260101-a.html", mem{typ: "episodic", created: "2026-01-01T00:00:00Z"}.html())
	writeFile(t, dir, "memory.jsonl", "")
	if err := os.Symlink("20260101-a.html", filepath.Join(dir, "areas/x/20260102-b.html")); err != nil {
		t.Fatal(err)
	}
	s, err := loadSnapshot(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.ledger = "memory.jsonl"
	for _, p := range []string{"memory.jsonl", "areas/x/20260101-a.html"} {
		if _, _, err := s.read(p); err != nil || s.uncovered {
			t.Fatalf("read %s: %v, uncovered %v", p, err, s.uncovered)
		}
	}
	if _, found, err := s.read("areas/x/20260102-b.html"); err != nil || !found || !s.uncovered {
		t.Fatalf("read through a symlink: found %v, err %v, uncovered %v", found, err, s.uncovered)
	}
}

// wantCommitted fails unless the run committed phase with counts[key] == n.
func wantCommitted(t *testing.T, rep Report, phase, key string, n int) {
	t.Helper()
	for _, p := range rep.Phases {
		if p.Name == phase {
			if p.Commit == "" || p.Counts[key] != n {
				t.Fatalf("%s: commit %q counts %v, want %s=%d", phase, p.Commit, p.Counts, key, n)
			}
			return
		}
	}
	t.Fatalf("no %s phase", phase)
}
