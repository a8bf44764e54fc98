package memorymd

// Three-way merges of the project-memory layout (docs/FORMATS.md §3B, docs/ARCHITECTURE.md §4): a project-kind
// MEMORY.md merges by section, `### ` subsection and line; its topic files (history.md, …)
// merge by line. Both keep what either side added (ours first), apply a removal or a change
// made on one side only, and keep both versions where both sides changed the same lines,
// so no conflict copy and no conflict marker is ever needed. The rules are in
// docs/PROJECT_MEMORY_MERGE.md.

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/textsafe"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// ErrMergeInput is wrapped when one version cannot be merged by structure (not UTF-8,
// binary, over MaxStructuredMergeBytes). The caller keeps a conflict copy instead, so
// nothing is lost.
var ErrMergeInput = errors.New("cannot merge by structure")

// MaxStructuredMergeBytes bounds each version a structured merge reads. A MEMORY.md is
// capped at 50,000 characters and a topic file is a log a person reads; a file beyond a
// MiB is not one of them, and a line diff of two such files costs more than it is worth.
const MaxStructuredMergeBytes = 1 << 20

// FailedReplyName is the memory-save mod's copy of the last fork reply it could not read
// (seed 003), kept beside a project MEMORY.md. Like PreMigrationName it is derived: a merge
// takes the newer version.
const FailedReplyName = "memory-save.failed-reply.txt"

// IsProjectLayoutDerived reports whether a path is a derived file of the project-memory
// layout (the repair backup, the mod's failed reply): a merge takes the newer version.
func IsProjectLayoutDerived(p string) bool {
	b := path.Base(p)
	return b == PreMigrationName || b == FailedReplyName
}

// IsTopicFileName reports whether a file beside a project MEMORY.md is one of its topic
// files: every other `*.md` but the repair backup (the seed's own rule for the topic list).
func IsTopicFileName(base string) bool {
	return strings.HasSuffix(base, ".md") && base != memd.MemoryMDName && base != PreMigrationName
}

// ProjectNameOf names the project of a project MEMORY.md by its directory (the seed keeps
// `<project>/MEMORY.md`); a MEMORY.md at the repo root is "memory".
func ProjectNameOf(mdPath string) string {
	p := path.Base(path.Dir(mdPath))
	if p == "." || p == "/" || p == "" {
		return "memory"
	}
	return p
}

// checkMergeInput refuses a version a structured merge cannot read, naming the side.
func checkMergeInput(side string, b []byte) error {
	if len(b) > MaxStructuredMergeBytes {
		return fmt.Errorf("%w: %s is %d bytes, over the %d-byte limit of a structured merge", ErrMergeInput, side, len(b), MaxStructuredMergeBytes)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return fmt.Errorf("%w: %s holds a NUL byte at offset %d (binary)", ErrMergeInput, side, i)
	}
	if !utf8.Valid(b) {
		return fmt.Errorf("%w: %s is not valid UTF-8 (byte offset %d)", ErrMergeInput, side, textsafe.InvalidUTF8At(b))
	}
	return nil
}

func checkMergeInputs(base, ours, theirs []byte) error {
	for _, s := range []struct {
		name string
		b    []byte
	}{{"base", base}, {"ours", ours}, {"theirs", theirs}} {
		if err := checkMergeInput(s.name+" version", s.b); err != nil {
			return err
		}
	}
	return nil
}

// mergeText is a version split into lines with its line ends taken off, so a side that
// changed CRLF to LF (or back) does not look like a change of every line.
type mergeText struct {
	lines   []string
	crlf    bool // most lines ended in "\r\n"
	finalNL bool // the text ends in a newline (or is empty)
}

func splitMergeText(b []byte) mergeText {
	t := mergeText{finalNL: len(b) == 0 || b[len(b)-1] == '\n'}
	t.lines = mdLines(b)
	cr := 0
	for i, l := range t.lines {
		if strings.HasSuffix(l, "\r") {
			cr++
			t.lines[i] = l[:len(l)-1]
		}
	}
	t.crlf = len(t.lines) > 0 && cr*2 > len(t.lines)
	return t
}

