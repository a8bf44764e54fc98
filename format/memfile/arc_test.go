package memfile

import (
	"bytes"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

func day(y, m, d int) time.Time { return time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC) }

func sampleArc() Arc {
	return Arc{
		Entity: "person:Sanju Rao",
		Year:   2024,
		Episodes: []ArcEpisode{
			{Path: "areas/inbox/20240506-retro.html", Date: day(2024, 5, 6), Title: "Retro <with> Sanju", Gist: "Agreed to drain & revert."},
			{Path: "projects/checkout/20240102-kickoff.html", Date: day(2024, 1, 2), Title: "Kickoff", Gist: "Sanju owns the rollout."},
			{Path: "projects/checkout/20240301-incident.html", Date: day(2024, 3, 1), Title: "Sev2 \"checkout\"", Gist: ""},
			{Path: "areas/inbox/20240301-a-same-day.html", Date: day(2024, 3, 1), Title: "", Gist: "Same day, sorts by path."},
		},
	}
}

func TestArcPath(t *testing.T) {
	if p := ArcPath("person:Sanju Rao", 2024); p != "areas/arcs/person-sanju-rao-2024.html" {
		t.Fatalf("ArcPath = %q", p)
	}
	a, b := ArcPath("日本", 2024), ArcPath("中国", 2024)
	if a == b || !memd.ValidMemoryPath(a) || !strings.HasPrefix(a, memd.ArcsDir+"/entity-") {
		t.Fatalf("unsluggable entities: %q %q", a, b)
	}
}

func TestRenderArcValid(t *testing.T) {
	a := sampleArc()
	out := RenderArc(a)
	m := ParseBytes(out)
	if !m.Valid() {
		t.Fatalf("violations %q in\n%s", m.Violations, out)
	}
	if m.Type != "arc" || m.Status != "active" || m.Created != "2024-01-02" || m.Updated != "2024-05-06" {
		t.Errorf("head %+v", m)
	}
	if m.Title != "person:Sanju Rao in 2024" {
		t.Errorf("title %q", m.Title)
	}
	if m.Gist != "person:Sanju Rao in 2024: 4 episodes, 2024-01-02 to 2024-05-06." {
		t.Errorf("gist %q", m.Gist)
	}
	if len(m.Entities) != 1 || m.Entities[0] != "person:Sanju Rao" {
		t.Errorf("entities %q", m.Entities)
	}
	if m.Meta(MetaMembers) != ArcMemberHash(a.Episodes) {
		t.Errorf("members meta %q", m.Meta(MetaMembers))
	}
	if m.ContentHash != m.ComputedHash {
		t.Errorf("content hash %s, computed %s", m.ContentHash, m.ComputedHash)
	}
	if m.Year(ArcPath(a.Entity, a.Year)) != 2024 {
		t.Errorf("year %d", m.Year(ArcPath(a.Entity, a.Year)))
	}
	// Members linked in date-then-path order.
	want := []string{
		"/projects/checkout/20240102-kickoff.html",
		"/areas/inbox/20240301-a-same-day.html",
		"/projects/checkout/20240301-incident.html",
		"/areas/inbox/20240506-retro.html",
	}
	// No head links (memhtml's rel vocabulary is closed): the members are the article's <a href>s.
	if len(m.Links) != 0 || len(m.Warnings) != 0 {
		t.Errorf("links %v, warnings %q", m.Links, m.Warnings)
	}
	var got []string
	for _, sub := range regexp.MustCompile(`<a href="([^"]*)"`).FindAllStringSubmatch(string(out), -1) {
		got = append(got, sub[1])
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("member links %q, want %q", got, want)
	}
	s := string(out)
	for _, frag := range []string{
		`<li><time datetime="2024-01-02">2024-01-02</time> <a href="/projects/checkout/20240102-kickoff.html">Kickoff</a>: Sanju owns the rollout.</li>`,
		`<a href="/areas/inbox/20240506-retro.html">Retro &lt;with&gt; Sanju</a>: Agreed to drain &amp; revert.</li>`,
		`<a href="/projects/checkout/20240301-incident.html">Sev2 &#34;checkout&#34;</a></li>`,
		`<a href="/areas/inbox/20240301-a-same-day.html">20240301-a-same-day.html</a>`,
		"</ol>\n<section>\n<p>person:Sanju Rao appears in 4 episodic memories of 2024",
	} {
		if !strings.Contains(s, frag) {
			t.Errorf("missing %q in\n%s", frag, s)
		}
	}
	if strings.Contains(s, "<h2") || strings.Contains(s, "<link") {
		t.Errorf("a heading or head link memhtml refuses or warns about:\n%s", s)
	}
	if strings.Index(s, "<ol>") > strings.Index(s, "<section>") {
		t.Errorf("list after summary")
	}
}

func TestRenderArcDeterministic(t *testing.T) {
	a := sampleArc()
	first := RenderArc(a)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20; i++ {
		b := a
		b.Episodes = append([]ArcEpisode(nil), a.Episodes...)
		r.Shuffle(len(b.Episodes), func(i, j int) { b.Episodes[i], b.Episodes[j] = b.Episodes[j], b.Episodes[i] })
		if out := RenderArc(b); !bytes.Equal(out, first) {
			t.Fatalf("order %d changed the bytes", i)
		}
		if ArcMemberHash(b.Episodes) != ArcMemberHash(a.Episodes) {
			t.Fatalf("order changed the member hash")
		}
	}
	// The input slice is not reordered.
	if a.Episodes[0].Path != "areas/inbox/20240506-retro.html" {
		t.Fatalf("RenderArc sorted the caller's slice")
	}
}

