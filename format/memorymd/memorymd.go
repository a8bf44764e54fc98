package memorymd

// MEMORY.md comes in two kinds (docs/FORMATS.md §3): the index a memory writer keeps at the vault
// root (one `- [[path|name]] · type:T subject:S · description` bullet a line), and the
// per-project memory in a fixed four-section template. memd reads both, repairs only the
// project kind into its template, repoints index bullets after an archive move and merges
// index files on sync. Nothing here ever drops a line.

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf16"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/textsafe"
)

// Kind says which of the two MEMORY.md kinds a file is.
type Kind int

const (
	// KindUnknown: neither kind can be told with confidence; memd leaves such a file alone.
	KindUnknown Kind = iota
	// KindIndex: the writer's index of `- [[path|name]] · …` bullets.
	KindIndex
	// KindProject: a per-project memory in (or meant for) the four-section template.
	KindProject
)

func (k Kind) String() string {
	switch k {
	case KindIndex:
		return "index"
	case KindProject:
		return "project"
	default:
		return "unknown"
	}
}

// Detect decides the kind from the content alone:
//   - index: at least one `- [[` bullet line (the index reader's own test) and no `## `
//     heading naming one of the four project sections; or no bullet yet but the writer's
//     `# MEMORY` header and no `## ` heading at all (a fresh, empty index);
//   - project: at least one `## ` heading naming one of the four sections (any case) and no
//     `- [[` bullet line;
//   - unknown otherwise: both signs at once, or neither (e.g. `## Notes` only, empty file).
//
// Unknown is the safe answer: the template is applied only to a project-kind file, so a
// file that might be an index is never restructured.
func Detect(data []byte) Kind {
	bullets, sections, headings := 0, 0, 0
	firstLine := ""
	for _, l := range mdLines(data) {
		if firstLine == "" && strings.TrimSpace(l) != "" {
			firstLine = strings.TrimSpace(l)
		}
		switch {
		case strings.HasPrefix(l, "- [["):
			bullets++
		case isHeadingLine(l):
			headings++
			if canonicalSection(headingName(l)) != "" {
				sections++
			}
		}
	}
	switch {
	case bullets > 0 && sections == 0:
		return KindIndex
	case sections > 0 && bullets == 0:
		return KindProject
	case bullets == 0 && headings == 0 && firstLine == "# MEMORY":
		return KindIndex
	}
	return KindUnknown
}

// ---- the project kind ----

// ProjectSections are the four sections of a project MEMORY.md, in their order.
var ProjectSections = []string{"CRITICAL RULES", "Architecture & Config Facts", "Active Warnings", "Topic Files"}

// Caps of a project MEMORY.md. A file must stay under ProjectMaxLines lines and
// ProjectMaxChars characters; the soft caps are where the writer starts offloading; a bullet
// over ProjectMaxBulletChars characters is too long. memd measures and reports them, never
// cuts a file to fit.
const (
	ProjectMaxLines       = 200
	ProjectMaxChars       = 50000
	ProjectSoftLines      = 160
	ProjectSoftChars      = 42000
	ProjectMaxBulletChars = 600
)

// PreMigrationName is the copy of a project MEMORY.md kept beside it before a repair.
const PreMigrationName = "MEMORY.pre-migration.md"

const (
	emptySection  = "- None yet."
	unsortedHome  = "Architecture & Config Facts"
	unsortedTitle = "### Unsorted: "
)

// ProjectReport is what InspectProject measures. Chars counts UTF-16 code units, as the
// writer (a JS mod) measures its caps, so memd and the writer agree on the same file.
type ProjectReport struct {
	Lines, Chars int
	// Sections are the `## ` headings as written (trimmed), in file order.
	Sections []string
	// Missing are template sections the file lacks; Extra are headings outside the template;
	// Duplicated are template sections that appear more than once (canonical names).
	Missing, Extra, Duplicated []string
	// OutOfOrder: the template sections present are not in template order.
	OutOfOrder bool
	// InTemplate: exactly the four sections, in order, and no other `## ` heading.
	InTemplate bool
	// OverSoftCap / OverCap: at or over a soft / hard cap (lines or characters).
	OverSoftCap, OverCap bool
	// LongBullets are the 1-based line numbers of `- ` bullets over ProjectMaxBulletChars.
	LongBullets []int
}