// pick3 is the three-way rule for one value: ours when ours changed it, else theirs.
func pick3[T comparable](base, ours, theirs T) T {
	if ours == base {
		return theirs
	}
	return ours
}

// renderMergeText joins merged lines in the line-end style and final newline the merge
// chose (each three-way: a one-sided change of style is taken).
func renderMergeText(lines []string, b, o, t mergeText, baseAbsent bool) []byte {
	if baseAbsent {
		b = o
	}
	crlf := pick3(b.crlf, o.crlf, t.crlf)
	final := pick3(b.finalNL, o.finalNL, t.finalNL)
	if len(lines) == 0 {
		return []byte{}
	}
	nl := "\n"
	if crlf {
		nl = "\r\n"
	}
	var buf strings.Builder
	for i, l := range lines {
		if i > 0 {
			buf.WriteString(nl)
		}
		buf.WriteString(l)
	}
	if final {
		buf.WriteString(nl)
	}
	return []byte(buf.String())
}

// lineDiffTimeout bounds go-diff on large inputs only; below lineDiffExact lines a diff is
// exact (and so deterministic), above it a slow diff may come back less minimal, which a
// merge survives (it keeps both sides where it cannot tell).
const (
	lineDiffExact   = 20000
	lineDiffTimeout = 2 * time.Second
)

// matchLines returns, for each base line, the index of the side line a longest common
// subsequence keeps it as, or -1 when the side removed (or changed) it.
func matchLines(base, side []string) []int {
	m := make([]int, len(base))
	for i := range m {
		m[i] = -1
	}
	// The common head and tail match as they are (a log that was only appended to is all
	// head); only the middle goes to the diff.
	pre := 0
	for pre < len(base) && pre < len(side) && base[pre] == side[pre] {
		m[pre] = pre
		pre++
	}
	suf := 0
	for suf < len(base)-pre && suf < len(side)-pre && base[len(base)-1-suf] == side[len(side)-1-suf] {
		m[len(base)-1-suf] = len(side) - 1 - suf
		suf++
	}
	base, side = base[pre:len(base)-suf], side[pre:len(side)-suf]
	if len(base) == 0 || len(side) == 0 {
		return m
	}
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = 0
	if len(base)+len(side) > lineDiffExact {
		dmp.DiffTimeout = lineDiffTimeout
	}
	join := func(ls []string) string {
		var b strings.Builder
		for _, l := range ls {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		return b.String()
	}
	r1, r2, _ := dmp.DiffLinesToRunes(join(base), join(side))
	i, j := 0, 0
	for _, d := range dmp.DiffMainRunes(r1, r2, false) {
		n := utf8.RuneCountInString(d.Text) // one rune per line
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			for k := 0; k < n; k++ {
				m[pre+i+k] = pre + j + k
			}
			i, j = i+n, j+n
		case diffmatchpatch.DiffDelete:
			i += n
		case diffmatchpatch.DiffInsert:
			j += n
		}
	}
	return m
}

// mergeLines is the line-level three-way merge every part of the layout uses. Lines kept
// by both sides anchor the merge; between two anchors:
//   - only one side changed the stretch: that side's lines (an addition, a removal or a
//     change on one side is taken);
//   - both changed it the same way: once;
//   - both changed it differently: ours' new lines, then theirs' new lines not already
//     among ours' (blank lines always kept); a base line one side kept and the other
//     removed is removed, a line one side removed and the other changed comes back as the
//     change. Nothing marks the spot: both versions are simply kept, one after the other.
func mergeLines(base, ours, theirs []string) []string {
	return mergeLinesSep(base, ours, theirs, false)
}