func TestArcMemberHashChanges(t *testing.T) {
	a := sampleArc()
	base := ArcMemberHash(a.Episodes)
	mut := func(f func(e []ArcEpisode) []ArcEpisode) string {
		return ArcMemberHash(f(append([]ArcEpisode(nil), a.Episodes...)))
	}
	changes := map[string]string{
		"drop": mut(func(e []ArcEpisode) []ArcEpisode { return e[1:] }),
		"add": mut(func(e []ArcEpisode) []ArcEpisode {
			return append(e, ArcEpisode{Path: "areas/x.html", Date: day(2024, 7, 1)})
		}),
		"rename":  mut(func(e []ArcEpisode) []ArcEpisode { e[0].Path = "archive/2024/" + e[0].Path; return e }),
		"title":   mut(func(e []ArcEpisode) []ArcEpisode { e[1].Title += "!"; return e }),
		"gist":    mut(func(e []ArcEpisode) []ArcEpisode { e[1].Gist += "!"; return e }),
		"content": mut(func(e []ArcEpisode) []ArcEpisode { e[1].ContentHash = "sha256:ab"; return e }),
		"shift": mut(func(e []ArcEpisode) []ArcEpisode {
			e[0].Title, e[0].Gist = e[0].Title+e[0].Gist[:1], e[0].Gist[1:]
			return e
		}),
	}
	for name, h := range changes {
		if h == base {
			t.Errorf("%s: member hash unchanged", name)
		}
	}
	if !strings.HasPrefix(base, "sha256:") || len(base) != 71 {
		t.Errorf("format %q", base)
	}
}

func TestRenderArcSummaryAndEdges(t *testing.T) {
	a := sampleArc()
	a.Summary = "Sanju <b>led</b> the rollout.\n\nThen the incident & retro."
	out := RenderArc(a)
	if m := ParseBytes(out); !m.Valid() {
		t.Fatalf("violations %q", m.Violations)
	}
	if !strings.Contains(string(out), "<p>Sanju &lt;b&gt;led&lt;/b&gt; the rollout.</p>\n<p>Then the incident &amp; retro.</p>") {
		t.Errorf("summary not escaped into paragraphs:\n%s", out)
	}
	for _, edge := range []Arc{
		{Entity: "", Year: 2023},
		{Entity: "tag:x", Year: 2023, Episodes: []ArcEpisode{{Path: "areas/20230101-a.html", Date: day(2023, 1, 1)}}},
		{Entity: `"><script>`, Year: 2023, Episodes: []ArcEpisode{{Path: "", Date: day(2023, 1, 1)}, {Path: "areas/a?b#c%.html", Date: day(2023, 2, 1), Title: "<mark>", Gist: "</article>"}}},
	} {
		out := RenderArc(edge)
		if m := ParseBytes(out); !m.Valid() {
			t.Errorf("edge %+v: violations %q\n%s", edge, m.Violations, out)
		}
	}
}

func BenchmarkRenderArc(b *testing.B) {
	a := sampleArc()
	for i := 0; i < 40; i++ {
		a.Episodes = append(a.Episodes, ArcEpisode{Path: "areas/inbox/2024" + strings.Repeat("0", 0) + "0601-e.html", Date: day(2024, 6, 1+i%28), Title: "Episode", Gist: "Something happened."})
	}
	b.ReportAllocs()
	for b.Loop() {
		RenderArc(a)
	}
}

// FuzzRenderArc: whatever the members say, the arc is valid memhtml, its claim is the
// gist, and rendering is deterministic.
func FuzzRenderArc(f *testing.F) {
	f.Add("person:Sanju Rao", 2024, "areas/inbox/20240101-a.html", "Title", "Gist", "")
	f.Add(`"><script>x</script>`, 0, "", "<mark>", "</article>", "a\n\nb")
	f.Add("\xff\x00", 99999, "areas/\xff.html", "\x00", "\r\n", "\x00\xff")
	f.Fuzz(func(t *testing.T, entity string, year int, path, title, gist, summary string) {
		if year < 0 || year > 9999 {
			year = 2024
		}
		a := Arc{Entity: entity, Year: year, Summary: summary, Episodes: []ArcEpisode{
			{Path: path, Date: day(year, 3, 1), Title: title, Gist: gist},
			{Path: "areas/inbox/x.html", Date: day(year, 1, 1), Title: gist, Gist: title},
		}}
		out := RenderArc(a)
		m := ParseBytes(out)
		if !m.Valid() || len(m.Warnings) > 0 {
			t.Fatalf("violations %q, warnings %q\n%s", m.Violations, m.Warnings, out)
		}
		if m.ContentHash != m.ComputedHash {
			t.Fatalf("hash %s vs %s", m.ContentHash, m.ComputedHash)
		}
		if !bytes.Equal(out, RenderArc(a)) {
			t.Fatal("not deterministic")
		}
		if !strings.Contains(m.Gist, "2 episodes") {
			t.Fatalf("gist %q", m.Gist)
		}
	})
}
