package sync

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

const layoutMD = "# proj\n\n## CRITICAL RULES\n\n- rule one\n\n## Architecture & Config Facts\n\n- fact a\n\n" +
	"## Active Warnings\n\n- None yet.\n\n## Topic Files\n\n- `history.md`.\n"

func TestKindOfProjectLayout(t *testing.T) {
	idx := []byte("# MEMORY\n- [[areas/a.html|A]] · type:semantic subject:x · d\n")
	mds := map[string][][]byte{
		"proj/MEMORY.md":     {[]byte(layoutMD), []byte(layoutMD)},
		"half/MEMORY.md":     {nil, []byte(layoutMD)}, // project-kind on one side only
		"MEMORY.md":          {idx, idx},
		"projects/MEMORY.md": {[]byte("## Notes\n")},
	}
	p := MergePolicy{memoryMDAt: func(md string) [][]byte { return mds[md] }}
	cases := []struct {
		path string
		want FileKind
	}{
		{"proj/history.md", KindTopicFile},
		{"proj/conventions.md", KindTopicFile},
		{"half/history.md", KindTopicFile},
		{"proj/notes.txt", KindOther},
		{"proj/sub/history.md", KindOther}, // no MEMORY.md in its own directory
		{"history.md", KindOther},          // beside an index-kind MEMORY.md
		{"projects/history.md", KindOther}, // beside a MEMORY.md of neither kind
		{"proj/MEMORY.pre-migration.md", KindNewer},
		{"proj/memory-save.failed-reply.txt", KindNewer},
		{"other/MEMORY.pre-migration.md", KindNewer},
	}
	for _, c := range cases {
		if got := p.KindOf(c.path); got != c.want {
			t.Errorf("KindOf(%q) = %v, want %v", c.path, got, c.want)
		}
	}
	if got := (MergePolicy{}).KindOf("proj/history.md"); got != KindOther {
		t.Errorf("without the tree lookup a topic file is %v, want other", got)
	}
}

func TestMergeProjectLayoutNewer(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	older := MergePolicy{OursTime: t0, TheirsTime: t0.Add(time.Minute)}
	newer := MergePolicy{OursTime: t0.Add(time.Minute), TheirsTime: t0}
	tie := MergePolicy{OursTime: t0, TheirsTime: t0}
	for _, c := range []struct {
		pol  MergePolicy
		want string
	}{{older, "theirs"}, {newer, "ours"}, {tie, "theirs"}} {
		got, _, err := c.pol.MergeProjectLayout(KindNewer, "p/"+FailedReplyNameForTest, []byte("base"), []byte("ours"), []byte("theirs"))
		if err != nil || string(got) != c.want {
			t.Errorf("ours at %v, theirs at %v: %q %v, want %s", c.pol.OursTime, c.pol.TheirsTime, got, err, c.want)
		}
	}
}

const FailedReplyNameForTest = "memory-save.failed-reply.txt"

// Two machines edit one project memory and its history.md: the sync merges both files by
// structure, no conflict copy, every addition once on both clones and the remote.
func TestSyncProjectMemoryMerges(t *testing.T) {
	hist := "# proj: history\n\n- day one\n"
	w := newSyncWorld(t, map[string]string{"proj/MEMORY.md": layoutMD, "proj/history.md": hist,
		"proj/" + FailedReplyNameForTest: "reply 0\n"})
	writeFile(t, w.aDir, "proj/MEMORY.md", strings.Replace(layoutMD, "- fact a\n", "- fact a\n- fact from A\n", 1))
	writeFile(t, w.aDir, "proj/history.md", hist+"\n- A appended\n")
	writeFile(t, w.aDir, "proj/"+FailedReplyNameForTest, "reply A\n")
	mustCommit(t, w.a, "proj")
	writeFile(t, w.bDir, "proj/MEMORY.md", strings.Replace(strings.Replace(layoutMD, "- fact a\n", "- fact a\n- fact from B\n", 1),
		"- rule one\n", "- rule one\n- rule from B\n", 1))
	writeFile(t, w.bDir, "proj/history.md", hist+"\n- B appended\n")
	writeFile(t, w.bDir, "proj/"+FailedReplyNameForTest, "reply B\n")
	mustCommit(t, w.b, "proj")
	_, rb := w.syncAll(t)
	if !rb.Merged || len(rb.Conflicts) != 0 {
		t.Fatalf("merged %v, conflicts %v", rb.Merged, rb.Conflicts)
	}
	w.check(t)
	wantMD := strings.Replace(strings.Replace(layoutMD, "- fact a\n", "- fact a\n- fact from B\n- fact from A\n", 1),
		"- rule one\n", "- rule one\n- rule from B\n", 1)
	for _, d := range []string{w.aDir, w.bDir} {
		if got := readWork(t, d, "proj/MEMORY.md"); got != wantMD {
			t.Errorf("%s: MEMORY.md\n%s\nwant\n%s", d, got, wantMD)
		}
		if got, want := readWork(t, d, "proj/history.md"), hist+"\n- B appended\n\n- A appended\n"; got != want {
			t.Errorf("%s: history.md %q, want %q", d, got, want)
		}
		// Same commit time on both sides (one test clock): theirs, A's pushed reply, stays.
		if got := readWork(t, d, "proj/"+FailedReplyNameForTest); got != "reply A\n" {
			t.Errorf("%s: failed reply %q", d, got)
		}
		if cc := conflictCopies(t, d); len(cc) != 0 {
			t.Errorf("%s: conflict copies %v", d, cc)
		}
	}
}

