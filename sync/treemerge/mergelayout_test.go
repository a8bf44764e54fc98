package treemerge

import (
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/format/memorymd"
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
	p := Policy{MemoryMDAt: func(md string) [][]byte { return mds[md] }}
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
	if got := (Policy{}).KindOf("proj/history.md"); got != KindOther {
		t.Errorf("without the tree lookup a topic file is %v, want other", got)
	}
}

func TestMergeProjectLayoutNewer(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 7, 0, 0, 0, time.UTC)
	older := Policy{OursTime: t0, TheirsTime: t0.Add(time.Minute)}
	newer := Policy{OursTime: t0.Add(time.Minute), TheirsTime: t0}
	tie := Policy{OursTime: t0, TheirsTime: t0}
	for _, c := range []struct {
		pol  Policy
		want string
	}{{older, "theirs"}, {newer, "ours"}, {tie, "theirs"}} {
		got, _, err := c.pol.MergeProjectLayout(KindNewer, "p/"+memorymd.FailedReplyName, []byte("base"), []byte("ours"), []byte("theirs"))
		if err != nil || string(got) != c.want {
			t.Errorf("ours at %v, theirs at %v: %q %v, want %s", c.pol.OursTime, c.pol.TheirsTime, got, err, c.want)
		}
	}
}

func TestMergeProjectLayoutOverCapNote(t *testing.T) {
	base := strings.Replace(layoutMD, "- fact a\n", strings.Repeat("- fact\n", 190), 1)
	side := func(who string) []byte {
		return []byte(strings.Replace(base, "- rule one\n", "- rule one\n"+strings.Repeat("- rule from "+who+"\n", 6), 1))
	}
	got, note, err := Policy{}.MergeProjectLayout(KindProjectMD, "proj/MEMORY.md", []byte(base), side("a"), side("b"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "\n"); n != strings.Count(base, "\n")+12 {
		t.Errorf("%d lines, want base + 12", n)
	}
	if !strings.Contains(note, "merged proj/MEMORY.md is over the cap") || !strings.Contains(note, "not cut") {
		t.Errorf("note %q", note)
	}
	if _, note, _ := (Policy{}).MergeProjectLayout(KindProjectMD, "proj/MEMORY.md", []byte(layoutMD),
		[]byte(layoutMD+"- more\n"), []byte(strings.Replace(layoutMD, "- fact a\n", "- fact b\n", 1))); note != "" {
		t.Errorf("note under the cap: %q", note)
	}
}