// mdLines splits text into lines the way the writer does: one final newline dropped, then
// split at "\n" (a "\r" stays part of its line).
func mdLines(data []byte) []string {
	if len(data) == 0 {
		return nil
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.Split(s, "\n")
}

func isHeadingLine(l string) bool { return strings.HasPrefix(l, "## ") }

func headingName(l string) string { return strings.TrimSpace(l[3:]) }

// canonicalSection returns the template section a heading names (any case), or "".
func canonicalSection(name string) string {
	for _, s := range ProjectSections {
		if strings.EqualFold(s, name) {
			return s
		}
	}
	return ""
}

// mdJSLength is the length JS's String.length gives: UTF-16 code units (an invalid byte
// counts as one U+FFFD).
func mdJSLength(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func mdHeadings(lines []string) []string {
	var hs []string
	for _, l := range lines {
		if isHeadingLine(l) {
			hs = append(hs, headingName(l))
		}
	}
	return hs
}

func mdInTemplate(headings []string) bool {
	if len(headings) != len(ProjectSections) {
		return false
	}
	for i, s := range ProjectSections {
		if !strings.EqualFold(s, headings[i]) {
			return false
		}
	}
	return true
}

// InspectProject measures a project MEMORY.md against its template and caps.
func InspectProject(data []byte) ProjectReport {
	lines := mdLines(data)
	rep := ProjectReport{Lines: len(lines), Chars: mdJSLength(string(data))}
	count := map[string]int{}
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "- ") && mdJSLength(l) > ProjectMaxBulletChars {
			rep.LongBullets = append(rep.LongBullets, i+1)
		}
		if !isHeadingLine(l) {
			continue
		}
		name := headingName(l)
		rep.Sections = append(rep.Sections, name)
		c := canonicalSection(name)
		if c == "" {
			rep.Extra = append(rep.Extra, name)
			continue
		}
		count[c]++
		if count[c] == 2 {
			rep.Duplicated = append(rep.Duplicated, c)
		}
		if count[c] == 1 {
			idx := mdSectionIndex(c)
			if idx < last {
				rep.OutOfOrder = true
			}
			last = idx
		}
	}
	for _, s := range ProjectSections {
		if count[s] == 0 {
			rep.Missing = append(rep.Missing, s)
		}
	}
	rep.InTemplate = mdInTemplate(rep.Sections)
	rep.OverSoftCap = rep.Lines >= ProjectSoftLines || rep.Chars >= ProjectSoftChars
	rep.OverCap = rep.Lines >= ProjectMaxLines || rep.Chars >= ProjectMaxChars
	return rep
}

func mdSectionIndex(canonical string) int {
	for i, s := range ProjectSections {
		if s == canonical {
			return i
		}
	}
	return -1
}

func mdTrimBlank(lines []string) []string {
	start, end := 0, len(lines)
	for start < end && strings.TrimSpace(lines[start]) == "" {
		start++
	}
	for end > start && strings.TrimSpace(lines[end-1]) == "" {
		end--
	}
	return lines[start:end]
}

