package memfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/textsafe"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// MaxFileBytes is the largest memory file memd reads. A bigger one gets a
// violation and is not read further, so a stray blob cannot make a scan allocate.
const MaxFileBytes = 1 << 20

// Meta names memd reads (docs/FORMATS.md §2).
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
	MetaReprieves   = "memhtml-reprieves"
	MetaArchived    = "memhtml-archived"
	MetaSuperseded  = "memhtml-superseded-by"
	MetaTaskStatus  = "memhtml-task-status"
	MetaDue         = "memhtml-due"
	MetaEntity      = "memhtml-entity"
	MetaTag         = "memhtml-tag"
	MetaAlias       = "memhtml-alias"
)

// MemoryTypes is the closed set of memhtml-type values.
var MemoryTypes = []string{
	"episodic", "semantic", "procedural", "agent_insight", "user_preference",
	"error_pattern", "verdict", "precedent", memd.TypeArc, memd.TypeTask,
}

// TaskStatuses is the closed set of memhtml-task-status values.
var TaskStatuses = []string{"todo", "doing", "blocked", memd.TaskDone}

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
	// Refs are the root-relative hrefs the file names that archive repoints when their
	// target moves: head links, <a href>s (an arc's member list) and memhtml-superseded-by.
	Refs         []string
	EventTime    string              // datetime of the first <time> in the article
	EventAt      time.Time           // EventTime parsed (zero if bad)
	Gist         string              // the <mark> text, whitespace-normalised, code excluded
	ContentHash  string              // memhtml-content-hash as written
	ComputedHash string              // ComputeContentHash over the article, as found
	Metas        map[string][]string // head metas by exact (case-sensitive) name, content as written
	Violations   []string            // empty = valid
	// Warnings are what memhtml's checker warns about and indexes anyway: an element
	// outside the closed vocabulary, a malformed optional value memhtml drops.
	Warnings []string
}

// Valid reports whether the file broke no rule.
func (m *Memory) Valid() bool { return len(m.Violations) == 0 }

// EventDate is when the memory at p happened (docs/FORMATS.md §2), the one rule arcs and archive
// use: the first <time datetime> in the article (memhtml's event_at), else the date prefix
// of the file name (memhtml's write path prefixes the WRITE date, so it is only a
// fallback), else memhtml-created. ok is false when none is known.
func (m *Memory) EventDate(p string) (time.Time, bool) {
	if !m.EventAt.IsZero() {
		return m.EventAt, true
	}
	if t, ok := memd.EpisodeDate(p); ok {
		return t, true
	}
	if !m.CreatedAt.IsZero() {
		return m.CreatedAt, true
	}
	return time.Time{}, false
}

// Year is the year of EventDate; 0 when none is known.
func (m *Memory) Year(p string) int {
	if t, ok := m.EventDate(p); ok {
		return t.UTC().Year()
	}
	return 0
}

// IsEpisode reports whether m is an episode: memhtml-type episodic, whatever the name.
func (m *Memory) IsEpisode() bool { return m.Type == "episodic" }

