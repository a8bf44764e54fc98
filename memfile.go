package memd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// MaxMemoryFileBytes is the largest memory file memd reads. A bigger one gets a
// violation and is not read further, so a stray blob cannot make a scan allocate.
const MaxMemoryFileBytes = 1 << 20

// Meta names memd reads (FORMATS §2).
const (
	MetaType        = "memhtml-type"
	MetaStatus      = "memhtml-status"
	MetaCreated     = "memhtml-created"
	MetaUpdated     = "memhtml-updated"
	MetaConfidence  = "memhtml-confidence"
	MetaImportance  = "memhtml-importance"
	MetaContentHash = "memhtml-content-hash"
	MetaValidFrom   = "memhtml-valid-from"
	MetaValidUntil  = "memhtml-valid-until"
	MetaArchived    = "memhtml-archived"
	MetaTaskStatus  = "memhtml-task-status"
	MetaDue         = "memhtml-due"
	MetaEntity      = "memhtml-entity"
	MetaTag         = "memhtml-tag"
	MetaAlias       = "memhtml-alias"
)

// MemoryTypes is the closed set of memhtml-type values.
var MemoryTypes = []string{
	"episodic", "semantic", "procedural", "agent_insight", "user_preference",
	"error_pattern", "verdict", "precedent", "arc", "task",
}

// TaskStatuses is the closed set of memhtml-task-status values.
var TaskStatuses = []string{"todo", "doing", "blocked", "done"}

// Link is one <link rel href> of a memory file's head.
type Link struct{ Rel, Href string }

// Memory is what memd reads from a memory file: the head metas, the claim and the
// rule violations. A file memd reads may break the rules; Violations says how.
type Memory struct {
	Type, Status     string
	Created, Updated string    // raw meta values
	CreatedAt        time.Time // parsed (zero if bad)
	UpdatedAt        time.Time
	Entities, Tags   []string
	Aliases          []string
	ValidUntil       string
	ValidUntilAt     time.Time
	TaskStatus       string
	Due              string
	Title            string
	Links            []Link
	EventTime        string    // datetime of the first <time> in the article
	EventAt          time.Time // EventTime parsed (zero if bad)
	Gist             string    // the <mark> text, whitespace-normalised, code excluded
	ContentHash      string    // memhtml-content-hash as written
	ComputedHash     string    // ComputeContentHash over the article, as found
	Metas            map[string][]string
	Violations       []string // empty = valid
}

// Valid reports whether the file broke no rule.
func (m *Memory) Valid() bool { return len(m.Violations) == 0 }

// Year is the memory's year for archiving: the date prefix of p, else the first <time>
// in the article, else memhtml-created; 0 when none is known.
func (m *Memory) Year(p string) int {
	if t, ok := EpisodeDate(p); ok {
		return t.Year()
	}
	if !m.EventAt.IsZero() {
		return m.EventAt.Year()
	}
	if !m.CreatedAt.IsZero() {
		return m.CreatedAt.Year()
	}
	return 0
}

// Meta returns the first value of a meta, "" when absent.
func (m *Memory) Meta(name string) string {
	if v := m.Metas[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// ParseMemory reads a memory file from r (at most MaxMemoryFileBytes+1 bytes) and
// reports what it holds and which rules it breaks. The error is only for I/O.
func ParseMemory(r io.Reader) (*Memory, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxMemoryFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read memory file: %w", err)
	}
	if len(b) > MaxMemoryFileBytes {
		return oversize(fmt.Sprintf("file is more than %d bytes, over the 1 MiB limit", MaxMemoryFileBytes)), nil
	}
	return ParseMemoryBytes(b), nil
}

// ErrNotRegular is wrapped by ParseMemoryFile for a symlink, directory or device: memd
// never follows a link out of the repo to read a memory.
var ErrNotRegular = errors.New("not a regular file")

// ParseMemoryFile stats path first (without following a symlink), so a huge file yields
// a Memory with one violation and is never read; otherwise it parses the file like
// ParseMemory.
func ParseMemoryFile(path string) (*Memory, error) {
	li, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("stat memory file %s: %w", path, err)
	}
	if !li.Mode().IsRegular() {
		return nil, fmt.Errorf("memory file %s: %w (%s)", path, ErrNotRegular, li.Mode().Type())
	}
	if li.Size() > MaxMemoryFileBytes {
		return oversize(fmt.Sprintf("file is %d bytes, over the 1 MiB limit", li.Size())), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open memory file %s: %w", path, err)
	}
	defer f.Close()
	// The path may have been swapped for a link between Lstat and Open.
	if fi, err := f.Stat(); err != nil || !os.SameFile(li, fi) {
		return nil, fmt.Errorf("memory file %s: %w (changed while opening)", path, ErrNotRegular)
	}
	m, err := ParseMemory(f)
	if err != nil {
		return nil, fmt.Errorf("memory file %s: %w", path, err)
	}
	return m, nil
}