// RepairProject puts a project MEMORY.md into the template (docs/FORMATS.md §3B) without losing a
// line: the four sections in order; a repeated section merged into one (bodies in file
// order, a blank line between); a missing one added holding `- None yet.`; every other
// `## X` section moved, in file order, to the end of `Architecture & Config Facts` under a
// `### Unsorted: X` line; text before the first section kept as the title, or `# <project>`
// when there is none. Only blank lines at the edges of a block are dropped.
//
// A file already in the template is returned unchanged (the writer repairs only such
// files too), which also makes the repair idempotent: its output is always in the template.
// The caller keeps the old file as PreMigrationName (sleep's tidy does).
func RepairProject(data []byte, project string) []byte {
	lines := mdLines(data)
	if mdInTemplate(mdHeadings(lines)) {
		return append([]byte(nil), data...)
	}
	// Each `## ` heading opens a block; blocks of one section are merged later.
	var head []string
	blocks := map[string][][]string{}
	var unsorted [][]string
	var cur *[]string // where the next line goes; nil before the first heading
	for _, l := range lines {
		if !isHeadingLine(l) {
			if cur == nil {
				head = append(head, l)
			} else {
				*cur = append(*cur, l)
			}
			continue
		}
		name := headingName(l)
		if c := canonicalSection(name); c != "" {
			blocks[c] = append(blocks[c], nil)
			cur = &blocks[c][len(blocks[c])-1]
		} else {
			unsorted = append(unsorted, []string{unsortedTitle + name, ""})
			cur = &unsorted[len(unsorted)-1]
		}
	}
	// The unsorted blocks go after the home section's own content, in file order.
	for _, u := range unsorted {
		block := append(u[:1:1], "")
		blocks[unsortedHome] = append(blocks[unsortedHome], append(block, mdTrimBlank(u[2:])...))
	}
	bodies := map[string][]string{}
	for _, sec := range ProjectSections {
		var body []string
		for _, blk := range blocks[sec] {
			blk = mdTrimBlank(blk)
			if len(blk) == 0 {
				continue
			}
			if len(body) > 0 {
				body = append(body, "")
			}
			body = append(body, blk...)
		}
		bodies[sec] = body
	}
	var b strings.Builder
	if title := mdTrimBlank(head); len(title) > 0 {
		b.WriteString(strings.Join(title, "\n"))
	} else {
		b.WriteString("# " + project)
	}
	for _, s := range ProjectSections {
		b.WriteString("\n\n## " + s + "\n\n")
		if body := mdTrimBlank(bodies[s]); len(body) > 0 {
			b.WriteString(strings.Join(body, "\n"))
		} else {
			b.WriteString(emptySection)
		}
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// ---- the index kind ----

// IndexSep is the index bullet separator, U+00B7 (middle dot).
const IndexSep = "\u00b7"

// ErrBadIndexBullet is wrapped by the Err of a `- [[` line that is not a well-formed bullet
// and by IndexBullet.Validate.
var ErrBadIndexBullet = errors.New("bad MEMORY.md index bullet")

// IndexBullet is one index entry: `- [[Path|Name]] · type:Type subject:Subject · Description`.
type IndexBullet struct {
	Path, Name, Type, Subject, Description string
}

// IndexLine is one line of an index MEMORY.md, without its newline. A line that is not a
// bullet (the header, blank lines) has Bullet and Err nil; a `- [[` line that does not
// parse has Err set (with its line number) and Bullet nil.
type IndexLine struct {
	Raw    string
	Bullet *IndexBullet
	Err    error
}

// IndexMD is a parsed index MEMORY.md, every line kept in order.
type IndexMD struct {
	Lines []IndexLine

	noFinalNewline bool
}

// The bullet grammar is the index reader's own regex (c-daly/memory lib/index.py), with
// Python's Unicode \s spelled out, so that memd and the writer see the same bullets.
const (
	pyWS    = `\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}`
	pyS     = `[` + pyWS + `]`
	pyNotS  = `[^` + pyWS + `]`
	sepExpr = pyS + `+` + IndexSep + pyS + `+`
)

var bulletRE = regexp.MustCompile(`^- \[\[([^|\]]+)\|([^\]]+)\]\]` + sepExpr +
	`type:(` + pyNotS + `+)` + pyS + `+subject:(` + pyNotS + `+)` + sepExpr + `(.*)$`)

func isPySpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r >= 0x1c && r <= 0x20, r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

func pyStrip(s string) string { return strings.TrimFunc(s, isPySpace) }

// ParseIndexBullet reads one bullet line (no newline). The error says what is wrong.
func ParseIndexBullet(line string) (IndexBullet, error) {
	m := bulletRE.FindStringSubmatch(line)
	if m == nil {
		return IndexBullet{}, fmt.Errorf("%w: %s: %q", ErrBadIndexBullet, bulletProblem(line), textsafe.Clip(line, 120))
	}
	return IndexBullet{Path: pyStrip(m[1]), Name: pyStrip(m[2]), Type: pyStrip(m[3]),
		Subject: pyStrip(m[4]), Description: pyStrip(m[5])}, nil
}

// bulletProblem names the first part of a line that breaks the bullet shape.
func bulletProblem(line string) string {
	rest, ok := strings.CutPrefix(line, "- [[")
	if !ok {
		return "does not start with `- [[`"
	}
	inner, after, ok := strings.Cut(rest, "]]")
	if !ok {
		return "the link has no closing `]]`"
	}
	path, name, ok := strings.Cut(inner, "|")
	switch {
	case !ok:
		return "the link has no `|name`"
	case path == "":
		return "the link has an empty path"
	case name == "":
		return "the link has an empty name"
	case strings.Contains(name, "]"):
		return "the name contains `]`"
	}
	fields := strings.Split(after, IndexSep)
	if len(fields) < 3 {
		return "expected `· type:<T> subject:<S> · <description>` after the link"
	}
	if !strings.HasPrefix(pyStrip(fields[1]), "type:") {
		return "the first `·` field does not start with `type:`"
	}
	if !strings.Contains(fields[1], "subject:") {
		return "the first `·` field has no `subject:`"
	}
	return "does not match `- [[path|name]] · type:T subject:S · description`"
}

// ParseIndex parses an index MEMORY.md; it never fails.
func ParseIndex(data []byte) *IndexMD {
	m := &IndexMD{}
	if len(data) == 0 {
		return m
	}
	m.noFinalNewline = data[len(data)-1] != '\n'
	lines := mdLines(data)
	m.Lines = make([]IndexLine, len(lines))
	for i, l := range lines {
		m.Lines[i] = parseIndexLine(l, i+1)
	}
	return m
}

func parseIndexLine(l string, lineNo int) IndexLine {
	il := IndexLine{Raw: l}
	if !strings.HasPrefix(l, "- [[") {
		return il
	}
	// The line goes to the regex as is, "\r" included, as the Python reader sees it.
	b, err := ParseIndexBullet(l)
	if err != nil {
		il.Err = fmt.Errorf("line %d: %w", lineNo, err)
		return il
	}
	il.Bullet = &b
	return il
}

// Validate checks a bullet before it is written: name non-empty without `]`, `|` or a
// newline; type and subject non-empty without whitespace or `·`; description one line; path
// a repo-relative path inside a PARA bucket with no empty, `.` or `..` segment (any file
// extension: an index may list markdown entries).
func (b IndexBullet) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadIndexBullet, fmt.Sprintf(format, args...))
	}
	switch {
	case strings.TrimSpace(b.Name) == "":
		return bad("name is empty (path %q)", b.Path)
	case strings.ContainsAny(b.Name, "]|\r\n"):
		return bad("name %q contains `]`, `|` or a newline", b.Name)
	case b.Type == "":
		return bad("type is empty (name %q)", b.Name)
	case strings.IndexFunc(b.Type, isPySpace) >= 0 || strings.Contains(b.Type, IndexSep):
		return bad("type %q contains whitespace or `·`", b.Type)
	case b.Subject == "":
		return bad("subject is empty (name %q)", b.Name)
	case strings.IndexFunc(b.Subject, isPySpace) >= 0:
		return bad("subject %q contains whitespace", b.Subject)
	case strings.Contains(b.Subject, IndexSep):
		return bad("subject %q contains the separator `·`", b.Subject)
	case strings.ContainsAny(b.Description, "\r\n"):
		return bad("description %q has a newline", textsafe.Clip(b.Description, 60))
	case strings.ContainsAny(b.Path, "|]"):
		return bad("path %q contains `|` or `]`", b.Path)
	}
	if v := indexPathViolation(b.Path); v != "" {
		return bad("%s", v)
	}
	return nil
}

