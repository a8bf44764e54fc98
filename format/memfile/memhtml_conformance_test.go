package memfile_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/internal/testutil"
)

// checkerCase is one file for TestCheckerAgreesWithMemhtml: its head extras and article,
// and the verdict both checkers must reach.
type checkerCase struct {
	name    string
	head    string // extra head lines (after the four required metas)
	article string // the whole <body> content; "" = a plain valid article
	valid   bool
	warned  bool // memhtml warns (element vocabulary)
	replace [2]string
}

// conformanceFile is a memory file whose claim names the case, so no two cases share a
// content hash (memhtml would refuse the whole rebuild).
func conformanceFile(c checkerCase) string {
	body := c.article
	if body == "" {
		body = `<article><p><mark>Case CLAIM holds.</mark> On <time datetime="2026-03-04">March 4</time>.</p></article>`
	}
	body = strings.ReplaceAll(body, "CLAIM", c.name)
	s := `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Case ` + c.name + `</title>
<meta name="memhtml-type" content="semantic">
<meta name="memhtml-status" content="active">
<meta name="memhtml-created" content="2026-03-04T05:06:07Z">
<meta name="memhtml-updated" content="2026-03-05">
` + c.head + `</head>
<body>
` + body + `
</body>
</html>
`
	if c.replace[0] != "" {
		s = strings.Replace(s, c.replace[0], c.replace[1], 1)
	}
	return s
}

