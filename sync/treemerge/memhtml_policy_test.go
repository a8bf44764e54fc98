package treemerge

import (
	"bytes"
	"strconv"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memfile"
)

// The access sidecar merge: per-row maxima, so any order of merging gives one file, and a
// row one side lacks is kept byte for byte.
func TestMergeAccessState(t *testing.T) {
	row := func(p string, n, r int, score, at string) string {
		return `{"path":"` + p + `","accessCount":` + strconv.Itoa(n) + `,"reinforcementCount":` + strconv.Itoa(r) + `,"outcomeScore":` + score +
			`,"lastAccessedAt":"` + at + `","lastReinforcedAt":null,"updatedAt":"` + at + `"}`
	}
	a := []byte(row("areas/a.html", 7, 1, "0.5", "2026-11-01T00:00:00Z") + "\n" + row("areas/b.html", 2, 0, "0", "2026-11-03T00:00:00Z") + "\n")
	b := []byte(row("areas/b.html", 5, 3, "0.25", "2026-11-02T00:00:00Z") + "\n" + row("areas/c.html", 1, 0, "0", "2026-11-02T00:00:00Z") + "\n{broken\n")
	c := []byte(row("areas/a.html", 3, 4, "-0.1", "2026-11-05T00:00:00Z") + "\n")
	ab := MergeAccessState(a, b)
	want := row("areas/a.html", 7, 1, "0.5", "2026-11-01T00:00:00Z") + "\n" +
		`{"path":"areas/b.html","accessCount":5,"reinforcementCount":3,"outcomeScore":0,"lastAccessedAt":"2026-11-03T00:00:00Z","lastReinforcedAt":null,"updatedAt":"2026-11-03T00:00:00Z"}` + "\n" +
		row("areas/c.html", 1, 0, "0", "2026-11-02T00:00:00Z") + "\n{broken\n"
	if string(ab) != want {
		t.Errorf("merge:\n%s\nwant\n%s", ab, want)
	}
	if ba := MergeAccessState(b, a); !bytes.Equal(ab, ba) {
		t.Errorf("not commutative:\n%s\n%s", ab, ba)
	}
	if l, r := MergeAccessState(ab, c), MergeAccessState(a, MergeAccessState(b, c)); !bytes.Equal(l, r) {
		t.Errorf("not associative:\n%s\n%s", l, r)
	}
	if aa := MergeAccessState(a, a); !bytes.Equal(aa, a) {
		t.Errorf("not idempotent:\n%s", aa)
	}
	if k := (Policy{}).KindOf(AccessStatePath); k != KindAccessState {
		t.Errorf("KindOf(%s) = %v", AccessStatePath, k)
	}
}

// memd's arc is derived (theirs is dropped for a re-render); a curated arc is a file like any
// other for the merge (never dropped for theirs).
func TestArcKind(t *testing.T) {
	own := memfile.RenderArc(memfile.Arc{Entity: "person:x", Year: 2025, Episodes: []memfile.ArcEpisode{{Path: "areas/a.html", Date: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Title: "A"}}})
	curated := "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>T</title>\n" +
		"<meta name=\"memhtml-type\" content=\"arc\">\n<meta name=\"memhtml-status\" content=\"active\">\n" +
		"<meta name=\"memhtml-created\" content=\"2025-01-01\">\n<meta name=\"memhtml-updated\" content=\"2025-01-02\">\n" +
		"<meta name=\"memhtml-entity\" content=\"person:x\">\n</head>\n<body>\n<article>\n<p><mark>Claim.</mark> <time datetime=\"2025-01-01\">then</time></p>\n</article>\n</body>\n</html>\n"
	if memfile.IsMemdArc(memfile.ParseBytes([]byte(curated))) {
		t.Fatal("the curated arc reads as memd's")
	}
	p := Policy{}
	if k := p.KindOf(memd.ArcsDir+"/x-2025.html", own, own); k != KindDerived {
		t.Errorf("memd's arc: %v", k)
	}
	if k := p.KindOf(memd.ArcsDir+"/x-2025.html", own, []byte(curated)); k != KindOther {
		t.Errorf("a curated arc: %v, want other (never dropped for theirs)", k)
	}
}
