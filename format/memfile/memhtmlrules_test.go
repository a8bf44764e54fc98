package memfile

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

// memhtml's entity sameness: NFC, lower case, white space folded (JavaScript's \s), both
// halves of a reference, padding around the colon gone.
func TestNormalizeEntityRef(t *testing.T) {
	for in, want := range map[string]string{
		"person:Alice Chen":          "person:alice chen",
		"person:ALICE  CHEN":         "person:alice chen",
		" Person : alice\u00a0chen ": "person:alice chen",
		"person:Cafe\u0301":          "person:caf\u00e9", // decomposed → NFC
		"service:checkout-api":       "service:checkout-api",
		"no colon Here":              "no colon here",
		"person:":                    "person:",
	} {
		if got := NormalizeEntityRef(in); got != want {
			t.Errorf("NormalizeEntityRef(%q) = %q, want %q", in, got, want)
		}
	}
}

const headDoc = "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>T</title>\n" +
	"<meta name=\"memhtml-type\" content=\"episodic\">\n<meta name=\"memhtml-status\" content=\"active\">\n" +
	"<meta name=\"memhtml-created\" content=\"2025-01-01\">\n<meta name=\"memhtml-updated\" content=\"2025-01-02\">\n" +
	"<meta name=\"memhtml-entity\" content=\"person:x\">\n</head>\n<body>\n<article>\n<p><mark>Claim.</mark> <time datetime=\"2025-01-01\">then</time></p>\n</article>\n</body>\n</html>\n"

// The head editors give the bytes memhtml's setMeta/addLink give: a replaced meta in place, a
// new one at its META_ORDER place, a link after the last meta (then after the last link),
// idempotent, the article untouched.
func TestHeadEditors(t *testing.T) {
	b := []byte(headDoc)
	got := string(ArchiveStamps(b, time.Date(2026, 12, 2, 3, 0, 0, 0, time.FixedZone("x", 3600))))
	want := strings.NewReplacer(
		`content="active"`, `content="archived"`,
		`<meta name="memhtml-updated" content="2025-01-02">`, `<meta name="memhtml-updated" content="2026-12-02T02:00:00Z">`,
		"<meta name=\"memhtml-entity\"", "<meta name=\"memhtml-archived\" content=\"2026-12-02T02:00:00Z\">\n<meta name=\"memhtml-entity\"",
	).Replace(headDoc)
	if got != want {
		t.Errorf("ArchiveStamps:\n%s\nwant\n%s", got, want)
	}
	linked := AddLink(b, "part_of", "/areas/arcs/x-2025.html")
	linked = AddLink(linked, "memhtml-about-person", "/resources/people/x.html")
	wantL := strings.Replace(headDoc, "content=\"person:x\">\n", "content=\"person:x\">\n<link rel=\"memhtml-part-of\" href=\"/areas/arcs/x-2025.html\">\n<link rel=\"memhtml-about-person\" href=\"/resources/people/x.html\">\n", 1)
	if string(linked) != wantL {
		t.Errorf("AddLink:\n%s", linked)
	}
	if again := AddLink(linked, "part_of", "/areas/arcs/x-2025.html"); !bytes.Equal(again, linked) {
		t.Error("AddLink is not idempotent")
	}
	m0, m1 := ParseBytes(b), ParseBytes(linked)
	if !m1.Valid() || m0.ComputedHash != m1.ComputedHash {
		t.Errorf("a head edit changed the article or broke the file: %v", m1.Violations)
	}
	if !SameButArchiveStamps(ArchiveStamps(b, time.Unix(0, 0)), ArchiveStamps(b, time.Unix(99999, 0))) || SameButArchiveStamps(b, linked) {
		t.Error("SameButArchiveStamps")
	}
	if got := SetMeta([]byte("no head here"), MetaStatus, "archived"); string(got) != "no head here" {
		t.Errorf("SetMeta on a file with no head: %q", got)
	}
}

// Which arcs are memd's: signed agent:memd, or (older memd) unsigned with the member hash. A
// curated arc or memhtml's own is a file like any other for the merge too.
func TestIsMemdArc(t *testing.T) {
	own := RenderArc(Arc{Entity: "person:x", Year: 2025, Episodes: []ArcEpisode{{Path: "areas/a.html", Date: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), Title: "A"}}})
	curated := strings.Replace(headDoc, `content="episodic"`, `content="arc"`, 1)
	sleepArc := strings.Replace(curated, "</head>", "<meta name=\"memhtml-author\" content=\"agent:sleep\">\n</head>", 1)
	legacy := strings.Replace(curated, "</head>", "<meta name=\"memd-members\" content=\"sha256:00\">\n</head>", 1)
	for _, c := range []struct {
		data []byte
		want bool
	}{{own, true}, {[]byte(curated), false}, {[]byte(sleepArc), false}, {[]byte(legacy), true}} {
		if got := IsMemdArc(ParseBytes(c.data)); got != c.want {
			t.Errorf("IsMemdArc = %v, want %v:\n%s", got, c.want, c.data)
		}
	}
	// What another writer added to memd's arc is carried by its rewrite.
	added := AddLink(SetMeta(own, MetaConfidence, "0.920"), "about_person", "/resources/people/x.html")
	re := RenderArc(Arc{Entity: "person:x", Year: 2025, Carry: ArcCarry(added), Episodes: []ArcEpisode{{Path: "areas/b.html", Date: time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC), Title: "B"}}})
	for _, want := range []string{`<meta name="memhtml-confidence" content="0.920">`, `<link rel="memhtml-about-person" href="/resources/people/x.html">`} {
		if !bytes.Contains(re, []byte(want)) {
			t.Errorf("the rewrite lacks %s:\n%s", want, re)
		}
	}
	if m := ParseBytes(re); !m.Valid() || len(m.Warnings) > 0 {
		t.Errorf("rewritten arc: %v %v", m.Violations, m.Warnings)
	}
}

// The inbox as memhtml's doctor counts it: tasks under areas/inbox/tasks/ are in the inbox.
func TestInboxDepth(t *testing.T) {
	task := ParseBytes([]byte(strings.Replace(strings.Replace(headDoc, `content="episodic"`, `content="task"`, 1), "</head>", "<meta name=\"memhtml-task-status\" content=\"todo\">\n</head>", 1)))
	ep := ParseBytes([]byte(headDoc))
	for _, c := range []struct {
		rel         string
		m           *Memory
		inbox, task bool
	}{
		{memd.InboxDir + "/a.html", ep, true, false},
		{memd.TaskInboxDir + "/t.html", task, true, true},
		{memd.TaskInboxDir + "/e.html", ep, true, false},
		{"projects/p/tasks/t.html", task, false, false},
		{memd.InboxDir + "/bad.html", ParseBytes([]byte("<p>x</p>")), false, false},
	} {
		if in, tk := InboxDepth(c.rel, c.m); in != c.inbox || tk != c.task {
			t.Errorf("InboxDepth(%s) = %v, %v; want %v, %v", c.rel, in, tk, c.inbox, c.task)
		}
	}
}