func oversize(msg string) *Memory {
	return &Memory{Metas: map[string][]string{}, Violations: []string{msg}}
}

// ComputeContentHash is "sha256:<hex>" over text with runs of ASCII whitespace
// collapsed to one space and the ends trimmed. For an article's text as memhtml
// canonicalises it (block edges are spaces, <pre> verbatim) see Memory.ComputedHash.
func ComputeContentHash(articleText string) string {
	var c canon
	c.collapsible(articleText)
	return hashOf(c.b)
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canon builds memhtml's canonical text: collapsible runs of ASCII whitespace become
// one space, verbatim (<pre>) text passes through, and a leading or trailing
// collapsible space is dropped.
type canon struct {
	b       []byte
	pending bool
}

func isASCIISpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func (c *canon) collapsible(s string) {
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if isASCIISpace(ch) {
			c.pending = true
			continue
		}
		if c.pending && len(c.b) > 0 {
			c.b = append(c.b, ' ')
		}
		c.pending = false
		c.b = append(c.b, ch)
	}
}

func (c *canon) collapsibleBytes(s []byte) {
	for _, ch := range s {
		if isASCIISpace(ch) {
			c.pending = true
			continue
		}
		if c.pending && len(c.b) > 0 {
			c.b = append(c.b, ' ')
		}
		c.pending = false
		c.b = append(c.b, ch)
	}
}

func (c *canon) verbatim(s []byte) {
	if len(s) == 0 {
		return
	}
	if c.pending && len(c.b) > 0 {
		c.b = append(c.b, ' ')
	}
	c.pending = false
	c.b = append(c.b, s...)
}

func (c *canon) boundary() { c.pending = true }

// isInline: memhtml's phrasing elements: no word boundary at their edges. Every
// other element is a block and contributes a collapsible space at each edge.
func isInline(a atom.Atom) bool {
	switch a {
	case atom.Mark, atom.Time, atom.Data, atom.Cite, atom.Q, atom.Dfn, atom.Abbr, atom.Code,
		atom.Kbd, atom.Samp, atom.Var, atom.A, atom.Strong, atom.Em, atom.Span:
		return true
	}
	return false
}

func isVoid(a atom.Atom) bool {
	switch a {
	case atom.Area, atom.Base, atom.Basefont, atom.Bgsound, atom.Br, atom.Col, atom.Embed, atom.Frame,
		atom.Hr, atom.Img, atom.Input, atom.Keygen, atom.Link, atom.Meta, atom.Param, atom.Source,
		atom.Track, atom.Wbr:
		return true
	}
	return false
}

// closesP: a start tag of one of these closes an open <p> (HTML's implied end tag).
func closesP(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Details, atom.Div, atom.Dl,
		atom.Fieldset, atom.Figcaption, atom.Figure, atom.Footer, atom.Form, atom.H1, atom.H2,
		atom.H3, atom.H4, atom.H5, atom.H6, atom.Header, atom.Hr, atom.Main, atom.Menu, atom.Nav,
		atom.Ol, atom.P, atom.Pre, atom.Section, atom.Table, atom.Ul, atom.Li, atom.Dd, atom.Dt:
		return true
	}
	return false
}

// isScope: these bound the search for an open <p> ("button scope").
func isScope(a atom.Atom) bool {
	switch a {
	case atom.Html, atom.Table, atom.Td, atom.Th, atom.Caption, atom.Button, atom.Template,
		atom.Object, atom.Applet, atom.Marquee:
		return true
	}
	return false
}