// mergeLinesSep is mergeLines; with sep, ours' and theirs' entries appended at one place
// (after a blank line) are kept apart by one, as a log writer would have written them.
func mergeLinesSep(base, ours, theirs []string, sep bool) []string {
	mo, mt := matchLines(base, ours), matchLines(base, theirs)
	oKept := make([]bool, len(ours))
	for _, j := range mo {
		if j >= 0 {
			oKept[j] = true
		}
	}
	tKept := make([]bool, len(theirs))
	for _, j := range mt {
		if j >= 0 {
			tKept[j] = true
		}
	}
	out := make([]string, 0, max(len(ours), len(theirs)))
	i, a, c := 0, 0, 0
	for {
		for i < len(base) && mo[i] == a && mt[i] == c {
			out = append(out, base[i])
			i, a, c = i+1, a+1, c+1
		}
		j := i
		for j < len(base) && (mo[j] < 0 || mt[j] < 0) {
			j++
		}
		ea, ec := len(ours), len(theirs)
		if j < len(base) {
			ea, ec = mo[j], mt[j]
		}
		if i == j && a == ea && c == ec {
			break
		}
		out = append(out, resolveStretch(base[i:j], ours[a:ea], theirs[c:ec], oKept[a:ea], tKept[c:ec], sep)...)
		i, a, c = j, ea, ec
	}
	return out
}

func resolveStretch(b, o, t []string, oKept, tKept []bool, sep bool) []string {
	switch {
	case slices.Equal(o, b):
		return t
	case slices.Equal(t, b), slices.Equal(o, t):
		return o
	}
	var on, tn []string // each side's new lines in the stretch
	added := map[string]int{}
	for k, l := range o {
		if oKept[k] {
			continue // ours left it as it was, theirs removed it
		}
		on = append(on, l)
		if strings.TrimSpace(l) != "" {
			added[l]++
		}
	}
	for k, l := range t {
		if tKept[k] {
			continue // theirs left it, ours removed it
		}
		tn = append(tn, l)
	}
	// Lines both sides start or end their new lines with (the blank line before an
	// appended entry, a shared heading) are written once, as git refines a conflict.
	pre := 0
	for pre < len(on) && pre < len(tn) && on[pre] == tn[pre] {
		pre++
	}
	suf := 0
	for suf < len(on)-pre && suf < len(tn)-pre && on[len(on)-1-suf] == tn[len(tn)-1-suf] {
		suf++
	}
	out := append([]string(nil), on...)
	mid := tn[pre : len(tn)-suf]
	var theirs []string
	for _, l := range mid {
		if strings.TrimSpace(l) != "" && added[l] > 0 {
			added[l]-- // both added this line: once
			continue
		}
		theirs = append(theirs, l)
	}
	if len(theirs) == 0 {
		return out
	}
	// In a log each entry follows a blank line: theirs' entry gets its own.
	if sep && pre > 0 && strings.TrimSpace(on[pre-1]) == "" && len(on)-suf > pre &&
		strings.TrimSpace(on[len(on)-suf-1]) != "" && strings.TrimSpace(theirs[0]) != "" {
		theirs = append([]string{""}, theirs...)
	}
	at := len(on) - suf
	return append(append(out[:at:at], theirs...), on[at:]...)
}

// MergeTopicFile merges a topic file of a project memory (history.md, …), an append-mostly
// log, line by line (mergeLines): both sides' added lines kept, ours first; a removal on
// one side applied; a line both sides edited differently kept in both versions. A version
// that is not UTF-8 text or is over MaxStructuredMergeBytes is refused with ErrMergeInput.
// A nil base (both sides added the file) keeps both.
func MergeTopicFile(base, ours, theirs []byte) ([]byte, error) {
	if err := checkMergeInputs(base, ours, theirs); err != nil {
		return nil, err
	}
	b, o, t := splitMergeText(base), splitMergeText(ours), splitMergeText(theirs)
	return renderMergeText(mergeLinesSep(b.lines, o.lines, t.lines, true), b, o, t, len(base) == 0), nil
}

// ---- MEMORY.md of the project kind ----

// mdSub is one `### ` subsection: its heading line, its key (the heading's name, folded,
// with its occurrence number, so a repeated heading keeps its own identity) and its lines.
type mdSub struct {
	heading, key string
	body         []string
}

// mdSec is one of the four sections: its `## ` line, the lines before its first `### `,
// and its subsections.
type mdSec struct {
	heading string
	pre     []string
	subs    []mdSub
}