// A version the structured merge cannot read (not UTF-8, a topic file over the size
// limit) falls back to a conflict copy: both versions are kept, the log names the file.
func TestSyncProjectMemoryBadInputConflictCopy(t *testing.T) {
	hist := "# proj: history\n\n- day one\n"
	w := newSyncWorld(t, map[string]string{"proj/MEMORY.md": layoutMD, "proj/history.md": hist})
	var logs bytes.Buffer
	bOpts := hostOptions("hostb")
	bOpts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	w.b.Close()
	w.b = openTest(t, w.bDir, bOpts)
	latin1 := strings.Replace(layoutMD, "- fact a\n", "- caf\xe9 from A\n", 1)
	big := hist + strings.Repeat("- a long history line, written many times over\n", 5<<20/48)
	writeFile(t, w.aDir, "proj/MEMORY.md", latin1)
	writeFile(t, w.aDir, "proj/history.md", big)
	mustCommit(t, w.a, "proj")
	writeFile(t, w.bDir, "proj/MEMORY.md", strings.Replace(layoutMD, "- fact a\n", "- fact a\n- from B\n", 1))
	writeFile(t, w.bDir, "proj/history.md", hist+"- B\n")
	mustCommit(t, w.b, "proj")
	_, rb := w.syncAll(t)
	want := []string{"proj/MEMORY.conflict-hostb-20261130T143205Z.md", "proj/history.conflict-hostb-20261130T143205Z.md"}
	if strings.Join(rb.Conflicts, ",") != strings.Join(want, ",") {
		t.Fatalf("conflicts %v, want %v", rb.Conflicts, want)
	}
	w.check(t)
	for _, name := range []string{"merge proj/MEMORY.md: cannot merge by structure: theirs version is not valid UTF-8",
		"merge proj/history.md: cannot merge by structure: theirs version is 5"} {
		if !strings.Contains(logs.String(), name) {
			t.Errorf("log does not say %q:\n%s", name, logs.String())
		}
	}
	for _, d := range []string{w.aDir, w.bDir} {
		if readWork(t, d, "proj/MEMORY.md") != latin1 || readWork(t, d, "proj/history.md") != big {
			t.Errorf("%s: theirs (A's) versions not at the paths", d)
		}
		if !strings.Contains(readWork(t, d, want[0]), "- from B\n") || readWork(t, d, want[1]) != hist+"- B\n" {
			t.Errorf("%s: ours (B's) versions not in the conflict copies", d)
		}
	}
}

// A merged MEMORY.md over the hard cap is written whole and reported (the note the tree
// merge logs), never cut.
func TestMergeProjectLayoutOverCapNote(t *testing.T) {
	base := strings.Replace(layoutMD, "- fact a\n", strings.Repeat("- fact\n", 190), 1)
	side := func(who string) []byte {
		return []byte(strings.Replace(base, "- rule one\n", "- rule one\n"+strings.Repeat("- rule from "+who+"\n", 6), 1))
	}
	got, note, err := MergePolicy{}.MergeProjectLayout(KindProjectMD, "proj/MEMORY.md", []byte(base), side("a"), side("b"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "\n"); n != strings.Count(base, "\n")+12 {
		t.Errorf("%d lines, want base + 12", n)
	}
	if !strings.Contains(note, "merged proj/MEMORY.md is over the cap") || !strings.Contains(note, "not cut") {
		t.Errorf("note %q", note)
	}
	if _, note, _ := (MergePolicy{}).MergeProjectLayout(KindProjectMD, "proj/MEMORY.md", []byte(layoutMD),
		[]byte(layoutMD+"- more\n"), []byte(strings.Replace(layoutMD, "- fact a\n", "- fact b\n", 1))); note != "" {
		t.Errorf("note under the cap: %q", note)
	}
}