// TestCheckerAgreesWithMemhtml writes one file per rule of docs/FORMATS.md §2 and runs each
// through memd's checker and the real memhtml's (one `memhtml index rebuild`: a file it
// refuses is in `skipped` with its reason; one `memhtml doctor` for its warnings). Both
// must reach the verdict the case states.
func TestCheckerAgreesWithMemhtml(t *testing.T) {
	mh := testutil.InstallMemhtml(t)
	cases := []checkerCase{
		{name: "baseline", valid: true},
		// <time> datetimes.
		{name: "time-no-datetime", article: `<article><p><mark>CLAIM</mark> on <time>Monday</time>.</p></article>`},
		{name: "time-empty-datetime", article: `<article><p><mark>CLAIM</mark> on <time datetime="">Monday</time>.</p></article>`},
		{name: "time-month-13", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-13-45">then</time>.</p></article>`},
		{name: "time-feb-30", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-02-30">then</time>.</p></article>`},
		{name: "time-year-month", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-08">August</time>.</p></article>`},
		{name: "time-week", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-W32">week 32</time>.</p></article>`},
		{name: "time-offset", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-08-01T10:00:00+02:00">ten</time>.</p></article>`},
		{name: "time-no-seconds", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-08-01T10:00Z">ten</time>.</p></article>`},
		{name: "time-leap-second", article: `<article><p><mark>CLAIM</mark> <time datetime="2016-12-31T23:59:60Z">the leap second</time>.</p></article>`, valid: true},
		{name: "time-utc", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-08-01T10:00:00Z">ten</time>.</p></article>`, valid: true},
		{name: "time-second-time-bad", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-08-01">a</time>, <time datetime="soon">b</time>.</p></article>`},
		{name: "time-year-99", article: `<article><p><mark>CLAIM</mark> <time datetime="0099-01-01">long ago</time>.</p></article>`},
		// Date metas use the same grammar.
		{name: "meta-created-offset", replace: [2]string{`content="2026-03-04T05:06:07Z"`, `content="2026-03-04T05:06:07+01:00"`}},
		{name: "meta-updated-bad-day", replace: [2]string{`content="2026-03-05"`, `content="2026-04-31"`}},
		{name: "meta-valid-until-bad", head: `<meta name="memhtml-valid-until" content="next week">` + "\n"},
		// The claim.
		{name: "mark-nbsp", article: `<article><p><mark>&nbsp;</mark> CLAIM has no claim.</p></article>`},
		{name: "mark-ideographic-space", article: "<article><p><mark>\u3000 \t</mark> CLAIM has no claim.</p></article>"},
		{name: "mark-code-only", article: `<article><p><mark><code>CLAIM</code></mark> text.</p></article>`},
		{name: "mark-nested-strong", article: `<article><p><mark><strong>CLAIM</strong></mark> text.</p></article>`, valid: true},
		{name: "mark-second-p", article: `<article><p>Lead.</p><p><mark>CLAIM</mark></p></article>`},
		{name: "mark-in-aside", article: `<article><p>Lead CLAIM.</p><aside><p><mark>caveat</mark></p></aside></article>`},
		{name: "two-marks", article: `<article><p><mark>CLAIM</mark> and <mark>more</mark>.</p></article>`},
		// Closed meta vocabulary, case-sensitive names, repeats.
		{name: "meta-unknown", head: `<meta name="memhtml-vibe" content="calm">` + "\n"},
		{name: "meta-upper-extra", head: `<meta name="MEMHTML-TYPE" content="verdict">` + "\n", valid: true},
		{name: "meta-upper-only", replace: [2]string{`name="memhtml-type"`, `name="MEMHTML-TYPE"`}},
		{name: "meta-own-prefix", head: `<meta name="memd-members" content="sha256:00">` + "\n", valid: true},
		{name: "meta-type-twice", head: `<meta name="memhtml-type" content="verdict">` + "\n"},
		{name: "meta-tag-twice", head: `<meta name="memhtml-tag" content="a">` + "\n" + `<meta name="memhtml-tag" content="b">` + "\n", valid: true},
		{name: "meta-status-space", replace: [2]string{`content="active"`, `content=" active"`}},
		{name: "meta-in-body", article: `<article><p><mark>CLAIM</mark> text.</p><meta name="memhtml-vibe" content="x"></article>`, valid: true},
		// Malformed optional values are dropped, the file stays valid.
		{name: "confidence-high", head: `<meta name="memhtml-confidence" content="1.5">` + "\n", valid: true},
		{name: "confidence-word", head: `<meta name="memhtml-confidence" content="high">` + "\n", valid: true},
		{name: "importance-99", head: `<meta name="memhtml-importance" content="99">` + "\n", valid: true},
		{name: "importance-float", head: `<meta name="memhtml-importance" content="2.5">` + "\n", valid: true},
		// Closed rel vocabulary, one token per rel, root-relative hrefs.
		{name: "rel-supersedes", head: `<link rel="memhtml-supersedes" href="/areas/x/old.html">` + "\n", valid: true},
		{name: "rel-underscore", head: `<link rel="memhtml-part_of" href="/areas/arcs/x-2026.html">` + "\n", valid: true},
		{name: "rel-arc-member", head: `<link rel="memhtml-arc-member" href="/areas/x/a.html">` + "\n"},
		{name: "rel-two-tokens", head: `<link rel="memhtml-supports memhtml-relates-to" href="/areas/x/a.html">` + "\n"},
		{name: "rel-upper", head: `<link rel="MEMHTML-SUPPORTS" href="x">` + "\n", valid: true},
		{name: "rel-other", head: `<link rel="stylesheet" href="style.css">` + "\n", valid: true},
		{name: "rel-relative-href", head: `<link rel="memhtml-supports" href="areas/x/a.html">` + "\n"},
		{name: "rel-dotdot-href", head: `<link rel="memhtml-supports" href="/areas/../x.html">` + "\n"},
		{name: "rel-no-href", head: `<link rel="memhtml-supports">` + "\n"},
		{name: "rel-non-bucket-href", head: `<link rel="memhtml-supports" href="/notes/x">` + "\n", valid: true},
		// No presentation, no script.
		{name: "class-attr", article: `<article><p class="x"><mark>CLAIM</mark></p></article>`},
		{name: "onclick-attr", article: `<article><p onclick="x()"><mark>CLAIM</mark></p></article>`},
		// Element vocabulary: warnings, never refusals.
		{name: "h2-heading", article: `<article><h2>Heading</h2><p><mark>CLAIM</mark> text.</p></article>`, valid: true, warned: true},
		{name: "div-outside-figure", article: `<article><p><mark>CLAIM</mark> text.</p><div>box</div></article>`, valid: true, warned: true},
		{name: "div-in-figure", article: `<article><p><mark>CLAIM</mark> text.</p><figure><div><span>code</span></div></figure></article>`, valid: true},
		{name: "br-element", article: `<article><p><mark>CLAIM</mark> one<br>two.</p></article>`, valid: true, warned: true},
		{name: "bad-lang", article: `<article><p><mark>CLAIM</mark> <code data-lang="-x">x</code>.</p></article>`, valid: true, warned: true},
		// <template> content is not the document.
		{name: "template-article", article: `<article><p><mark>CLAIM</mark> text.</p></article><template><article><p>second</p></article></template>`, valid: true, warned: true},
		{name: "template-only", article: `<template><article><p><mark>CLAIM</mark></p></article></template>`},
		// Where HTML's tree building puts things.
		{name: "meta-after-head", replace: [2]string{"</head>\n<body>", "</head>\n<meta name=\"memhtml-vibe\" content=\"x\">\n<body>"}},
		{name: "text-in-head", replace: [2]string{"<meta name=\"memhtml-type\"", "stray text <meta name=\"memhtml-type\""}},
		{name: "noscript-in-head", replace: [2]string{"<meta name=\"memhtml-type\"", "<noscript>no script here</noscript>\n<meta name=\"memhtml-type\""}, valid: true, warned: true},
		{name: "noscript-article", article: `<article><p><mark>CLAIM</mark> text.</p></article><noscript><article><p>two</p></article></noscript>`, valid: true, warned: true},
		{name: "time-duplicate-attr", article: `<article><p><mark>CLAIM</mark> <time datetime="2026-03-04" datetime="bad">then</time>.</p></article>`, valid: true},
		{name: "href-leading-space", head: `<link rel="memhtml-supports" href=" /areas/x/a.html">` + "\n"},
		{name: "title-nbsp", replace: [2]string{"<title>Case title-nbsp</title>", "<title>&nbsp;</title>"}},
		{name: "two-titles", head: "<title>Another</title>\n"},
		{name: "mark-in-first-li", article: `<article><ul><li><mark>CLAIM</mark> first.</li><li>second</li></ul></article>`, valid: true},
		{name: "mark-in-div-after-p", article: `<article><p>Lead<div><mark>CLAIM</mark></div></article>`, warned: true},
		{name: "mark-in-summary", article: `<article><details><summary><mark>CLAIM</mark></summary><p>x</p></details></article>`},
		{name: "mark-after-section-p", article: `<article><section><p>intro</p></section><p><mark>CLAIM</mark></p></article>`},
		{name: "mark-in-table", article: `<article><table><tr><td><p><mark>CLAIM</mark></p></td></tr></table></article>`, valid: true},
		{name: "mark-misnested", article: `<article><p><mark>CLAIM</p></mark><p>after</p></article>`, valid: true},
		{name: "mark-br-only", article: `<article><p><mark><br></mark> CLAIM.</p></article>`, warned: true},
		{name: "mark-nel-only", article: "<article><p><mark>\u0085</mark> CLAIM.</p></article>", valid: true},
		{name: "mark-zwsp-only", article: "<article><p><mark>\u200b</mark> CLAIM.</p></article>", valid: true},
		{name: "mark-bom-only", article: "<article><p><mark>\ufeff</mark> CLAIM.</p></article>"},
		{name: "mark-line-sep-only", article: "<article><p><mark>\u2028</mark> CLAIM.</p></article>"},
		{name: "unclosed-article", article: `<article><p><mark>CLAIM</mark> text`, valid: true},
		{name: "meta-content-entity-space", replace: [2]string{`content="semantic"`, `content="semantic&#x20;"`}},
		{name: "meta-content-twice", replace: [2]string{`content="semantic"`, `content="semantic" content="bogus"`}, valid: true},
		{name: "meta-upper-tag", replace: [2]string{`<meta name="memhtml-type" content="semantic">`, `<META NAME="memhtml-type" CONTENT="semantic">`}, valid: true},
		// Structure.
		{name: "no-article", article: `<p><mark>CLAIM</mark></p>`},
		{name: "two-articles", article: `<article><p><mark>CLAIM</mark></p></article><article><p><mark>two</mark></p></article>`},
		{name: "no-title", replace: [2]string{`<title>Case no-title</title>`, ``}},
		{name: "task-no-status", replace: [2]string{`content="semantic"`, `content="task"`}},
		{name: "task-with-status", replace: [2]string{`content="semantic"`, `content="task"`}, head: `<meta name="memhtml-task-status" content="todo">` + "\n", valid: true},
	}

	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	memdSays := map[string]*memfile.Memory{}
	for _, c := range cases {
		rel := "areas/conformance/" + c.name + ".html"
		data := conformanceFile(c)
		if err := os.MkdirAll(filepath.Join(repo, "areas", "conformance"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, filepath.FromSlash(rel)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		memdSays[rel] = memfile.ParseBytes([]byte(data))
	}
	if err := os.WriteFile(filepath.Join(repo, ".gitignore"), []byte(strings.Join(scaffold.MemhtmlIgnoreLines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "-A")
	git("commit", "-q", "-m", "cases")

	var rebuild struct {
		Data struct {
			FilesIndexed int `json:"filesIndexed"`
			Skipped      []struct{ Path, Reason string }
		} `json:"data"`
	}
	runJSON(t, mh, repo, &rebuild, "index", "rebuild")
	var doctor struct {
		Data struct {
			Warnings []struct {
				Path     string
				Warnings []string
			}
		} `json:"data"`
	}
	runJSON(t, mh, repo, &doctor, "doctor")
	refused := map[string]string{}
	for _, s := range rebuild.Data.Skipped {
		refused[s.Path] = s.Reason
	}
	warned := map[string][]string{}
	for _, w := range doctor.Data.Warnings {
		warned[w.Path] = w.Warnings
	}
	if rebuild.Data.FilesIndexed+len(refused) != len(cases) {
		t.Fatalf("memhtml indexed %d and skipped %d of %d files", rebuild.Data.FilesIndexed, len(refused), len(cases))
	}

	for _, c := range cases {
		rel := "areas/conformance/" + c.name + ".html"
		m := memdSays[rel]
		why, mhRefused := refused[rel]
		if mhRefused == c.valid {
			t.Errorf("%s: memhtml valid=%v (reason %q), the case says %v", c.name, !mhRefused, why, c.valid)
		}
		if m.Valid() != !mhRefused {
			t.Errorf("%s: memd valid=%v (%q), memhtml valid=%v (%q)", c.name, m.Valid(), m.Violations, !mhRefused, why)
		}
		if mhRefused {
			continue
		}
		// memd warns what memhtml warns, word for word; besides, memd warns about the
		// optional values memhtml drops silently.
		var memdVocab []string
		for _, w := range m.Warnings {
			if !strings.HasSuffix(w, "memhtml ignores it") {
				memdVocab = append(memdVocab, w)
			}
		}
		if !slices.Equal(memdVocab, warned[rel]) {
			t.Errorf("%s: memd warns %q, memhtml warns %q", c.name, memdVocab, warned[rel])
		}
		if (len(warned[rel]) > 0) != c.warned {
			t.Errorf("%s: memhtml warnings %q, the case says warned=%v", c.name, warned[rel], c.warned)
		}
		if strings.HasPrefix(c.name, "confidence-") || strings.HasPrefix(c.name, "importance-") {
			if len(m.Warnings) != 1 {
				t.Errorf("%s: memd should warn that memhtml drops the value: %q", c.name, m.Warnings)
			}
		}
	}
}

// runJSON runs memhtml and decodes its envelope; a failure is fatal.
func runJSON(t *testing.T, mh testutil.Memhtml, repo string, v any, args ...string) {
	t.Helper()
	cmd := mh.Command(repo, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("memhtml %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("memhtml %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