type mdDoc struct {
	title []string // lines before the first section
	secs  [4]mdSec
}

// parseTemplated splits a file already in the template (its only `## ` lines are the four
// sections, in order).
func parseTemplated(lines []string) mdDoc {
	var d mdDoc
	cur := -1
	seen := [4]map[string]int{}
	for _, l := range lines {
		switch {
		case isHeadingLine(l):
			cur = mdSectionIndex(canonicalSection(headingName(l)))
			d.secs[cur].heading = l
		case cur < 0:
			d.title = append(d.title, l)
		case strings.HasPrefix(l, "### "):
			if seen[cur] == nil {
				seen[cur] = map[string]int{}
			}
			name := strings.ToLower(strings.TrimSpace(l[4:]))
			key := fmt.Sprintf("k%d:%s", seen[cur][name], name)
			seen[cur][name]++
			d.secs[cur].subs = append(d.secs[cur].subs, mdSub{heading: l, key: key})
		default:
			s := &d.secs[cur]
			if n := len(s.subs); n > 0 {
				s.subs[n-1].body = append(s.subs[n-1].body, l)
			} else {
				s.pre = append(s.pre, l)
			}
		}
	}
	return d
}

func (d mdDoc) lines() []string {
	out := append([]string(nil), d.title...)
	for _, s := range d.secs {
		out = append(out, s.heading)
		out = append(out, s.pre...)
		for _, sub := range s.subs {
			out = append(out, sub.heading)
			out = append(out, sub.body...)
		}
	}
	return out
}

// templated returns a version's lines put into the template (RepairProject: no line
// lost), line ends taken off. An empty base stays empty: nothing was there to keep.
func templatedLines(t mergeText, project string, isBase bool) []string {
	if isBase && len(t.lines) == 0 {
		return nil
	}
	data := []byte(strings.Join(t.lines, "\n") + "\n")
	return mdLines(RepairProject(data, project))
}

// isRule is a bullet that holds something: `- None yet.` is the template's placeholder.
func isRule(l string) bool {
	return (strings.HasPrefix(l, "- ") || strings.HasPrefix(l, "* ")) && strings.TrimSpace(l) != emptySection
}

func withoutRules(s mdSec) mdSec {
	keep := func(ls []string) []string {
		var out []string
		for _, l := range ls {
			if !isRule(l) {
				out = append(out, l)
			}
		}
		return out
	}
	out := mdSec{heading: s.heading, pre: keep(s.pre)}
	for _, sub := range s.subs {
		out.subs = append(out.subs, mdSub{heading: sub.heading, key: sub.key, body: keep(sub.body)})
	}
	return out
}

func (s mdSec) rules() int {
	n := 0
	for _, l := range s.pre {
		if isRule(l) {
			n++
		}
	}
	for _, sub := range s.subs {
		for _, l := range sub.body {
			if isRule(l) {
				n++
			}
		}
	}
	return n
}

// mergeSubs merges the subsections of one section. Their keys (headings) merge like lines
// (mergeLines: an addition kept, ours first; a one-sided removal applied), except that a
// subsection one side removed and the other changed stays, with the changed lines: the
// removing side is taken to have kept it where it was. A subsection on both sides merges
// its lines with mergeLines.
func mergeSubs(b, o, t []mdSub) []mdSub {
	index := func(subs []mdSub) map[string]mdSub {
		m := make(map[string]mdSub, len(subs))
		for _, s := range subs {
			m[s.key] = s
		}
		return m
	}
	bm, om, tm := index(b), index(o), index(t)
	changed := func(s mdSub) bool {
		bs, ok := bm[s.key]
		return !ok || bs.heading != s.heading || !slices.Equal(bs.body, s.body)
	}
	bk := make([]string, len(b))
	for i, s := range b {
		bk[i] = s.key
	}
	ok, tk := keptKeys(b, o, tm, changed), keptKeys(b, t, om, changed)
	var out []mdSub
	done := map[string]bool{}
	for _, key := range mergeLines(bk, ok, tk) {
		if done[key] {
			continue
		}
		done[key] = true
		osub, inO := om[key]
		tsub, inT := tm[key]
		bs := bm[key] // zero when both added it
		switch {
		case inO && inT:
			out = append(out, mdSub{heading: pick3(bs.heading, osub.heading, tsub.heading), key: key,
				body: mergeLines(bs.body, osub.body, tsub.body)})
		case inO:
			out = append(out, osub)
		case inT:
			out = append(out, tsub)
		}
	}
	return out
}

