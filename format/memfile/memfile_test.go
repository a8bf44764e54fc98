package memfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// doc builds a memory file from the four required metas plus head extras and an article body.
func doc(typ, headExtra, article string) string {
	return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>A memory</title>
<meta name="memhtml-type" content="` + typ + `">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2025-03-04T05:06:07Z">
<meta name="memhtml-updated" content="2025-03-05">
` + headExtra + `</head>
<body>
` + article + `
</body>
</html>
`
}

const goodArticle = `<article>
<p><mark>The claim.</mark> More on <time datetime="2024-06-01">June 1</time>.</p>
</article>`

func parseString(t *testing.T, s string) *Memory {
	t.Helper()
	m, err := Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

// The two examples in memhtml's format document (memhtml:docs/format.md): zero violations, and the content hash
// memd computes equals the one memhtml wrote, so doctor's hash check agrees with memhtml.
func TestParseMemhtmlExamples(t *testing.T) {
	for _, name := range []string{"memhtml-procedural.html", "memhtml-task.html"} {
		m, err := ParseFile(filepath.Join("testdata", "memfile", name))
		if err != nil {
			t.Fatal(err)
		}
		if !m.Valid() {
			t.Errorf("%s: violations %q", name, m.Violations)
		}
		if m.ComputedHash != m.ContentHash || m.ContentHash == "" {
			t.Errorf("%s: computed %s, file says %s", name, m.ComputedHash, m.ContentHash)
		}
	}
	m, _ := ParseFile(filepath.Join("testdata", "memfile", "memhtml-procedural.html"))
	if m.Type != "procedural" || m.Status != "active" || m.Title != "Prod rollbacks drain the VIP before the deploy is reverted" {
		t.Errorf("head: %+v", m)
	}
	if m.Gist != "If a prod rollback is issued, drain the VIP before reverting the deploy." {
		t.Errorf("gist %q", m.Gist)
	}
	if m.EventTime != "2026-07-28" || m.EventAt.Year() != 2026 {
		t.Errorf("event %q %v", m.EventTime, m.EventAt)
	}
	if strings.Join(m.Entities, ",") != "service:checkout-api,person:sanju" || strings.Join(m.Tags, ",") != "deploy,oncall" {
		t.Errorf("entities %q tags %q", m.Entities, m.Tags)
	}
	if len(m.Links) != 2 || m.Links[1] != (Link{Rel: "memhtml-part-of", Href: "/areas/arcs/reversibility-first.html"}) {
		t.Errorf("links %+v", m.Links)
	}
	if got := m.Metas["memhtml-session"]; len(got) != 1 || got[0] != "f7e32699-d45b-4248-8ae6-894dfc606f49" {
		t.Errorf("non-core meta kept: %q", got)
	}
	if !m.CreatedAt.Equal(time.Date(2026, 8, 2, 14, 3, 11, 0, time.UTC)) {
		t.Errorf("created %v", m.CreatedAt)
	}
	if y := m.Year("areas/oncall/rollback.html"); y != 2026 {
		t.Errorf("year %d", y)
	}
	task, _ := ParseFile(filepath.Join("testdata", "memfile", "memhtml-task.html"))
	if task.TaskStatus != "doing" || task.Due != "2026-08-20" {
		t.Errorf("task %q due %q", task.TaskStatus, task.Due)
	}
}

func TestParseMemoryViolations(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"missing type", strings.Replace(doc("episodic", "", goodArticle), `<meta name="memhtml-type" content="episodic">`, "", 1), "missing required meta memhtml-type"},
		{"empty type is not a type", doc("", "", goodArticle), `memhtml-type "" is not a memory type`},
		{"offset time", strings.Replace(doc("verdict", "", goodArticle), "2025-03-05", "2025-03-05T10:00:00+02:00", 1), `"2025-03-05T10:00:00+02:00" is not an ISO date`},
		{"bad type", doc("memo", "", goodArticle), `memhtml-type "memo"`},
		{"bad status", strings.Replace(doc("episodic", "", goodArticle), `content="active"`, `content="live"`, 1), `memhtml-status "live"`},
		{"bad created", strings.Replace(doc("episodic", "", goodArticle), `2025-03-04T05:06:07Z`, `yesterday`, 1), `memhtml-created "yesterday"`},
		{"duplicate type", doc("episodic", `<meta name="memhtml-type" content="semantic">`+"\n", goodArticle), "memhtml-type appears 2 times"},
		{"bad valid-until", doc("episodic", `<meta name="memhtml-valid-until" content="2026-13-45">`+"\n", goodArticle), `memhtml-valid-until "2026-13-45"`},
		{"task status on non-task", doc("semantic", `<meta name="memhtml-task-status" content="todo">`+"\n", goodArticle), `memhtml-task-status "todo" on a memory of type "semantic"`},
		{"bad task status", doc("task", `<meta name="memhtml-task-status" content="finished">`+"\n", goodArticle), `memhtml-task-status "finished" is not one of`},
		{"task without status", doc("task", "", goodArticle), "task without memhtml-task-status"},
		{"no article", doc("episodic", "", `<p><mark>x</mark></p>`), "no <article>"},
		{"two articles", doc("episodic", "", goodArticle+goodArticle), "found 2 <article> elements"},
		{"no mark", doc("episodic", "", `<article><p>plain</p></article>`), "no <mark>"},
		{"mark outside article is not counted", doc("episodic", "", `<p><mark>x</mark></p><article><p>plain</p></article>`), "no <mark>"},
		{"two marks", doc("episodic", "", `<article><p><mark>a</mark> <mark>b</mark></p></article>`), "found 2 <mark> elements"},
		{"empty mark", doc("episodic", "", `<article><p><mark>  </mark></p></article>`), "the <mark> is empty"},
		{"code-only mark", doc("episodic", "", `<article><p><mark><code>drain --vip</code></mark></p></article>`), "the <mark> is empty"},
		{"mark in second p", doc("episodic", "", `<article><p>first</p><p><mark>x</mark></p></article>`), "not inside the article's first <p> or <li>"},
		{"mark after implied p close", doc("episodic", "", `<article><p>first<ul><li><mark>x</mark></li></ul></article>`), "not inside the article's first <p> or <li>"},
		{"mark in aside", doc("episodic", "", `<article><aside><p><mark>x</mark></p></aside></article>`), "inside <aside>"},
		{"mark in details", doc("episodic", "", `<article><details><summary>s</summary><p><mark>x</mark></p></details></article>`), "inside <details>"},
		{"class attr", doc("episodic", "", `<article><p class="x"><mark>a</mark></p></article>`), "<p> has a class attribute"},
		{"style attr", doc("episodic", "", `<article><p><mark style="color:red">a</mark></p></article>`), "<mark> has a style attribute"},
		{"onclick", doc("episodic", "", `<article><p><mark onclick="x()">a</mark></p></article>`), "event-handler attribute onclick"},
		{"script", doc("episodic", "<script>alert(1)</script>\n", goodArticle), "<script> element"},
		{"style element", doc("episodic", "<style>p{}</style>\n", goodArticle), "<style> element"},
		{"no title", strings.Replace(doc("episodic", "", goodArticle), "<title>A memory</title>", "", 1), "no <title>"},
		{"empty title", strings.Replace(doc("episodic", "", goodArticle), "<title>A memory</title>", "<title> </title>", 1), "the <title> is empty"},
		{"two titles", doc("episodic", "<title>again</title>\n", goodArticle), "found 2 <title> elements"},
		{"absolute link", doc("episodic", `<link rel="memhtml-part-of" href="https://x.example/a.html">`+"\n", goodArticle), `href "https://x.example/a.html" is not root-relative`},
		{"relative link", doc("episodic", `<link rel="memhtml-part-of" href="../a.html">`+"\n", goodArticle), `href "../a.html"`},
		{"invalid utf8", doc("episodic", "", "<article><p><mark>\xff</mark></p></article>"), "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := parseString(t, c.src)
			if m.Valid() {
				t.Fatalf("no violations, want one containing %q", c.want)
			}
			found := false
			for _, v := range m.Violations {
				if strings.Contains(v, c.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("violations %q, want one containing %q", m.Violations, c.want)
			}
		})
	}
}

func TestParseMemoryAccepts(t *testing.T) {
	cases := map[string]string{
		"plain":            doc("episodic", "", goodArticle),
		"mark in first li": doc("semantic", "", `<article><ul><li><strong>Key:</strong> <mark>the claim</mark></li><li>two</li></ul></article>`),
		"nested inline":    doc("semantic", "", `<article><p><mark>drain <strong>first</strong></mark></p></article>`),
		"non-memhtml link": doc("semantic", `<link rel="icon" href="https://x.example/i.png">`+"\n", goodArticle),
		"task":             doc("task", `<meta name="memhtml-task-status" content="done">`+"\n", goodArticle),
		"memd meta":        doc("arc", `<meta name="memd-members" content="sha256:00">`+"\n", goodArticle),
		"entity no colon":  doc("semantic", `<meta name="memhtml-entity" content="sanju">`+"\n", goodArticle),
		"unclosed p":       doc("episodic", "", `<article><p><mark>claim</mark> text<p>more</article>`),
	}
	for name, src := range cases {
		m := parseString(t, src)
		if !m.Valid() {
			t.Errorf("%s: violations %q", name, m.Violations)
		}
	}
	m := parseString(t, doc("arc", `<meta name="memd-members" content="sha256:00">`+"\n", goodArticle))
	if m.Meta("memd-members") != "sha256:00" {
		t.Errorf("memd meta lost: %v", m.Metas)
	}
}

func TestContentHashInvariants(t *testing.T) {
	h := func(head, article string) string { return parseString(t, doc("semantic", head, article)).ComputedHash }
	flat := `<article><p><mark>claim</mark></p><ul><li>one</li><li>two</li></ul></article>`
	pretty := "<article>\n  <p>\n    <mark>claim</mark>\n  </p>\n  <ul>\n    <li>one</li>\n    <li>two</li>\n  </ul>\n</article>"
	base := h("", flat)
	if base != h("", pretty) {
		t.Errorf("pretty-printing moved the hash")
	}
	if base != h(`<meta name="memhtml-confidence" content="0.5">`+"\n"+`<link rel="memhtml-part-of" href="/areas/a.html">`+"\n", flat) {
		t.Errorf("head edit moved the hash")
	}
	if base == h("", strings.Replace(flat, "two", "three", 1)) {
		t.Errorf("content edit kept the hash")
	}
	if h("", `<article><p><mark>c</mark></p><pre>  a</pre></article>`) == h("", `<article><p><mark>c</mark></p><pre>a</pre></article>`) {
		t.Errorf("<pre> whitespace is not kept")
	}
	if h("", `<article><p><mark>c</mark></p><pre>`+"\n"+`a</pre></article>`) != h("", `<article><p><mark>c</mark></p><pre>a</pre></article>`) {
		t.Errorf("leading newline after <pre> is not dropped the way HTML parsing drops it")
	}
	if ComputeContentHash("  a \n\t b  ") != ComputeContentHash("a b") || !strings.HasPrefix(ComputeContentHash("x"), "sha256:") || len(ComputeContentHash("x")) != 7+64 {
		t.Errorf("ComputeContentHash normalisation/format: %s", ComputeContentHash("x"))
	}
}

// A malformed optional number is dropped by memhtml, the file stays valid: memd warns.
func TestParseMemoryDropsMalformedOptionals(t *testing.T) {
	for name, c := range map[string]struct{ meta, want string }{
		"confidence range": {`<meta name="memhtml-confidence" content="1.5">`, `memhtml-confidence "1.5"`},
		"confidence nan":   {`<meta name="memhtml-confidence" content="NaN">`, `memhtml-confidence "NaN"`},
		"importance range": {`<meta name="memhtml-importance" content="11">`, `memhtml-importance "11"`},
		"importance float": {`<meta name="memhtml-importance" content="2.5">`, `memhtml-importance "2.5"`},
	} {
		m := parseString(t, doc("episodic", c.meta+"\n", goodArticle))
		if !m.Valid() || len(m.Warnings) != 1 || !strings.Contains(m.Warnings[0], c.want) {
			t.Errorf("%s: violations %q warnings %q, want one warning containing %s", name, m.Violations, m.Warnings, c.want)
		}
	}
	if m := parseString(t, doc("episodic", `<meta name="memhtml-confidence" content=" 0.5 ">`+"\n", goodArticle)); len(m.Warnings) != 0 {
		t.Errorf("well-formed confidence warned: %q", m.Warnings)
	}
}

func TestYear(t *testing.T) {
	m := parseString(t, doc("episodic", "", goodArticle)) // time 2024, created 2025
	if y := m.Year("areas/inbox/20230102-x.html"); y != 2024 {
		t.Errorf("first <time> wins over the (write) date prefix: %d", y)
	}
	if y := m.Year("areas/inbox/x.html"); y != 2024 {
		t.Errorf("first <time> next: %d", y)
	}
	m = parseString(t, doc("episodic", "", `<article><p><mark>c</mark></p></article>`))
	if y := m.Year("areas/x.html"); y != 2025 {
		t.Errorf("created last: %d", y)
	}
	if y := (&Memory{}).Year("areas/x.html"); y != 0 {
		t.Errorf("none: %d", y)
	}
}

// countingReader counts what Parse pulls, to prove it stops past the limit.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestOversize(t *testing.T) {
	cr := &countingReader{r: endless{}}
	m, err := Parse(cr)
	if err != nil {
		t.Fatal(err)
	}
	if cr.n > MaxFileBytes+1 {
		t.Errorf("read %d bytes, want at most %d", cr.n, MaxFileBytes+1)
	}
	if len(m.Violations) != 1 || !strings.Contains(m.Violations[0], "over the 1 MiB limit") {
		t.Errorf("violations %q", m.Violations)
	}

	// A sparse 5 GiB file: stat says no, nothing is read.
	p := filepath.Join(t.TempDir(), "huge.html")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(5 << 30); err != nil {
		t.Skipf("cannot make a sparse file here: %v", err)
	}
	f.Close()
	m, err = ParseFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Violations) != 1 || m.Violations[0] != "file is 5368709120 bytes, over the 1 MiB limit" {
		t.Errorf("violations %q", m.Violations)
	}

	// Exactly at the limit is read and judged on its rules.
	at := []byte(doc("episodic", "", goodArticle))
	at = append(at, bytes.Repeat([]byte(" "), MaxFileBytes-len(at))...)
	m, err = Parse(bytes.NewReader(at))
	if err != nil || !m.Valid() {
		t.Errorf("file at the limit: %v %q", err, m.Violations)
	}
}

func TestParseMemoryFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.html")
	if _, err := ParseFile(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ParseFile(dir); !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), dir) {
		t.Errorf("directory: %v", err)
	}
	// A symlink is never followed, even to a valid memory.
	target, _ := filepath.Abs(filepath.Join("testdata", "memfile", "memhtml-task.html"))
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if _, err := ParseFile(link); !errors.Is(err, ErrNotRegular) {
		t.Errorf("symlink followed: %v", err)
	}
}

// Many violations in one file stay bounded.
func TestViolationsBounded(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		b.WriteString(`<meta name="memhtml-x` + strings.Repeat("y", i%300) + `" content="1"><meta name="memhtml-x` + strings.Repeat("y", i%300) + `" content="2">`)
		b.WriteString(`<p onx` + strings.Repeat("z", i%200) + `="1">`)
	}
	m := parseString(t, b.String())
	if len(m.Violations) > maxViolations+1 {
		t.Fatalf("%d violations", len(m.Violations))
	}
	if !strings.HasPrefix(m.Violations[len(m.Violations)-1], "and ") {
		t.Errorf("last violation %q, want the 'and N more' line", m.Violations[len(m.Violations)-1])
	}
}

func BenchmarkParseMemory(b *testing.B) {
	src, err := os.ReadFile(filepath.Join("testdata", "memfile", "memhtml-procedural.html"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		m := ParseBytes(src)
		if !m.Valid() {
			b.Fatal(m.Violations)
		}
	}
}

func FuzzParseMemory(f *testing.F) {
	f.Add(doc("episodic", "", goodArticle))
	f.Add(doc("task", `<meta name="memhtml-task-status" content="x">`, `<article><p><mark><code>x</code></mark><pre>`+"\n y</pre>"))
	f.Add(`<article><aside><details><p><mark>x</p></mark></li></article></article><title>`)
	f.Add("<p><p><li><dd><dt></table><mark>\xff\x00</mark><script>")
	f.Add(`<link rel="memhtml-a memhtml-b" href="//x"><meta name="MEMHTML-TYPE" content="arc">`)
	f.Fuzz(func(t *testing.T, s string) {
		m, err := Parse(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Violations) > maxViolations+1 {
			t.Fatalf("%d violations", len(m.Violations))
		}
		if m.Valid() != (len(m.Violations) == 0) {
			t.Fatal("Valid disagrees with Violations")
		}
		if m.Metas == nil {
			t.Fatal("nil Metas")
		}
	})
}

// TestParseMemoryLinear: hostile nesting costs linear time. 32 KiB is parsed once and
// compared with 4 KiB parsed 8 times (equal work if linear, 8x if quadratic); the best
// of several alternating rounds is kept so machine load cannot favour one side.
func TestParseMemoryLinear(t *testing.T) {
	hostile := func(size int) [][]byte {
		fill := func(prefix, unit, mid, unit2 string) []byte {
			n := (size - len(prefix) - len(mid)) / (len(unit) + len(unit2))
			return []byte(prefix + strings.Repeat(unit, n) + mid + strings.Repeat(unit2, n))
		}
		return [][]byte{
			fill("<article><p><table>", "<div>", "", ""),
			fill("<article>", "<b>", "", "</i>"),
			fill("<article>", "<span>", "", "<div>"),
			fill("<article><ul><li>", "<x-a>", "", "<li>"),
			fill("<article><p>", "<em>", "", "</p>"),
		}
	}
	small, large := hostile(4<<10), hostile(32<<10)
	run := func(in [][]byte, times int) time.Duration {
		start := time.Now()
		for i := 0; i < times; i++ {
			for _, b := range in {
				ParseBytes(b)
			}
		}
		return time.Since(start)
	}
	bestSmall, bestLarge := time.Duration(1<<62), time.Duration(1<<62)
	for round := 0; round < 6; round++ {
		bestSmall = min(bestSmall, run(small, 8))
		bestLarge = min(bestLarge, run(large, 1))
	}
	ratio := float64(bestLarge) / float64(bestSmall)
	t.Logf("8 x 4KiB %v, 32KiB %v, ratio %.2f", bestSmall, bestLarge, ratio)
	if ratio > 3 {
		t.Fatalf("32KiB took %v, 8 x 4KiB %v: ratio %.1f, want ~1 (linear)", bestLarge, bestSmall, ratio)
	}
}

// treeCanonical is memhtml's canonicalText written the tree way, over the real HTML5
// tree builder (html.Parse): an independent check of the streaming version.
func treeCanonical(n *html.Node) string {
	type seg struct {
		verbatim bool
		text     string
	}
	var segs []seg
	var walk func(n *html.Node, verbatim bool)
	walk = func(n *html.Node, verbatim bool) {
		switch n.Type {
		case html.TextNode:
			segs = append(segs, seg{verbatim, n.Data})
			return
		case html.ElementNode:
			block := !isInline(n.DataAtom)
			if block {
				segs = append(segs, seg{false, " "})
			}
			v := verbatim || n.DataAtom == atom.Pre
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				walk(c, v)
			}
			if block {
				segs = append(segs, seg{false, " "})
			}
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, verbatim)
		}
	}
	walk(n, false)
	var merged []seg
	for _, s := range segs {
		if k := len(merged) - 1; k >= 0 && merged[k].verbatim == s.verbatim {
			merged[k].text += s.text
		} else {
			merged = append(merged, s)
		}
	}
	var b strings.Builder
	for i, s := range merged {
		t := s.text
		if !s.verbatim {
			t = regexp.MustCompile(`[ \t\n\f\r]+`).ReplaceAllString(t, " ")
			if i == 0 {
				t = strings.TrimPrefix(t, " ")
			}
			if i == len(merged)-1 {
				t = strings.TrimSuffix(t, " ")
			}
		}
		b.WriteString(t)
	}
	return b.String()
}

func findArticle(n *html.Node) *html.Node {
	if n.Type == html.ElementNode && n.DataAtom == atom.Article {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if a := findArticle(c); a != nil {
			return a
		}
	}
	return nil
}

// TestContentHashMatchesTreeParser: the streaming hash equals a tree-based one built on
// the real HTML5 parser, over real-shaped files (memhtml's examples, arcs, odd markup).
func TestContentHashMatchesTreeParser(t *testing.T) {
	docs := map[string][]byte{"arc": RenderArc(sampleArc())}
	for _, name := range []string{"memhtml-procedural.html", "memhtml-task.html"} {
		b, err := os.ReadFile(filepath.Join("testdata", "memfile", name))
		if err != nil {
			t.Fatal(err)
		}
		docs[name] = b
	}
	for i, art := range []string{
		goodArticle,
		"<article>\n<p><mark>a</mark> b</p><ul><li>one<li>two</ul><pre>\n  x\n y </pre><p>tail</article>",
		"<article><p><mark>a &amp; b</mark><br>c<img alt=x>d</p><dl><dt>k<dd>v<dt>k2<dd>v2</dl></article>",
		"<article><section><h2>T</h2><p><mark>m</mark>\t\tx</p><table><tr><td>1<td>2</table></section></article>",
		"<article><p><mark>m</mark></p><details><summary>s</summary><pre><code>a\n\tb</code></pre></details><aside>z</aside></article>",
	} {
		docs[fmt.Sprintf("doc%d", i)] = []byte(doc("semantic", "", art))
	}
	for name, b := range docs {
		root, err := html.Parse(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		a := findArticle(root)
		if a == nil {
			t.Fatalf("%s: no article", name)
		}
		want := hashOf([]byte(treeCanonical(a)))
		if got := ParseBytes(b).ComputedHash; got != want {
			t.Errorf("%s: streaming hash %s, tree hash %s (tree text %q)", name, got, want, treeCanonical(a))
		}
	}
}

func TestValidDatetime(t *testing.T) {
	for s, want := range map[string]bool{
		"2026-03-04": true, "2026-03-04T05:06:07Z": true, "2016-12-31T23:59:60Z": true, "2024-02-29": true,
		"2026-02-29": false, "2026-13-01": false, "2026-13-45": false, "2026-00-10": false, "2026-04-31": false,
		"2026-08": false, "2026-W32": false, "2026-03-04T05:06Z": false, "2026-03-04T05:06:07": false,
		"2026-03-04T05:06:07+02:00": false, "2026-03-04T05:06:07.5Z": false, "2026-03-04T24:00:00Z": false,
		"2026-03-04T05:60:00Z": false, "2026-03-04T05:06:61Z": false, "0099-01-01": false, "0100-01-01": true,
		"": false, " 2026-03-04": false, "2026-03-04 ": false, "2026-3-04": false, "２０２６-03-04": false,
	} {
		if got := ValidDatetime(s); got != want {
			t.Errorf("ValidDatetime(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestRelOfToken(t *testing.T) {
	for tok, want := range map[string]string{
		"memhtml-supersedes": "supersedes", "memhtml-part-of": "part_of", "memhtml-part_of": "part_of",
		"memhtml-subtask-of": "subtask_of", "memhtml-arc-member": "", "memhtml-related": "",
		"memhtml-supports memhtml-relates-to": "", "MEMHTML-SUPPORTS": "", "supports": "", "memhtml-": "",
	} {
		if got := RelOfToken(tok); got != want {
			t.Errorf("RelOfToken(%q) = %q, want %q", tok, got, want)
		}
	}
	if len(Rels) != 14 {
		t.Errorf("%d rels, memhtml has 14", len(Rels))
	}
}
