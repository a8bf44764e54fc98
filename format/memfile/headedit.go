package memfile

import (
	"bytes"
	"slices"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Head editors: memhtml's setMeta / addLink (packages/html editors.ts) in Go. They splice a
// file's bytes by source offset, one whole line per meta or link, so a bookkeeping edit never
// moves a byte of the article (nor its content hash) and gives the bytes memhtml's own
// editors give: a file both tools stamp does not churn.

// headElem is one memhtml <meta name> or <link rel> of a head, with its byte span.
type headElem struct {
	start, end int
	isLink     bool
	name       string // meta name or link rel, as written
	value      string // meta content or link href, unescaped
}

// headScan is what the head of a file holds: memhtml's metas and links in document order and
// where a line appended to the head goes (the start of the </head> line). ok is false for a
// file with no head memhtml's editors could find.
type headScan struct {
	elems []headElem
	tail  int
	ok    bool
}

// scanHead reads the head's memhtml metas and links the way HTML's tree building places them:
// the head ends at </head>, or where the body begins (a body start tag or text).
func scanHead(b []byte) headScan {
	z := html.NewTokenizer(bytes.NewReader(b))
	var s headScan
	off := 0
	inRaw := 0       // inside <title>, <noscript>...: their text is not body text
	sawHead := false // an implied head with nothing in it has no place memhtml's editors write to
	for {
		tt := z.Next()
		raw := len(z.Raw())
		start := off
		off += raw
		switch tt {
		case html.ErrorToken:
			return s
		case html.TextToken:
			if inRaw == 0 && len(bytes.TrimLeft(z.Text(), " \t\n\f\r")) > 0 {
				s.tail, s.ok = lineStart(b, start), sawHead || len(s.elems) > 0
				return s // text begins the body
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch a := atom.Lookup(name); {
			case a == atom.Head:
				s.tail, s.ok = lineStart(b, start), true
				return s
			case a == atom.Title || rawTextHead(a):
				inRaw = max(0, inRaw-1)
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			if !headElement(a) && a != atom.Html && a != atom.Head {
				s.tail, s.ok = lineStart(b, start), sawHead || len(s.elems) > 0
				return s
			}
			if a == atom.Head {
				sawHead = true
			}
			if a == atom.Title || rawTextHead(a) {
				inRaw++
			}
			if (a == atom.Meta || a == atom.Link) && hasAttr {
				if e, ok := memhtmlHeadElem(z, a == atom.Link); ok {
					e.start, e.end = start, off
					s.elems = append(s.elems, e)
				}
			}
		}
	}
}

// memhtmlHeadElem reads a <meta>'s name/content or a <link>'s rel/href (first value of each,
// as the HTML parser keeps it); ok when the name or rel has memhtml's prefix.
func memhtmlHeadElem(z *html.Tokenizer, isLink bool) (headElem, bool) {
	e := headElem{isLink: isLink}
	keyAttr, valAttr := "name", "content"
	if isLink {
		keyAttr, valAttr = "rel", "href"
	}
	var haveKey, haveVal bool
	for {
		k, v, more := z.TagAttr()
		switch {
		case string(k) == keyAttr && !haveKey:
			e.name, haveKey = string(v), true
		case string(k) == valAttr && !haveVal:
			e.value, haveVal = string(v), true
		}
		if !more {
			break
		}
	}
	return e, haveKey && strings.HasPrefix(e.name, metaPrefix)
}

func lineStart(b []byte, off int) int { return bytes.LastIndexByte(b[:off], '\n') + 1 }

func lineEnd(b []byte, off int) int {
	if i := bytes.IndexByte(b[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(b)
}

// escapeAttr is memhtml's escapeAttribute: the one quote style, line breaks as references so
// a meta or link stays one line.
func escapeAttr(v string) string {
	return strings.NewReplacer("&", "&amp;", `"`, "&quot;", "\u00a0", "&nbsp;", "\r", "&#13;", "\n", "&#10;").Replace(v)
}

func metaLine(name, content string) string {
	return `<meta name="` + escapeAttr(name) + `" content="` + escapeAttr(content) + `">`
}

func linkLine(rel, href string) string {
	return `<link rel="` + escapeAttr(rel) + `" href="` + escapeAttr(href) + `">`
}

func splice(b []byte, start, end int, text string) []byte {
	out := make([]byte, 0, len(b)+len(text))
	out = append(out, b[:start]...)
	out = append(out, text...)
	return append(out, b[end:]...)
}

// metaOrder is a name's place in memhtml's META_ORDER (MetaNames); unknown names sort last.
func metaOrder(name string) int {
	if i := slices.Index(MetaNames, name); i >= 0 {
		return i
	}
	return len(MetaNames)
}

// SetMeta sets the first head meta of name to value, or inserts one where memhtml's META_ORDER
// puts it (before the first meta that sorts after it, else after the last that sorts before
// it, else at </head>). A name outside memhtml's vocabulary, or a file with no head, is
// returned unchanged, as memhtml's setMeta does.
func SetMeta(b []byte, name, value string) []byte {
	if !slices.Contains(MetaNames, name) {
		return b
	}
	s := scanHead(b)
	if !s.ok {
		return b
	}
	var metas []headElem
	for _, e := range s.elems {
		if !e.isLink {
			metas = append(metas, e)
		}
	}
	for _, e := range metas {
		if e.name == name {
			if e.value == value {
				return b
			}
			return splice(b, e.start, e.end, metaLine(name, value))
		}
	}
	line := metaLine(name, value) + "\n"
	target := metaOrder(name)
	for _, e := range metas {
		if metaOrder(e.name) > target {
			at := lineStart(b, e.start)
			return splice(b, at, at, line)
		}
	}
	for i := len(metas) - 1; i >= 0; i-- {
		if metaOrder(metas[i].name) <= target {
			at := lineEnd(b, metas[i].end)
			return splice(b, at, at, line)
		}
	}
	return splice(b, s.tail, s.tail, line)
}

// RelToken is the <link rel> token of a rel ("part_of" → "memhtml-part-of"), memhtml's
// relTokenFor.
func RelToken(rel string) string { return metaPrefix + strings.ReplaceAll(rel, "_", "-") }

// AddLink appends <link rel="<token>" href="<href>"> after the head's last memhtml link (else
// its last memhtml meta, else at </head>); a no-op when that exact pair is there, as memhtml's
// addLink is. rel is the rel ("part_of") or its token.
func AddLink(b []byte, rel, href string) []byte {
	token := rel
	if !strings.HasPrefix(rel, metaPrefix) {
		token = RelToken(rel)
	}
	s := scanHead(b)
	if !s.ok {
		return b
	}
	at := s.tail
	for _, e := range s.elems {
		if e.isLink && e.name == token && e.value == href {
			return b
		}
	}
	if n := len(s.elems); n > 0 {
		last := -1
		for i, e := range s.elems {
			if e.isLink {
				last = i
			}
		}
		if last < 0 {
			last = n - 1
		}
		at = lineEnd(b, s.elems[last].end)
	}
	return splice(b, at, at, linkLine(token, href)+"\n")
}

// HeadLine is one memhtml meta or link of a head, as CarriedHead returns it.
type HeadLine struct {
	Link        bool
	Name, Value string // meta name and content, or link rel token and href
}

// HeadLines lists the memhtml metas and links of a file's head in document order.
func HeadLines(b []byte) []HeadLine {
	s := scanHead(b)
	out := make([]HeadLine, 0, len(s.elems))
	for _, e := range s.elems {
		out = append(out, HeadLine{Link: e.isLink, Name: e.name, Value: e.value})
	}
	return out
}

// ArchiveStamps makes the head edits memhtml's archive makes on a memory it moves into
// archive/ (packages/store archiveMemory, and its sleep's archiveFile): memhtml-status
// archived, memhtml-updated and memhtml-archived at the archiving instant (UTC, seconds).
func ArchiveStamps(b []byte, at time.Time) []byte {
	ts := at.UTC().Format("2006-01-02T15:04:05Z")
	b = SetMeta(b, MetaStatus, memd.StatusArchived)
	b = SetMeta(b, MetaUpdated, ts)
	return SetMeta(b, MetaArchived, ts)
}

// archiveStampMetas are the metas ArchiveStamps sets.
var archiveStampMetas = []string{MetaStatus, MetaUpdated, MetaArchived}

// SameButArchiveStamps reports whether a and b differ at most in the values of the metas
// ArchiveStamps sets: the same file archived by two machines at two instants (or by memd and
// by memhtml). A merge takes either side rather than keeping a conflict copy.
func SameButArchiveStamps(a, b []byte) bool {
	strip := func(x []byte) []byte {
		s := scanHead(x)
		out := x
		for i := len(s.elems) - 1; i >= 0; i-- {
			if e := s.elems[i]; !e.isLink && slices.Contains(archiveStampMetas, e.name) {
				out = splice(out, e.start, e.end, "")
			}
		}
		return out
	}
	return bytes.Equal(strip(a), strip(b))
}

// CarryArchiveStamps sets on b the archive stamps (ArchiveStamps' metas) that stamped holds:
// a change made to a memory on one machine while another archived it lands at the archive
// path still saying it is archived.
func CarryArchiveStamps(stamped, b []byte) []byte {
	for _, l := range HeadLines(stamped) {
		if !l.Link && slices.Contains(archiveStampMetas, l.Name) {
			b = SetMeta(b, l.Name, l.Value)
		}
	}
	return b
}