type elem struct {
	a    atom.Atom
	name string // only for elements atom does not know
}

const maxViolations = 50

type memParser struct {
	m          *Memory
	z          *html.Tokenizer
	stack      []elem
	pos        map[elem][]int // stack indexes of each open element, innermost last
	scopes     []int          // stack indexes of open scope elements
	specials   []int          // stack indexes of open special elements
	seen       map[string]bool
	dropped    int
	articles   int
	articleAt  int // stack index of the (first) article while open, else -1
	firstBlock int // stack index of the article's first <p>/<li> while open, else -1
	firstDone  bool
	marks      int
	markAt     int // stack index of the open counted <mark>, else -1
	markFirst  bool
	markFold   string
	gist       canon
	hash       canon
	pre        int // open <pre> count
	code       int // open <code> count
	preStart   bool
	titles     int
	title      strings.Builder
	inTitle    bool
	titleEmpty bool
}

// ParseMemoryBytes parses a memory file held in memory. It never fails: what is wrong
// with the file is in Violations. Inputs over MaxMemoryFileBytes get only that violation.
func ParseMemoryBytes(b []byte) *Memory {
	if len(b) > MaxMemoryFileBytes {
		return oversize(fmt.Sprintf("file is %d bytes, over the 1 MiB limit", len(b)))
	}
	p := &memParser{
		m:          &Memory{Metas: map[string][]string{}},
		pos:        map[elem][]int{},
		articleAt:  -1,
		firstBlock: -1,
		markAt:     -1,
	}
	if !utf8.Valid(b) {
		off := 0
		for off < len(b) {
			r, n := utf8.DecodeRune(b[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		p.violate(fmt.Sprintf("file is not valid UTF-8 (bad byte 0x%02x at offset %d)", b[off], off))
	}
	p.z = html.NewTokenizer(bytes.NewReader(b))
	p.run()
	p.finish()
	return p.m
}

func (p *memParser) violate(msg string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if p.seen[msg] {
		return
	}
	p.seen[msg] = true
	if len(p.m.Violations) >= maxViolations {
		p.dropped++
		return
	}
	p.m.Violations = append(p.m.Violations, msg)
}

func (p *memParser) inArticle() bool { return p.articleAt >= 0 }

func (p *memParser) run() {
	z := p.z
	for {
		tt := z.Next()
		preStart := p.preStart
		p.preStart = false
		switch tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			p.text(z.Text(), preStart)
		case html.StartTagToken, html.SelfClosingTagToken:
			p.startTag()
		case html.EndTagToken:
			name, _ := z.TagName()
			p.endTag(elemOf(name))
		}
	}
}

func elemOf(name []byte) elem {
	a := atom.Lookup(name)
	if a == 0 {
		return elem{name: string(name)}
	}
	return elem{a: a}
}

func (e elem) String() string {
	if e.a != 0 {
		return e.a.String()
	}
	return e.name
}

func (p *memParser) text(t []byte, afterPre bool) {
	if p.inTitle {
		p.title.Write(t)
		return
	}
	if !p.inArticle() {
		return
	}
	if p.pre > 0 {
		// The HTML parser drops a newline right after <pre>; so does the hash.
		if afterPre {
			if bytes.HasPrefix(t, []byte("\r\n")) {
				t = t[2:]
			} else if len(t) > 0 && t[0] == '\n' {
				t = t[1:]
			}
		}
		p.hash.verbatim(t)
	} else {
		p.hash.collapsibleBytes(t)
	}
	if p.markAt >= 0 && p.pre == 0 && p.code == 0 {
		p.gist.collapsibleBytes(t)
	}
}

func (p *memParser) startTag() {
	z := p.z
	name, hasAttr := z.TagName()
	e := elemOf(name)
	tag := e.String()
	var rel, href, metaName, metaContent, datetime string
	hasMetaContent := false
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		switch {
		case string(k) == "class" || string(k) == "style":
			p.violate(fmt.Sprintf("<%s> has a %s attribute (presentation is not allowed)", clip(tag), k))
		case len(k) > 2 && k[0] == 'o' && k[1] == 'n':
			p.violate(fmt.Sprintf("<%s> has an event-handler attribute %s", clip(tag), clip(string(k))))
		}
		switch e.a {
		case atom.Meta:
			switch string(k) {
			case "name":
				metaName = strings.ToLower(strings.TrimSpace(string(v)))
			case "content":
				metaContent = string(v)
				hasMetaContent = true
			}
		case atom.Link:
			switch string(k) {
			case "rel":
				rel = string(v)
			case "href":
				href = string(v)
			}
		case atom.Time:
			if string(k) == "datetime" {
				datetime = string(v)
			}
		}
	}
	switch e.a {
	case atom.Script, atom.Style:
		p.violate(fmt.Sprintf("<%s> element (memory files carry no scripts or styles)", tag))
	case atom.Meta:
		if metaName != "" && hasMetaContent && strings.TrimSpace(metaContent) != "" {
			p.m.Metas[metaName] = append(p.m.Metas[metaName], strings.TrimSpace(metaContent))
		}
	case atom.Link:
		p.link(rel, href)
	}
	if isVoid(e.a) {
		if p.inArticle() && !isInline(e.a) {
			p.hash.boundary()
			if p.markAt >= 0 {
				p.gist.boundary()
			}
		}
		return
	}
	// Implied end tags, so "<p>a<p>b" or "<li>a<li>b" nest the way a browser sees them.
	if closesP(e.a) {
		p.closeImpliedP()
	}
	switch e.a {
	case atom.Li:
		p.closeImpliedItem(atom.Li, 0)
	case atom.Dd, atom.Dt:
		p.closeImpliedItem(atom.Dd, atom.Dt)
	}
	idx := p.push(e)
	p.opened(e, idx, datetime)
}

func (p *memParser) opened(e elem, idx int, datetime string) {
	switch e.a {
	case atom.Title:
		p.titles++
		p.inTitle = true
		p.title.Reset()
		return
	case atom.Article:
		p.articles++
		if p.articles == 1 {
			p.articleAt = idx
		}
		return
	case atom.Pre:
		p.pre++
		p.preStart = true
	case atom.Code:
		p.code++
	}
	if !p.inArticle() {
		return
	}
	if !isInline(e.a) {
		p.hash.boundary()
		if p.markAt >= 0 {
			p.gist.boundary()
		}
	}
	switch e.a {
	case atom.P, atom.Li:
		if !p.firstDone {
			p.firstDone = true
			p.firstBlock = idx
		}
	case atom.Time:
		if p.m.EventTime == "" && datetime != "" {
			p.m.EventTime = strings.TrimSpace(datetime)
			p.m.EventAt, _ = parseMemTime(p.m.EventTime)
		}
	case atom.Mark:
		p.marks++
		if p.marks == 1 {
			p.markAt = idx
			p.markFirst = p.firstBlock >= 0
			for _, s := range p.stack[p.articleAt+1 : idx] {
				if s.a == atom.Aside || s.a == atom.Details {
					p.markFold = s.a.String()
					break
				}
			}
		}
	}
}

// The stack searches HTML's tree building does ("is there a <p> in button scope?", "the
// nearest open <li>", "the nearest open element with this name") are answered in O(1)
// from per-element position stacks, so hostile nesting (1 MiB of unmatched or deeply
// nested tags) costs linear time.

func top(s []int) int {
	if len(s) == 0 {
		return -1
	}
	return s[len(s)-1]
}

// isSpecial: elements that stop the search for an open <li>, <dd> or <dt> (HTML's
// "special" category, short of address, div and p).
func isSpecial(a atom.Atom) bool {
	return a != 0 && !isInline(a) && a != atom.Address && a != atom.Div && a != atom.P
}

func (p *memParser) push(e elem) int {
	idx := len(p.stack)
	p.stack = append(p.stack, e)
	p.pos[e] = append(p.pos[e], idx)
	if isScope(e.a) {
		p.scopes = append(p.scopes, idx)
	}
	if isSpecial(e.a) {
		p.specials = append(p.specials, idx)
	}
	return idx
}

// popTo closes the elements at stack index i and above.
func (p *memParser) popTo(i int) {
	for j := len(p.stack) - 1; j >= i; j-- {
		e := p.stack[j]
		ps := p.pos[e]
		p.pos[e] = ps[:len(ps)-1]
		if top(p.scopes) == j {
			p.scopes = p.scopes[:len(p.scopes)-1]
		}
		if top(p.specials) == j {
			p.specials = p.specials[:len(p.specials)-1]
		}
		p.closed(e, j)
	}
	p.stack = p.stack[:i]
}

// closeImpliedP closes a <p> open in button scope (no table/td/... above it).
func (p *memParser) closeImpliedP() {
	if at := top(p.pos[elem{a: atom.P}]); at >= 0 && at > top(p.scopes) {
		p.popTo(at)
	}
}

// closeImpliedItem closes the nearest open <li> (or <dd>/<dt>) when a sibling starts,
// unless a special element (a nested list, a section...) sits above it.
func (p *memParser) closeImpliedItem(a1, a2 atom.Atom) {
	at := top(p.pos[elem{a: a1}])
	if a2 != 0 {
		at = max(at, top(p.pos[elem{a: a2}]))
	}
	if at >= 0 && top(p.specials) <= at {
		p.popTo(at)
	}
}

func (p *memParser) endTag(e elem) {
	if e.a == atom.P {
		p.closeImpliedP()
		return
	}
	if at := top(p.pos[e]); at >= 0 {
		p.popTo(at)
	} // else a stray end tag: nothing to close
}

func (p *memParser) closed(e elem, idx int) {
	switch e.a {
	case atom.Title:
		p.inTitle = false
		t := strings.Join(strings.Fields(p.title.String()), " ")
		if p.titles == 1 {
			p.m.Title = t
		}
		if t == "" {
			p.titleEmpty = true
		}
		return
	case atom.Pre:
		p.pre--
	case atom.Code:
		p.code--
	}
	if !p.inArticle() {
		return
	}
	if idx == p.articleAt {
		p.articleAt = -1
		return
	}
	if !isInline(e.a) {
		p.hash.boundary()
		if p.markAt >= 0 {
			p.gist.boundary()
		}
	}
	if idx == p.firstBlock {
		p.firstBlock = -1
	}
	if idx == p.markAt {
		p.markAt = -1
	}
}

func (p *memParser) link(rel, href string) {
	href = strings.TrimSpace(href)
	for _, r := range strings.Fields(rel) {
		p.m.Links = append(p.m.Links, Link{Rel: r, Href: href})
		if !strings.HasPrefix(strings.ToLower(r), "memhtml-") {
			continue
		}
		if href == "" {
			p.violate(fmt.Sprintf("<link rel=%s> has no href", quoteInput(r)))
			continue
		}
		if _, err := HrefToPath(href); err != nil {
			p.violate(fmt.Sprintf("<link rel=%s> href %s is not root-relative (want /bucket/...html without scheme, host or ..)", quoteInput(r), quoteInput(href)))
		}
	}
}

func (p *memParser) finish() {
	// Elements left open at EOF close now (their hooks run).
	if len(p.stack) > 0 {
		p.popTo(0)
	}
	m := p.m
	p.head()
	switch {
	case p.articles == 0:
		p.violate("no <article> element; a memory has exactly one")
	case p.articles > 1:
		p.violate(fmt.Sprintf("found %d <article> elements; a memory has exactly one", p.articles))
	}
	m.Gist = string(p.gist.b)
	if p.articles > 0 {
		m.ComputedHash = hashOf(p.hash.b)
	}
	switch {
	case p.articles == 0:
	case p.marks == 0:
		p.violate("no <mark> in the <article>; the claim goes in exactly one <mark>")
	case p.marks > 1:
		p.violate(fmt.Sprintf("found %d <mark> elements in the <article>; a memory has exactly one claim", p.marks))
	default:
		if m.Gist == "" {
			p.violate("the <mark> is empty (code does not count as a claim)")
		}
		if p.markFold != "" {
			p.violate(fmt.Sprintf("the <mark> is inside <%s>; the claim is never a caveat or folded", p.markFold))
		} else if !p.markFirst {
			p.violate("the <mark> is not inside the article's first <p> or <li>")
		}
	}
	switch {
	case p.titles == 0:
		p.violate("no <title> element")
	case p.titles > 1:
		p.violate(fmt.Sprintf("found %d <title> elements; a memory has exactly one", p.titles))
	case p.titleEmpty || m.Title == "":
		p.violate("the <title> is empty")
	}
	if p.dropped > 0 {
		m.Violations = append(m.Violations, fmt.Sprintf("and %d more violations", p.dropped))
	}
}

// repeatableMetas may appear more than once; any other memhtml- meta may not.
var repeatableMetas = map[string]bool{MetaEntity: true, MetaTag: true, MetaAlias: true}

// dateMetas carry an ISO 8601 date or time when present.
var dateMetas = []string{MetaCreated, MetaUpdated, MetaValidFrom, MetaValidUntil, MetaArchived, MetaDue}

func (p *memParser) head() {
	m := p.m
	for name, vals := range m.Metas {
		if len(vals) > 1 && strings.HasPrefix(name, "memhtml-") && !repeatableMetas[name] {
			p.violate(fmt.Sprintf("meta %s appears %d times (%s); it may appear once", clip(name), len(vals), quoteInput(strings.Join(vals, ", "))))
		}
	}
	m.Type = m.Meta(MetaType)
	m.Status = m.Meta(MetaStatus)
	m.Created = m.Meta(MetaCreated)
	m.Updated = m.Meta(MetaUpdated)
	m.ValidUntil = m.Meta(MetaValidUntil)
	m.TaskStatus = m.Meta(MetaTaskStatus)
	m.Due = m.Meta(MetaDue)
	m.ContentHash = m.Meta(MetaContentHash)
	m.Entities = m.Metas[MetaEntity]
	m.Tags = m.Metas[MetaTag]
	m.Aliases = m.Metas[MetaAlias]
	for _, req := range []string{MetaType, MetaStatus, MetaCreated, MetaUpdated} {
		if len(m.Metas[req]) == 0 {
			p.violate(fmt.Sprintf("missing required meta %s", req))
		}
	}
	if m.Type != "" && !inList(MemoryTypes, m.Type) {
		p.violate(fmt.Sprintf("memhtml-type %s is not a memory type (%s)", quoteInput(m.Type), strings.Join(MemoryTypes, ", ")))
	}
	if m.Status != "" && m.Status != "active" && m.Status != "archived" {
		p.violate(fmt.Sprintf("memhtml-status %s is neither active nor archived", quoteInput(m.Status)))
	}
	for _, name := range dateMetas {
		v := m.Meta(name)
		if v == "" {
			continue
		}
		t, ok := parseMemTime(v)
		if !ok {
			p.violate(fmt.Sprintf("%s %s is not an ISO 8601 date or time", name, quoteInput(v)))
		}
		switch name {
		case MetaCreated:
			m.CreatedAt = t
		case MetaUpdated:
			m.UpdatedAt = t
		case MetaValidUntil:
			m.ValidUntilAt = t
		}
	}
	if v := m.Meta(MetaConfidence); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			p.violate(fmt.Sprintf("memhtml-confidence %s is not a number in 0..1", quoteInput(v)))
		}
	}
	if v := m.Meta(MetaImportance); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10 {
			p.violate(fmt.Sprintf("memhtml-importance %s is not an integer in 1..10", quoteInput(v)))
		}
	}
	if m.TaskStatus != "" {
		if m.Type != "task" {
			p.violate(fmt.Sprintf("memhtml-task-status %s on a memory of type %s; only tasks carry it", quoteInput(m.TaskStatus), quoteInput(m.Type)))
		}
		if !inList(TaskStatuses, m.TaskStatus) {
			p.violate(fmt.Sprintf("memhtml-task-status %s is not one of %s", quoteInput(m.TaskStatus), strings.Join(TaskStatuses, ", ")))
		}
	} else if m.Type == "task" {
		p.violate("task without memhtml-task-status (todo, doing, blocked or done)")
	}
}

func inList(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// parseMemTime is ParseTime under the name memfile.go's parser has always called it.
func parseMemTime(s string) (time.Time, bool) { return ParseTime(s) }

// clip bounds a tag or attribute name quoted in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