// keptKeys is a side's subsection keys, with each base subsection the side removed but the
// other side (other) changed put back after the base subsection before it, so the key merge
// keeps it.
func keptKeys(base, side []mdSub, other map[string]mdSub, changed func(mdSub) bool) []string {
	has := make(map[string]bool, len(side))
	for _, s := range side {
		has[s.key] = true
	}
	keys := make([]string, 0, len(side))
	for _, s := range side {
		keys = append(keys, s.key)
	}
	prev := "" // the last base key the side still has
	for _, bs := range base {
		if has[bs.key] {
			prev = bs.key
			continue
		}
		if o, ok := other[bs.key]; !ok || !changed(o) {
			continue
		}
		at := 0
		if prev != "" {
			for i, k := range keys {
				if k == prev {
					at = i + 1
					break
				}
			}
		}
		keys = append(keys[:at], append([]string{bs.key}, keys[at:]...)...)
		prev = bs.key
	}
	return keys
}

func mergeSec(b, o, t mdSec) mdSec {
	return mdSec{
		heading: pick3(b.heading, o.heading, t.heading),
		pre:     mergeLines(b.pre, o.pre, t.pre),
		subs:    mergeSubs(b.subs, o.subs, t.subs),
	}
}

// MergeProject merges a project-kind MEMORY.md (docs/FORMATS.md §3B) that changed on both
// sides. Each version is first put into the template (RepairProject, so a side out of
// the template, with a repeated, missing or extra section, merges like the others; project
// names the title of a version that has none). Then:
//   - the title and the four sections, in order, each merged on its own; inside a section
//     the lines before its first `### ` merge line by line (mergeLines: a bullet added on
//     either side kept, ours first; a one-sided removal or change taken; a bullet both
//     changed differently kept in both versions, ours first, with nothing marking them),
//     and its `### ` subsections merge as items by heading the same way (mergeSubs);
//   - `## CRITICAL RULES` is never emptied by a merge: when the merged section holds no rule
//     while each side still holds one, every rule either side kept stays (the section is
//     merged again against a base without its rules).
//
// The result is always in the template. It is never cut to fit the caps: it holds no line
// that is not in base or added by one side, so it exceeds a cap by at most what the two
// sides added; the caller reports a result over a cap (InspectProject). Line ends
// (CRLF or LF) and the final newline follow the side that changed them. A version that is
// not UTF-8 text or is over MaxStructuredMergeBytes is refused with ErrMergeInput.
func MergeProject(project string, base, ours, theirs []byte) ([]byte, error) {
	if err := checkMergeInputs(base, ours, theirs); err != nil {
		return nil, err
	}
	b, o, t := splitMergeText(base), splitMergeText(ours), splitMergeText(theirs)
	bd := parseTemplated(templatedLines(b, project, true))
	od := parseTemplated(templatedLines(o, project, false))
	td := parseTemplated(templatedLines(t, project, false))
	var m mdDoc
	m.title = mergeLines(bd.title, od.title, td.title)
	for i := range m.secs {
		m.secs[i] = mergeSec(bd.secs[i], od.secs[i], td.secs[i])
	}
	if crit := &m.secs[0]; crit.rules() == 0 && od.secs[0].rules() > 0 && td.secs[0].rules() > 0 {
		// Each side still has rules, but their removals together would empty the section:
		// merge again against a base without its rules, so every rule either side kept
		// stays. (A side that emptied it alone retired its last rule on purpose.)
		*crit = mergeSec(withoutRules(bd.secs[0]), od.secs[0], td.secs[0])
	}
	return renderMergeText(m.lines(), b, o, t, len(base) == 0), nil
}