// indexPathViolation checks an index path with the memory path rules but any extension.
func indexPathViolation(p string) string {
	if p == "" {
		return "path is empty"
	}
	probe := p
	base := p[strings.LastIndexByte(p, '/')+1:]
	if k := strings.LastIndexByte(base, '.'); k > 0 {
		probe = p[:len(p)-len(base)+k]
	}
	if v := memd.PathViolation(probe + memd.MemoryExt); v != "" {
		return strings.ReplaceAll(v, fmt.Sprintf("%q", probe+memd.MemoryExt), fmt.Sprintf("%q", p))
	}
	return ""
}

// String writes the bullet line: `- [[path|name]] · type:T subject:S · description`.
func (b IndexBullet) String() string {
	return "- [[" + b.Path + "|" + b.Name + "]] " + IndexSep + " type:" + b.Type + " subject:" + b.Subject + " " + IndexSep + " " + b.Description
}

// Bytes writes the index back; an unchanged index comes back byte-identical.
func (m *IndexMD) Bytes() []byte {
	var buf bytes.Buffer
	for i, l := range m.Lines {
		if i > 0 {
			buf.WriteByte('\n')
		}
		buf.WriteString(l.Raw)
	}
	if len(m.Lines) > 0 && !m.noFinalNewline {
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// Bullets returns the well-formed bullets in file order.
func (m *IndexMD) Bullets() []IndexBullet {
	var out []IndexBullet
	for _, l := range m.Lines {
		if l.Bullet != nil {
			out = append(out, *l.Bullet)
		}
	}
	return out
}

// Bad returns the `- [[` lines that did not parse.
func (m *IndexMD) Bad() []IndexLine {
	var out []IndexLine
	for _, l := range m.Lines {
		if l.Err != nil {
			out = append(out, l)
		}
	}
	return out
}

func (m *IndexMD) appendRaw(raw string) {
	m.Lines = append(m.Lines, parseIndexLine(raw, len(m.Lines)+1))
	m.noFinalNewline = false
}

// Repoint rewrites every bullet whose path is from (compared normalised) to point at to,
// changing only the path inside the link so the rest of the line keeps its bytes. It
// returns how many bullets it rewrote.
func (m *IndexMD) Repoint(from, to string) int {
	from, to = memd.NormalizePath(from), memd.NormalizePath(to)
	if from == to {
		return 0
	}
	n := 0
	for i := range m.Lines {
		l := &m.Lines[i]
		if l.Bullet == nil || memd.NormalizePath(l.Bullet.Path) != from {
			continue
		}
		rest := strings.TrimPrefix(l.Raw, "- [[")
		bar := strings.IndexByte(rest, '|')
		l.Raw = "- [[" + to + rest[bar:]
		b := *l.Bullet
		b.Path = to
		l.Bullet = &b
		n++
	}
	return n
}

// indexKey identifies a line for merging: the normalised path of a bullet, else the line.
func indexKey(l IndexLine) (key string, bullet bool) {
	if l.Bullet != nil {
		return memd.NormalizePath(l.Bullet.Path), true
	}
	return strings.TrimSuffix(l.Raw, "\r"), false
}

// MergeIndex merges two index MEMORY.md files that changed from base on both sides: a
// union of bullets, ours first (the header and order from ours), then theirs' bullets for
// paths ours does not have, each path once; on the same path ours wins. base makes it
// three-way, so a removal is not undone: a bullet one side removed and the other left as in
// base stays removed (an archive repoint on one side thus does not leave the old path
// behind), while a bullet one side changed and the other removed stays. Lines of theirs that
// are not bullets (or do not parse) and are new since base are kept too, after ours.
// A nil base is a plain union.
func MergeIndex(base, ours, theirs []byte) []byte {
	b, o, t := ParseIndex(base), ParseIndex(ours), ParseIndex(theirs)
	baseLine := map[string]string{} // key -> raw (first)
	for _, l := range b.Lines {
		if k, _ := indexKey(l); baseLine[k] == "" {
			baseLine[k] = strings.TrimSuffix(l.Raw, "\r")
		}
	}
	keys := func(m *IndexMD) map[string]bool {
		s := map[string]bool{}
		for _, l := range m.Lines {
			k, _ := indexKey(l)
			s[k] = true
		}
		return s
	}
	ourKeys, theirKeys := keys(o), keys(t)
	// unchangedSince reports whether a line is as base had it.
	unchangedSince := func(l IndexLine) bool {
		k, _ := indexKey(l)
		raw, ok := baseLine[k]
		return ok && raw == strings.TrimSuffix(l.Raw, "\r")
	}
	out := &IndexMD{noFinalNewline: o.noFinalNewline}
	for _, l := range o.Lines {
		if k, isBullet := indexKey(l); isBullet && !theirKeys[k] && unchangedSince(l) {
			continue // they removed it, we left it alone
		}
		out.Lines = append(out.Lines, l)
	}
	added := map[string]bool{}
	for _, l := range t.Lines {
		k, isBullet := indexKey(l)
		if ourKeys[k] || added[k] {
			continue
		}
		if _, inBase := baseLine[k]; inBase && (unchangedSince(l) || !isBullet) {
			continue // we removed it, they left it alone (or it is an old non-bullet line)
		}
		if !isBullet && strings.TrimSpace(l.Raw) == "" {
			continue
		}
		added[k] = true
		out.appendRaw(l.Raw)
	}
	return out.Bytes()
}
