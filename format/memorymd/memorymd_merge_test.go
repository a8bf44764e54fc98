package memorymd

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// pmd builds a project MEMORY.md in the template from its four section bodies.
func pmd(crit, arch, warn, topics string) string {
	body := func(s string) string {
		if s == "" {
			return ""
		}
		return s + "\n"
	}
	return "# proj\n\n## CRITICAL RULES\n\n" + body(crit) + "\n## Architecture & Config Facts\n\n" + body(arch) +
		"\n## Active Warnings\n\n" + body(warn) + "\n## Topic Files\n\n" + body(topics)
}

func lns(ls ...string) string { return strings.Join(ls, "\n") }

type mdMergeCase struct {
	name               string
	base, ours, theirs string
	want               string
}

func TestMergeProjectMemoryMD(t *testing.T) {
	base := pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`.")
	cases := []mdMergeCase{
		{name: "additions in different sections both kept",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two", "- rule ours"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b"), lns("- warn x", "- warn theirs"), "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two", "- rule ours"), lns("- fact a", "- fact b"), lns("- warn x", "- warn theirs"), "- `history.md`.")},
		{name: "additions at the same place: ours first, then theirs, each in its order",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- o1", "- o2"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- t1", "- t2"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- o1", "- o2", "- t1", "- t2"), "- warn x", "- `history.md`.")},
		{name: "the same bullet added on both sides is kept once",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- same", "- o1"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- same", "- t1"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- same", "- o1", "- t1"), "- warn x", "- `history.md`.")},
		{name: "a one-sided removal is applied, the other side's addition kept",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), "- fact b", "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- fact c"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact b", "- fact c"), "- warn x", "- `history.md`.")},
		{name: "a one-sided change is taken",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), lns("- fact a, now with detail", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b"), "", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a, now with detail", "- fact b"), "", "- `history.md`.")},
		{name: "a bullet both changed differently keeps both versions, ours first, no markers",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), lns("- fact a (ours)", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a (theirs)", "- fact b"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a (ours)", "- fact a (theirs)", "- fact b"), "- warn x", "- `history.md`.")},
		{name: "removed on one side, changed on the other: the change stays",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), "- fact b", "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a, edited", "- fact b"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a, edited", "- fact b"), "- warn x", "- `history.md`.")},
		{name: "one side changed a bullet, the other removed its neighbour",
			base:   base,
			ours:   pmd(lns("- rule one", "- rule two"), lns("- fact a'", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one", "- rule two"), "- fact a", "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), "- fact a'", "- warn x", "- `history.md`.")},
		{name: "CRITICAL RULES: a rule removed on one side and edited on the other stays",
			base:   base,
			ours:   pmd("- rule two", lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd(lns("- rule one, sharpened", "- rule two"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one, sharpened", "- rule two"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`.")},
		{name: "CRITICAL RULES is never emptied: each side removed the other rule",
			base:   base,
			ours:   pmd("- rule two", lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd("- rule one", lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule two", "- rule one"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`.")},
		{name: "CRITICAL RULES: the last rule retired on one side, untouched on the other, is retired",
			base:   pmd("- the only rule", "- fact a", "", ""),
			ours:   pmd("", "- fact a", "", ""),
			theirs: pmd("- the only rule", lns("- fact a", "- fact t"), "", ""),
			want:   pmd("", lns("- fact a", "- fact t"), "", "")},
		{name: "CRITICAL RULES emptied by both sides stays empty",
			base:   base,
			ours:   pmd("", lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			theirs: pmd("", lns("- fact a", "- fact b", "- t"), "- warn x", "- `history.md`."),
			want:   pmd("", lns("- fact a", "- fact b", "- t"), "- warn x", "- `history.md`.")},
		{name: "### subsections merge the same way inside their section",
			base:   pmd("- r", lns("- a", "", "### Build", "", "- b1", "", "### Deploy", "", "- d1"), "", ""),
			ours:   pmd("- r", lns("- a", "", "### Build", "", "- b1", "- b2 ours", "", "### Deploy", "", "- d1", "", "### Ours new", "", "- n1"), "", ""),
			theirs: pmd("- r", lns("- a", "", "### Build", "", "- b1", "- b3 theirs", "", "### Deploy", "", "- d1", "- d2 theirs", "", "### Theirs new", "", "- m1"), "", ""),
			want: pmd("- r", lns("- a", "", "### Build", "", "- b1", "- b2 ours", "- b3 theirs", "", "### Deploy", "", "- d1", "- d2 theirs", "",
				"### Ours new", "", "- n1", "", "### Theirs new", "", "- m1"), "", "")},
		{name: "a subsection removed on one side and changed on the other stays, changed",
			base:   pmd("- r", lns("- a", "", "### Old", "", "- o1"), "", ""),
			ours:   pmd("- r", "- a", "", ""),
			theirs: pmd("- r", lns("- a", "", "### Old", "", "- o1", "- o2"), "", ""),
			want:   pmd("- r", lns("- a", "", "### Old", "", "- o1", "- o2"), "", "")},
		{name: "a subsection removed on one side and unchanged on the other goes",
			base:   pmd("- r", lns("- a", "", "### Unsorted: Notes", "", "- n"), "", ""),
			ours:   pmd("- r", "- a", "", ""),
			theirs: pmd("- r", lns("- a", "- b", "", "### Unsorted: Notes", "", "- n"), "", ""),
			want:   pmd("- r", lns("- a", "- b"), "", "")},
		{name: "both added the same subsection: one heading, both bullets",
			base:   pmd("- r", "- a", "", ""),
			ours:   pmd("- r", lns("- a", "", "### New", "", "- x"), "", ""),
			theirs: pmd("- r", lns("- a", "", "### New", "", "- y"), "", ""),
			want:   pmd("- r", lns("- a", "", "### New", "", "- x", "- y"), "", "")},
		{name: "text that is not a bullet merges line by line, keeping both where both changed",
			base:   pmd("- r", lns("Intro line one.", "Intro line two.", "- a"), "", ""),
			ours:   pmd("- r", lns("Intro line one, ours.", "Intro line two.", "- a"), "", ""),
			theirs: pmd("- r", lns("Intro line one, theirs.", "Intro line two, theirs.", "- a"), "", ""),
			want:   pmd("- r", lns("Intro line one, ours.", "Intro line one, theirs.", "Intro line two, theirs.", "- a"), "", "")},
		{name: "non-bullet text changed on one side only is taken",
			base:   pmd("- r", lns("Intro.", "- a"), "", ""),
			ours:   pmd("- r", lns("Intro, rewritten.", "- a"), "", ""),
			theirs: pmd("- r", lns("Intro.", "- a", "- b"), "", ""),
			want:   pmd("- r", lns("Intro, rewritten.", "- a", "- b"), "", "")},
		{name: "the title merges too",
			base:   base,
			ours:   strings.Replace(base, "# proj\n", "# proj\nOwned by the platform team.\n", 1),
			theirs: strings.Replace(base, "- warn x\n", "- warn x\n- warn y\n", 1),
			want:   strings.Replace(strings.Replace(base, "# proj\n", "# proj\nOwned by the platform team.\n", 1), "- warn x\n", "- warn x\n- warn y\n", 1)},
		{name: "a repeated section on one side: repaired into one, then merged",
			base: base,
			ours: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`.") +
				"\n## Architecture & Config Facts\n\n- fact again\n",
			theirs: pmd(lns("- rule one", "- rule two", "- rule t"), lns("- fact a", "- fact b"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two", "- rule t"), lns("- fact a", "- fact b", "", "- fact again"), "- warn x", "- `history.md`.")},
		{name: "a file out of the template on one side (extra section, order): repaired then merged",
			base: base,
			ours: "# proj\n\n## Active Warnings\n\n- warn x\n\n## CRITICAL RULES\n\n- rule one\n- rule two\n\n" +
				"## Architecture & Config Facts\n\n- fact a\n- fact b\n\n## Topic Files\n\n- `history.md`.\n\n## Notes\n\n- a note\n",
			theirs: pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- fact t"), "- warn x", "- `history.md`."),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b", "- fact t", "", "### Unsorted: Notes", "", "- a note"), "- warn x", "- `history.md`.")},
		{name: "a section missing on one side: the repair's placeholder, the other side's bullet",
			base:   base,
			ours:   strings.Replace(base, "## Active Warnings\n\n- warn x\n\n", "", 1),
			theirs: strings.Replace(base, "- warn x\n", "- warn x\n- warn y\n", 1),
			want:   pmd(lns("- rule one", "- rule two"), lns("- fact a", "- fact b"), lns("- None yet.", "- warn y"), "- `history.md`.")},
		{name: "CRLF line ends on all sides stay CRLF",
			base:   crlf(base),
			ours:   crlf(strings.Replace(base, "- fact b\n", "- fact b\n- o\n", 1)),
			theirs: crlf(strings.Replace(base, "- warn x\n", "- warn x\n- t\n", 1)),
			want:   crlf(strings.Replace(strings.Replace(base, "- fact b\n", "- fact b\n- o\n", 1), "- warn x\n", "- warn x\n- t\n", 1))},
		{name: "one side turned LF into CRLF: the style is taken, the lines merge",
			base:   base,
			ours:   strings.Replace(base, "- fact b\n", "- fact b\n- o\n", 1),
			theirs: crlf(strings.Replace(base, "- warn x\n", "- warn x\n- t\n", 1)),
			want:   crlf(strings.Replace(strings.Replace(base, "- fact b\n", "- fact b\n- o\n", 1), "- warn x\n", "- warn x\n- t\n", 1))},
		{name: "no base (both sides created the file): a union",
			base:   "",
			ours:   pmd("- r1", "- a", "", ""),
			theirs: pmd("- r2", "- a", "- w", ""),
			want:   pmd(lns("- r1", "- r2"), "- a", "- w", "")},
		{name: "the placeholder replaced on both sides",
			base:   pmd("- None yet.", "- a", "", ""),
			ours:   pmd("- rule o", "- a", "", ""),
			theirs: pmd("- rule t", "- a", "", ""),
			want:   pmd(lns("- rule o", "- rule t"), "- a", "", "")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MergeProject("proj", []byte(c.base), []byte(c.ours), []byte(c.theirs))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("merge:\n%s\nwant:\n%s", got, c.want)
			}
			if r := InspectProject(got); !r.InTemplate {
				t.Errorf("result out of the template: %+v", r)
			}
			if strings.Contains(string(got), "<<<<<<<") || strings.Contains(string(got), ">>>>>>>") {
				t.Errorf("conflict markers in the result")
			}
		})
	}
}

func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// The caps are reported, never enforced by cutting: two sides that each add ten bullets to a
// file just under the line cap give a file over it by exactly what they added.
func TestMergeProjectMemoryMDOverCapNotCut(t *testing.T) {
	var facts []string
	for i := 0; len(facts) < ProjectMaxLines-15; i++ {
		facts = append(facts, fmt.Sprintf("- fact %d", i))
	}
	base := pmd("- r", lns(facts...), "", "")
	if InspectProject([]byte(base)).OverCap {
		t.Fatal("base over cap")
	}
	add := func(side string) string {
		var more []string
		for i := 0; i < 10; i++ {
			more = append(more, fmt.Sprintf("- %s %d", side, i))
		}
		return strings.Replace(base, "- r\n", "- r\n"+lns(more...)+"\n", 1)
	}
	got, err := MergeProject("proj", []byte(base), []byte(add("ours")), []byte(add("theirs")))
	if err != nil {
		t.Fatal(err)
	}
	r := InspectProject(got)
	if !r.OverCap || !r.InTemplate {
		t.Fatalf("want a result over the cap and in the template: %+v", r)
	}
	if baseLines := len(mdLines([]byte(base))); r.Lines != baseLines+20 {
		t.Fatalf("%d lines, want base %d + 20 added", r.Lines, baseLines)
	}
}

func TestMergeTopicFile(t *testing.T) {
	head := "# proj: history\n\n## 2026-11-30\n\n- shipped the parser\n"
	cases := []struct{ name, base, ours, theirs, want string }{
		{"both appended: ours first, then theirs", head,
			head + "\n- ours appended\n", head + "\n- theirs appended\n",
			head + "\n- ours appended\n\n- theirs appended\n"},
		{"both appended several lines", head,
			head + "- o1\n- o2\n", head + "- t1\n",
			head + "- o1\n- o2\n- t1\n"},
		{"one side removed a line, the other appended", head,
			strings.Replace(head, "- shipped the parser\n", "", 1), head + "- t1\n",
			strings.Replace(head, "- shipped the parser\n", "", 1) + "- t1\n"},
		{"both edited the same line differently: both kept", head,
			strings.Replace(head, "parser", "parser (ours)", 1), strings.Replace(head, "parser", "parser (theirs)", 1),
			strings.Replace(head, "- shipped the parser\n", "- shipped the parser (ours)\n- shipped the parser (theirs)\n", 1)},
		{"one side edited a line, the other appended", head,
			strings.Replace(head, "parser", "parser v2", 1), head + "- t1\n",
			strings.Replace(head, "parser", "parser v2", 1) + "- t1\n"},
		{"CRLF kept", crlf(head), crlf(head + "- o\n"), crlf(head + "- t\n"), crlf(head + "- o\n- t\n")},
		{"no final newline on both sides", "a", "a\nb", "a\nc", "a\nb\nc"},
		{"no base: both kept", "", "x\n", "y\n", "x\ny\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := MergeTopicFile([]byte(c.base), []byte(c.ours), []byte(c.theirs))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("merge:\n%q\nwant:\n%q", got, c.want)
			}
		})
	}
}

func TestMergeBadInput(t *testing.T) {
	good := []byte(pmd("- r", "- a", "", ""))
	latin1 := []byte(pmd("- r", "- caf\xe9", "", ""))
	if _, err := MergeProject("proj", good, latin1, good); !errors.Is(err, ErrMergeInput) ||
		!strings.Contains(err.Error(), "ours version is not valid UTF-8") {
		t.Fatalf("not UTF-8: %v", err)
	}
	if _, err := MergeProject("proj", good, good, []byte("a\x00b")); !errors.Is(err, ErrMergeInput) ||
		!strings.Contains(err.Error(), "theirs version holds a NUL byte") {
		t.Fatalf("binary: %v", err)
	}
	big := bytes.Repeat([]byte("- a line of the history log\n"), 5<<20/28)
	if _, err := MergeTopicFile([]byte("x\n"), append([]byte("x\n"), big...), []byte("x\ny\n")); !errors.Is(err, ErrMergeInput) ||
		!strings.Contains(err.Error(), "ours version is 5") {
		t.Fatalf("5 MB: %v", err)
	}
}

// FuzzMergeProjectMemoryMD: whatever three versions come in, the merge is in the template,
// holds every bullet either side added, and exceeds the larger of the base and the line cap
// by no more than what the two sides added.
func FuzzMergeProjectMemoryMD(f *testing.F) {
	base := pmd(lns("- rule one", "- rule two"), lns("- fact a", "", "### Build", "", "- b1"), "- warn x", "- `history.md`.")
	f.Add(base, strings.Replace(base, "- fact a\n", "- fact a\n- o\n", 1), strings.Replace(base, "- rule two\n", "", 1))
	f.Add(base, "## Notes\n- n\n## CRITICAL RULES\n- rule one\n", crlf(base))
	f.Add("", "# x\n## Topic Files\n## Topic Files\n- t\n", "### loose\n- y\n## Active Warnings\n")
	f.Add(base, strings.Replace(base, "- rule one\n- rule two\n", "", 1), strings.Replace(base, "- rule one", "- rule one!", 1))
	f.Fuzz(func(t *testing.T, b, o, th string) {
		got, err := MergeProject("proj", []byte(b), []byte(o), []byte(th))
		if err != nil {
			if errors.Is(err, ErrMergeInput) {
				return
			}
			t.Fatal(err)
		}
		if r := InspectProject(got); !r.InTemplate {
			t.Fatalf("out of the template: %+v\n%q", r, got)
		}
		rb, ro, rt := fuzzRepaired(b, true), fuzzRepaired(o, false), fuzzRepaired(th, false)
		// A line's trailing "\r"s beyond its line end are compared trimmed: "* 0\r" written
		// with an LF reads back as a CRLF line "* 0", the same bytes (testdata's 2dcb2c5f).
		have := map[string]bool{}
		for _, l := range splitMergeText(got).lines {
			have[strings.TrimRight(l, "\r")] = true
		}
		inBase := map[string]bool{}
		for _, l := range rb {
			inBase[l] = true
		}
		added := 0
		for _, side := range [][]string{ro, rt} {
			added += len(side) - countKept(rb, side)
			for _, l := range side {
				if isRule(l) && !inBase[l] && !have[strings.TrimRight(l, "\r")] {
					t.Fatalf("added bullet %q lost:\n%q", l, got)
				}
			}
		}
		if n := len(splitMergeText(got).lines); n > max(len(rb), ProjectMaxLines-1)+added+2 {
			t.Fatalf("%d lines: base %d, added %d", n, len(rb), added)
		}
	})
}

func fuzzRepaired(s string, isBase bool) []string {
	return templatedLines(splitMergeText([]byte(s)), "proj", isBase)
}

func countKept(base, side []string) int {
	n := 0
	for _, j := range matchLines(base, side) {
		if j >= 0 {
			n++
		}
	}
	return n
}

// TestMergeProjectMemoryMDRandomEdits plays random edits of a writer on both sides of one
// base (bullets added, removed, changed, subsections added, a section repeated or left out,
// CRLF) and checks the properties of FuzzMergeProjectMemoryMD on structured input.
func TestMergeProjectMemoryMDRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 3))
	for iter := 0; iter < 400; iter++ {
		base := randomDoc(rng)
		ours, theirs := randomEdit(rng, base, "o"), randomEdit(rng, base, "t")
		got, err := MergeProject("proj", []byte(base), []byte(ours), []byte(theirs))
		if err != nil {
			t.Fatal(err)
		}
		if r := InspectProject(got); !r.InTemplate {
			t.Fatalf("iter %d: out of the template\nbase:\n%s\nours:\n%s\ntheirs:\n%s\ngot:\n%s", iter, base, ours, theirs, got)
		}
		have := map[string]int{}
		for _, l := range splitMergeText(got).lines {
			have[l]++
		}
		for _, side := range []string{ours, theirs} {
			for _, l := range splitMergeText([]byte(side)).lines {
				if isRule(l) && !strings.Contains(base, l+"\n") && have[l] == 0 {
					t.Fatalf("iter %d: added bullet %q lost\nbase:\n%s\nours:\n%s\ntheirs:\n%s\ngot:\n%s", iter, l, base, ours, theirs, got)
				}
			}
		}
		// CRITICAL RULES is never emptied while both sides hold a rule.
		crit := func(doc []byte) int {
			return parseTemplated(templatedLines(splitMergeText(doc), "proj", false)).secs[0].rules()
		}
		if crit([]byte(ours)) > 0 && crit([]byte(theirs)) > 0 && crit(got) == 0 {
			t.Fatalf("iter %d: CRITICAL RULES emptied\nours:\n%s\ntheirs:\n%s\ngot:\n%s", iter, ours, theirs, got)
		}
		// Bullets are unique in these docs: each added one is present once.
		for l, n := range have {
			if isRule(l) && n > 1 {
				t.Fatalf("iter %d: %q %d times\ngot:\n%s", iter, l, n, got)
			}
		}
	}
}

func randomDoc(rng *rand.Rand) string {
	var secs [4][]string
	for i := range secs {
		for j := rng.IntN(4); j > 0; j-- {
			secs[i] = append(secs[i], fmt.Sprintf("- base %d.%d", i, j))
		}
		if i == 1 && rng.IntN(2) == 0 {
			secs[i] = append(secs[i], "", "### Sub", "", "- base sub")
		}
	}
	return pmd(lns(secs[0]...), lns(secs[1]...), lns(secs[2]...), lns(secs[3]...))
}

var editSeq int

func randomEdit(rng *rand.Rand, doc, side string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for n := 1 + rng.IntN(4); n > 0; n-- {
		editSeq++
		var bullets []int
		for i, l := range lines {
			if isRule(l) {
				bullets = append(bullets, i)
			}
		}
		switch op := rng.IntN(7); {
		case op <= 2: // add a bullet after a heading or a bullet
			var at []int
			for i, l := range lines {
				if strings.HasPrefix(l, "## ") || strings.HasPrefix(l, "### ") || isRule(l) {
					at = append(at, i)
				}
			}
			i := at[rng.IntN(len(at))] + 1
			lines = append(lines[:i], append([]string{fmt.Sprintf("- %s added %d", side, editSeq)}, lines[i:]...)...)
		case op == 3 && len(bullets) > 0: // remove
			i := bullets[rng.IntN(len(bullets))]
			lines = append(lines[:i], lines[i+1:]...)
		case op == 4 && len(bullets) > 0: // change
			i := bullets[rng.IntN(len(bullets))]
			lines[i] = fmt.Sprintf("%s (%s edit %d)", lines[i], side, editSeq)
		case op == 5: // a new subsection at the end of Active Warnings or an extra section
			if rng.IntN(2) == 0 {
				lines = append(lines, "", "## Extra "+side, "", fmt.Sprintf("- %s extra %d", side, editSeq))
			} else {
				for i, l := range lines {
					if l == "## Topic Files" {
						sub := []string{"### New " + side, "", fmt.Sprintf("- %s sub %d", side, editSeq), ""}
						lines = append(lines[:i], append(sub, lines[i:]...)...)
						break
					}
				}
			}
		case op == 6: // a repeated section
			lines = append(lines, "", "## CRITICAL RULES", "", fmt.Sprintf("- %s repeated %d", side, editSeq))
		}
	}
	out := strings.Join(lines, "\n") + "\n"
	if rng.IntN(8) == 0 {
		out = crlf(out)
	}
	return out
}

// FuzzMergeTopicFile: every line either side added to a topic file is in the merge, and a
// line both sides kept as it was is there too.
func FuzzMergeTopicFile(f *testing.F) {
	head := "# proj: history\n\n- one\n- two\n"
	f.Add(head, head+"\n- ours\n", head+"\n- theirs\n")
	f.Add(head, strings.Replace(head, "- one\n", "", 1), crlf(head+"- t\n"))
	f.Add("", "a\nb", "b\nc\n")
	f.Fuzz(func(t *testing.T, b, o, th string) {
		got, err := MergeTopicFile([]byte(b), []byte(o), []byte(th))
		if err != nil {
			if errors.Is(err, ErrMergeInput) {
				return
			}
			t.Fatal(err)
		}
		bl, ol, tl := splitMergeText([]byte(b)).lines, splitMergeText([]byte(o)).lines, splitMergeText([]byte(th)).lines
		// A line's trailing "\r"s beyond its line end are compared trimmed: "* 0\r" written
		// with an LF reads back as a CRLF line "* 0", the same bytes (testdata's 2dcb2c5f).
		have := map[string]bool{}
		for _, l := range splitMergeText(got).lines {
			have[strings.TrimRight(l, "\r")] = true
		}
		inBase := map[string]bool{}
		for _, l := range bl {
			inBase[l] = true
		}
		inOurs, inTheirs := map[string]bool{}, map[string]bool{}
		for _, l := range ol {
			inOurs[l] = true
		}
		for _, l := range tl {
			inTheirs[l] = true
		}
		for _, side := range [][]string{ol, tl} {
			for _, l := range side {
				if !inBase[l] && !have[strings.TrimRight(l, "\r")] && strings.TrimSpace(l) != "" {
					t.Fatalf("added line %q lost: %q", l, got)
				}
			}
		}
		for _, l := range bl {
			if inOurs[l] && inTheirs[l] && strings.TrimSpace(l) != "" && !have[strings.TrimRight(l, "\r")] {
				// Kept on both sides (as a line somewhere): a merge drops it only where one
				// side removed that copy, so some copy stays unless both removed one each.
				if strings.Count(b, l) == 1 && strings.Count(o, l) >= 1 && strings.Count(th, l) >= 1 {
					t.Fatalf("line %q both sides kept is lost: %q", l, got)
				}
			}
		}
	})
}

// BenchmarkMergeProjectMemoryMD: a MEMORY.md at the soft cap, both sides adding to two
// sections and editing one bullet.
func BenchmarkMergeProjectMemoryMD(b *testing.B) {
	var facts []string
	for i := 0; i < ProjectSoftLines-20; i++ {
		facts = append(facts, fmt.Sprintf("- fact %d: %s", i, strings.Repeat("detail ", 20)))
	}
	base := pmd("- rule one\n- rule two", lns(facts...), "- warn", "- `history.md`.")
	ours := strings.Replace(strings.Replace(base, "- fact 10:", "- fact 10 (ours):", 1), "- warn\n", "- warn\n- ours\n", 1)
	theirs := strings.Replace(strings.Replace(base, "- fact 10:", "- fact 10 (theirs):", 1), "- rule two\n", "- rule two\n- theirs\n", 1)
	b.SetBytes(int64(len(base)))
	for b.Loop() {
		if _, err := MergeProject("proj", []byte(base), []byte(ours), []byte(theirs)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMergeTopicFile: a 1 MiB history.md both sides appended an entry to.
func BenchmarkMergeTopicFile(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < MaxStructuredMergeBytes-4096; i++ {
		fmt.Fprintf(&sb, "\n- session %d: %s\n", i, strings.Repeat("did things ", 5))
	}
	base := sb.String()
	ours, theirs := base+"\n- ours: today\n", base+"\n- theirs: today\n"
	b.SetBytes(int64(len(base)))
	for b.Loop() {
		if _, err := MergeTopicFile([]byte(base), []byte(ours), []byte(theirs)); err != nil {
			b.Fatal(err)
		}
	}
}