// Meta returns the first value of a meta, "" when absent.
func (m *Memory) Meta(name string) string {
	if v := m.Metas[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Parse reads a memory file from r (at most MaxFileBytes+1 bytes) and
// reports what it holds and which rules it breaks. The error is only for I/O.
func Parse(r io.Reader) (*Memory, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read memory file: %w", err)
	}
	if len(b) > MaxFileBytes {
		return oversize(fmt.Sprintf("file is more than %d bytes, over the 1 MiB limit", MaxFileBytes)), nil
	}
	return ParseBytes(b), nil
}

// ErrNotRegular is wrapped by ParseFile for a symlink, directory or device: memd
// never follows a link out of the repo to read a memory.
var ErrNotRegular = errors.New("not a regular file")

// ParseFile stats path first (without following a symlink), so a huge file yields
// a Memory with one violation and is never read; otherwise it parses the file like
// Parse.
func ParseFile(path string) (*Memory, error) {
	li, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("stat memory file %s: %w", path, err)
	}
	if !li.Mode().IsRegular() {
		return nil, fmt.Errorf("memory file %s: %w (%s)", path, ErrNotRegular, li.Mode().Type())
	}
	if li.Size() > MaxFileBytes {
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
	m, err := Parse(f)
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

func (c *canon) collapsible(s string) { collapse(c, s) }

func (c *canon) collapsibleBytes(s []byte) { collapse(c, s) }

// collapse appends s to c with each run of ASCII white space folded to one space (none
// leading); a method cannot take a type parameter, so the two above share this.
func collapse[S string | []byte](c *canon, s S) {
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
	tmpl       int  // open <template> depth: its content is not part of the document tree
	inBody     bool // past the head: <meta>/<link> here are not head metas (HTML's tree building)
	figures    int  // open <figure> count (div/span are allowed inside one)
	timeSeen   bool // the article's first <time> was seen
	warned     map[string]bool
}

// ParseBytes parses a memory file held in memory. It never fails: what is wrong
// with the file is in Violations. Inputs over MaxFileBytes get only that violation.
func ParseBytes(b []byte) *Memory {
	if len(b) > MaxFileBytes {
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
		off := textsafe.InvalidUTF8At(b)
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

func (p *memParser) warn(key, msg string) {
	if p.warned == nil {
		p.warned = map[string]bool{}
	}
	if p.warned[key] || len(p.m.Warnings) >= maxViolations {
		return
	}
	p.warned[key] = true
	p.m.Warnings = append(p.m.Warnings, msg)
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
			if p.tmpl > 0 {
				continue
			}
			p.text(z.Text(), preStart)
		case html.StartTagToken, html.SelfClosingTagToken:
			if p.tmpl > 0 {
				// A <template>'s content is a separate fragment: memhtml's checker never
				// sees an <article>, <mark> or <time> in it.
				if name, _ := z.TagName(); string(name) == "template" {
					p.tmpl++
				}
				continue
			}
			p.startTag()
		case html.EndTagToken:
			name, _ := z.TagName()
			if p.tmpl > 0 {
				if string(name) == "template" {
					p.tmpl--
				}
				continue
			}
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
	// Text begins the body, except the raw text of a head element (<noscript>, <style>...).
	if !p.inBody && len(bytes.TrimLeft(t, " \t\n\f\r")) > 0 &&
		(len(p.stack) == 0 || !rawTextHead(p.stack[len(p.stack)-1].a)) {
		p.inBody = true
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
	name, hasAttr := p.z.TagName()
	e := elemOf(name)
	tag := e.String()
	a := p.attrs(e, tag, hasAttr)
	p.vocabulary(e)
	inHead := !p.inBody && headElement(e.a)
	if !inHead && e.a != atom.Html && e.a != atom.Head {
		p.inBody = true
	}
	switch e.a {
	case atom.Script, atom.Style:
		p.violate(fmt.Sprintf("<%s> element (memory files carry no scripts or styles)", tag))
	case atom.Meta:
		// memhtml reads head metas only, by exact name; content as written ("" when absent).
		if inHead && a.hasName {
			p.m.Metas[a.metaName] = append(p.m.Metas[a.metaName], a.metaContent)
		}
	case atom.Link:
		if inHead && a.hasRel {
			p.link(a.rel, a.href, a.hasHref)
		}
	case atom.A:
		if strings.HasPrefix(strings.TrimSpace(a.href), "/") {
			p.m.Refs = append(p.m.Refs, strings.TrimSpace(a.href))
		}
	case atom.Time:
		p.timeElem(a.datetime, a.hasDatetime)
	case atom.Template:
		p.tmpl++
		return
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
	p.opened(e, idx, a.datetime)
}

// tagAttrs are the attribute values startTag acts on.
type tagAttrs struct {
	rel, href, metaName, metaContent, datetime        string
	hasName, hasContent, hasRel, hasHref, hasDatetime bool
}

// attrs reads the tag's attributes as HTML's tree building keeps them (the first of a
// repeated name), reporting presentation and event-handler attributes on the way.
func (p *memParser) attrs(e elem, tag string, hasAttr bool) (a tagAttrs) {
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = p.z.TagAttr()
		switch {
		case string(k) == "class" || string(k) == "style":
			p.violate(fmt.Sprintf("<%s> has a %s attribute (presentation is not allowed)", clip(tag), k))
		case len(k) > 2 && k[0] == 'o' && k[1] == 'n':
			p.violate(fmt.Sprintf("<%s> has an event-handler attribute %s", clip(tag), clip(string(k))))
		case string(k) == "data-lang" && !langToken(string(v)):
			p.warn("lang:"+string(v), fmt.Sprintf("data-lang=%s is not a language token", memd.QuoteInput(string(v))))
		}
		switch e.a {
		case atom.Meta:
			switch {
			case string(k) == "name" && !a.hasName:
				a.metaName, a.hasName = string(v), true
			case string(k) == "content" && !a.hasContent:
				a.metaContent, a.hasContent = string(v), true
			}
		case atom.Link:
			switch {
			case string(k) == "rel" && !a.hasRel:
				a.rel, a.hasRel = string(v), true
			case string(k) == "href" && !a.hasHref:
				a.href, a.hasHref = string(v), true
			}
		case atom.A:
			if string(k) == "href" && !a.hasHref {
				a.href, a.hasHref = string(v), true
			}
		case atom.Time:
			if string(k) == "datetime" && !a.hasDatetime {
				a.datetime, a.hasDatetime = string(v), true
			}
		}
	}
	return a
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
	case atom.Figure:
		p.figures++
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
		if !p.timeSeen {
			p.timeSeen = true
			p.m.EventTime = datetime
			if ValidDatetime(datetime) {
				p.m.EventAt, _ = memd.ParseTime(datetime)
			}
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
	case atom.Figure:
		p.figures--
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

// Rels is memhtml's closed edge vocabulary (its packages/contracts edges.ts), spelled with
// "_" as its schema does; the HTML token is "memhtml-" and the rel, with "-" or "_".
var Rels = []string{
	"supersedes", "contradicts", "caused_by", "leads_to", "part_of", "relates_to",
	"example_of", "supports", "laterally_related", "about_person", "authored_by",
	"from_session", "blocks", "subtask_of",
}

// RelOfToken is the rel a whole rel attribute names ("memhtml-part-of" → "part_of"), ""
// when it is outside the vocabulary. One token per attribute: "memhtml-a memhtml-b" is none.
func RelOfToken(token string) string {
	rest, ok := strings.CutPrefix(token, metaPrefix)
	if !ok {
		return ""
	}
	rest = strings.ReplaceAll(rest, "-", "_")
	if slices.Contains(Rels, rest) {
		return rest
	}
	return ""
}

const metaPrefix = "memhtml-"

// link checks a head <link> the way memhtml does: only a rel that starts with "memhtml-"
// (case-sensitively) is memhtml's, and it must be one rel of the vocabulary with a
// root-relative href.
func (p *memParser) link(rel, href string, hasHref bool) {
	if !strings.HasPrefix(rel, metaPrefix) {
		return
	}
	p.m.Links = append(p.m.Links, Link{Rel: rel, Href: strings.TrimSpace(href)})
	p.m.Refs = append(p.m.Refs, strings.TrimSpace(href))
	if RelOfToken(rel) == "" {
		p.violate(fmt.Sprintf("<link rel=%s> is outside the closed edge vocabulary (one of memhtml-%s)", memd.QuoteInput(rel), strings.ReplaceAll(strings.Join(Rels, ", memhtml-"), "_", "-")))
	}
	switch {
	case !hasHref || href == "":
		p.violate(fmt.Sprintf("<link rel=%s> has no href", memd.QuoteInput(rel)))
	case !rootRelativeHref(href):
		p.violate(fmt.Sprintf("<link rel=%s> href %s is not root-relative (want /path without scheme, host, empty segment or ..)", memd.QuoteInput(rel), memd.QuoteInput(href)))
	}
}

// rootRelativeHref is memhtml's href rule (constraints.ts isRootRelativeHref): a leading
// slash, not "//", and no empty, "." or ".." segment before any ? or #.
func rootRelativeHref(href string) bool {
	if !strings.HasPrefix(href, "/") || strings.HasPrefix(href, "//") {
		return false
	}
	path := href
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	for _, seg := range strings.Split(path[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// timeElem: every <time> carries a datetime memhtml can sort (ValidDatetime).
func (p *memParser) timeElem(datetime string, has bool) {
	switch {
	case !has:
		p.violate("a <time> has no datetime attribute")
	case !ValidDatetime(datetime):
		p.violate(fmt.Sprintf("<time datetime=%s> is not an ISO date (YYYY-MM-DD) or UTC time (YYYY-MM-DDThh:mm:ssZ)", memd.QuoteInput(datetime)))
	}
}

// ValidDatetime is memhtml's datetime rule (constraints.ts isValidDatetime), for <time>
// and the date metas: YYYY-MM-DD or YYYY-MM-DDThh:mm:ssZ exactly (so values sort as
// strings), a real calendar date, second 60 admitted (a leap second). Years before 100
// are refused, as JavaScript's Date.UTC maps them to 19xx.
func ValidDatetime(s string) bool {
	if len(s) != 10 && len(s) != 20 {
		return false
	}
	num := func(i, j int) int {
		n := 0
		for _, c := range []byte(s[i:j]) {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	if s[4] != '-' || s[7] != '-' {
		return false
	}
	y, mo, d := num(0, 4), num(5, 7), num(8, 10)
	if y < 100 || mo < 1 || mo > 12 || d < 1 || d > time.Date(y, time.Month(mo)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return false
	}
	if len(s) == 10 {
		return true
	}
	if s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z' {
		return false
	}
	h, mi, sec := num(11, 13), num(14, 16), num(17, 19)
	return h >= 0 && h <= 23 && mi >= 0 && mi <= 59 && sec >= 0 && sec <= 60
}

// knownElements is memhtml's closed element vocabulary (vocabulary.ts KNOWN_ELEMENTS)
// without div and span, which are allowed inside a <figure> only.
var knownElements = map[atom.Atom]bool{}

func init() {
	for _, a := range []atom.Atom{
		atom.Html, atom.Head, atom.Body, atom.Title, atom.Meta, atom.Link,
		atom.Article, atom.Mark, atom.Time, atom.Dl, atom.Dt, atom.Dd, atom.Data, atom.Cite,
		atom.Q, atom.Dfn, atom.Figure, atom.Figcaption, atom.Details, atom.Summary, atom.Aside,
		atom.Section, atom.Abbr, atom.Pre, atom.Code, atom.Kbd, atom.Samp, atom.Var,
		atom.Table, atom.Caption, atom.Thead, atom.Tbody, atom.Tr, atom.Th, atom.Td, atom.P,
		atom.Ul, atom.Ol, atom.Li, atom.A, atom.Strong, atom.Em, atom.Address,
	} {
		knownElements[a] = true
	}
}

// vocabulary warns, as memhtml's checker does (once per element name), about an element
// outside the closed vocabulary: the file stays valid, but memd never writes one.
func (p *memParser) vocabulary(e elem) {
	switch {
	case e.a == atom.Div || e.a == atom.Span:
		if p.figures == 0 {
			p.warn("scoped:"+e.String(), fmt.Sprintf("<%s> outside a <figure>: use a semantic element instead", e))
		}
	case !knownElements[e.a]:
		p.warn("unknown:"+e.String(), fmt.Sprintf("<%s> is outside the closed vocabulary", clip(e.String())))
	}
}

// headElement: the start tags HTML's tree building puts in <head> while the body has not
// begun; any other start tag (or text) begins the body.
func headElement(a atom.Atom) bool {
	switch a {
	case atom.Html, atom.Head, atom.Title, atom.Meta, atom.Link, atom.Base, atom.Basefont,
		atom.Bgsound, atom.Noscript, atom.Noframes, atom.Style, atom.Script, atom.Template:
		return true
	}
	return false
}

// rawTextHead: head elements whose content is raw text (scripting on, as parse5 parses).
func rawTextHead(a atom.Atom) bool {
	return a == atom.Noscript || a == atom.Noframes || a == atom.Style || a == atom.Script
}

// langToken is memhtml's data-lang grammar: [A-Za-z0-9][A-Za-z0-9_+#.-]*.
func langToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("_+#.-", rune(c))) {
			return false
		}
	}
	return s != ""
}

// jsTrim trims what JavaScript's String.prototype.trim does (memhtml's empty-claim rule):
// Unicode White_Space without U+0085, plus U+FEFF. So "<mark>&nbsp;</mark>" is empty.
func jsTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return r == 0xFEFF || r != 0x85 && unicode.IsSpace(r)
	})
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
	m.Gist = jsTrim(string(p.gist.b))
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

// MetaNames is memhtml's closed meta vocabulary (vocabulary.ts META_ORDER): a memhtml- name
// outside it makes the file invalid. Names are case-sensitive.
var MetaNames = []string{
	MetaType, MetaStatus, MetaCreated, MetaUpdated, MetaConfidence, MetaImportance,
	MetaContentHash, "memhtml-author", "memhtml-session", "memhtml-prompt", "memhtml-turn",
	MetaValidFrom, MetaValidUntil, MetaReprieves, MetaArchived, MetaSuperseded,
	"memhtml-needs-revision", MetaTaskStatus, MetaDue, MetaEntity, MetaTag, MetaAlias,
}

// dateMetas carry a ValidDatetime when present.
var dateMetas = []string{MetaCreated, MetaUpdated, MetaValidFrom, MetaValidUntil, MetaArchived, MetaDue}

func (p *memParser) head() {
	m := p.m
	p.checkMetaNames()
	nonEmpty := func(vals []string) []string {
		return slices.DeleteFunc(slices.Clone(vals), func(v string) bool { return v == "" })
	}
	m.Type = m.Meta(MetaType)
	m.Status = m.Meta(MetaStatus)
	m.Created = m.Meta(MetaCreated)
	m.Updated = m.Meta(MetaUpdated)
	m.ValidUntil = m.Meta(MetaValidUntil)
	m.TaskStatus = m.Meta(MetaTaskStatus)
	m.Due = m.Meta(MetaDue)
	m.ContentHash = m.Meta(MetaContentHash)
	if v := strings.TrimSpace(m.Meta(MetaSuperseded)); strings.HasPrefix(v, "/") {
		m.Refs = append(m.Refs, v)
	}
	m.Entities = nonEmpty(m.Metas[MetaEntity])
	m.Tags = nonEmpty(m.Metas[MetaTag])
	m.Aliases = nonEmpty(m.Metas[MetaAlias])
	for _, req := range []string{MetaType, MetaStatus, MetaCreated, MetaUpdated} {
		if len(m.Metas[req]) == 0 {
			p.violate(fmt.Sprintf("missing required meta %s", req))
		}
	}
	if len(m.Metas[MetaType]) > 0 && !slices.Contains(MemoryTypes, m.Type) {
		p.violate(fmt.Sprintf("memhtml-type %s is not a memory type (%s)", memd.QuoteInput(m.Type), strings.Join(MemoryTypes, ", ")))
	}
	if len(m.Metas[MetaStatus]) > 0 && m.Status != memd.StatusActive && m.Status != memd.StatusArchived {
		p.violate(fmt.Sprintf("memhtml-status %s is neither active nor archived", memd.QuoteInput(m.Status)))
	}
	p.readDates()
	p.checkNumbers()
	p.checkTaskStatus()
}

// checkMetaNames holds memhtml's metas to its closed vocabulary, each once unless repeatable,
// in name order (one order of messages for one file).
func (p *memParser) checkMetaNames() {
	m := p.m
	for _, name := range slices.Sorted(maps.Keys(m.Metas)) {
		vals := m.Metas[name]
		if !strings.HasPrefix(name, metaPrefix) {
			continue // not memhtml's: memd's own (memd-members) and anyone else's
		}
		if !slices.Contains(MetaNames, name) {
			p.violate(fmt.Sprintf("meta %s is outside memhtml's closed meta vocabulary (names are case-sensitive)", memd.QuoteInput(name)))
			continue
		}
		if len(vals) > 1 && !repeatableMetas[name] {
			p.violate(fmt.Sprintf("meta %s appears %d times (%s); it may appear once", clip(name), len(vals), memd.QuoteInput(strings.Join(vals, ", "))))
		}
	}
}

// readDates reads the date metas into times; one that is not an ISO date is a violation, and
// still read when it parses at all (doctor and the planners see it).
func (p *memParser) readDates() {
	m := p.m
	for _, name := range dateMetas {
		if len(m.Metas[name]) == 0 {
			continue
		}
		v := m.Meta(name)
		if !ValidDatetime(v) {
			p.violate(fmt.Sprintf("%s %s is not an ISO date (YYYY-MM-DD) or UTC time (YYYY-MM-DDThh:mm:ssZ)", name, memd.QuoteInput(v)))
		}
		t, _ := memd.ParseTime(v)
		switch name {
		case MetaCreated:
			m.CreatedAt = t
		case MetaUpdated:
			m.UpdatedAt = t
		case MetaValidUntil:
			m.ValidUntilAt = t
		}
	}
}

// checkNumbers warns of a malformed optional number: memhtml drops it (the file stays valid).
func (p *memParser) checkNumbers() {
	m := p.m
	for _, o := range []struct {
		name     string
		min, max float64
		integral bool
		want     string
	}{
		{MetaConfidence, 0, 1, false, "a number in 0..1"},
		{MetaImportance, 1, 10, true, "an integer in 1..10"},
		{MetaReprieves, 0, 1 << 53, true, "a whole number"},
	} {
		if v := m.Meta(o.name); strings.TrimSpace(v) != "" && !boundedNumber(v, o.min, o.max, o.integral) {
			p.warn("drop:"+o.name, fmt.Sprintf("%s %s is not %s; memhtml ignores it", o.name, memd.QuoteInput(v), o.want))
		}
	}
}

// checkTaskStatus: tasks, and only tasks, carry one of TaskStatuses.
func (p *memParser) checkTaskStatus() {
	m := p.m
	if len(m.Metas[MetaTaskStatus]) > 0 {
		if m.Type != memd.TypeTask {
			p.violate(fmt.Sprintf("memhtml-task-status %s on a memory of type %s; only tasks carry it", memd.QuoteInput(m.TaskStatus), memd.QuoteInput(m.Type)))
		}
		if !slices.Contains(TaskStatuses, m.TaskStatus) {
			p.violate(fmt.Sprintf("memhtml-task-status %s is not one of %s", memd.QuoteInput(m.TaskStatus), strings.Join(TaskStatuses, ", ")))
		}
	} else if m.Type == memd.TypeTask {
		p.violate("task without memhtml-task-status (todo, doing, blocked or done)")
	}
}

// boundedNumber is memhtml's optional-number rule: JavaScript's Number() of the value
// (surrounding whitespace ignored), finite, in range, whole when integral.
func boundedNumber(v string, min, max float64, integral bool) bool {
	f, err := strconv.ParseFloat(jsTrim(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < min || f > max {
		return false
	}
	return !integral || f == math.Trunc(f)
}

// clip bounds a tag or attribute name quoted in a message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
