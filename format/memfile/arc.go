package memfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memd-dev/memd"
)

// MetaMembers is memd's own meta on an arc: the member hash (ArcMemberHash). memhtml
// ignores metas without its prefix.
const MetaMembers = "memd-members"

// MetaAuthor is memhtml's provenance meta; ArcAuthor is its value on the arcs memd writes
// (memhtml's own sleep signs "agent:sleep"). An arc is memd's to rewrite only when it says so
// (IsMemdArc): a curated arc (`memhtml write --type arc`) or memhtml's own is never touched.
const (
	MetaAuthor = "memhtml-author"
	ArcAuthor  = "agent:memd"
)

// IsMemdArc reports whether m is an arc memd wrote: type arc signed ArcAuthor, or, for arcs
// written before memd signed them, unsigned and carrying memd's member hash.
func IsMemdArc(m *Memory) bool {
	if m == nil || m.Type != memd.TypeArc {
		return false
	}
	if a := m.Metas[MetaAuthor]; len(a) > 0 {
		return a[0] == ArcAuthor
	}
	return len(m.Metas[MetaMembers]) > 0
}

// arcOwnMetas are the memhtml metas RenderArc writes itself; any other memhtml meta or link
// on a memd arc was added by someone else (memhtml's person-links, confidence decay, a
// reprieve...) and is carried into the rewrite (ArcCarry).
var arcOwnMetas = []string{MetaType, MetaStatus, MetaCreated, MetaUpdated, MetaContentHash, MetaAuthor, MetaEntity}

// ArcCarry is what a rewrite of the arc whose bytes are old keeps: every memhtml head line
// RenderArc does not write itself, in document order, each once.
func ArcCarry(old []byte) []HeadLine {
	var out []HeadLine
	for _, l := range HeadLines(old) {
		if !l.Link && slices.Contains(arcOwnMetas, l.Name) || slices.Contains(out, l) {
			continue
		}
		if !l.Link && !slices.Contains(MetaNames, l.Name) {
			continue // outside memhtml's vocabulary: never carried into a file memd writes
		}
		if l.Link && RelOfToken(l.Name) == "" {
			continue
		}
		out = append(out, l)
	}
	return out
}

// ArcEpisode is one member of an arc.
type ArcEpisode struct {
	Path        string
	Date        time.Time
	Title, Gist string
	ContentHash string // optional; when set it is part of the member hash
}

// Arc is the episodes that share one entity in one year (docs/ARCHITECTURE.md §5.2).
type Arc struct {
	Entity   string
	Year     int
	Episodes []ArcEpisode // rendered sorted by date, then path
	Summary  string       // plain text; empty → a deterministic sentence
	// Carry are head lines another writer added to the arc on disk (ArcCarry), kept by the
	// rewrite: metas in memhtml's order among memd's own, links after them.
	Carry []HeadLine
}

// ArcPath is areas/arcs/<Slug(entity)>-<YYYY>.html. An entity with nothing sluggable
// gets a stable name from its hash so two such entities do not share a file.
func ArcPath(entity string, year int) string {
	s := memd.Slug(entity)
	if s == "" {
		sum := sha256.Sum256([]byte(entity))
		s = "entity-" + hex.EncodeToString(sum[:4])
	}
	return memd.ArcsDir + "/" + s + "-" + memd.YearSegment(year) + memd.MemoryExt
}

func sortedEpisodes(eps []ArcEpisode) []ArcEpisode {
	out := slices.Clone(eps)
	slices.SortStableFunc(out, func(a, b ArcEpisode) int {
		if c := a.Date.Compare(b.Date); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return out
}

// ArcMemberHash is "sha256:<hex>" over the members sorted by path, each with what the
// arc renders of it (date, title, gist) and its content hash when known. Any change to
// the member set or to what the arc shows of a member changes it; input order does not.
func ArcMemberHash(episodes []ArcEpisode) string {
	eps := slices.Clone(episodes)
	slices.SortStableFunc(eps, func(a, b ArcEpisode) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return a.Date.Compare(b.Date)
	})
	h := sha256.New()
	for _, e := range eps {
		// Length-prefixed fields, so no value can forge a field boundary.
		for _, f := range []string{e.Path, dateOf(e.Date), e.Title, e.Gist, e.ContentHash} {
			h.Write([]byte(strconv.Itoa(len(f))))
			h.Write([]byte{':'})
			h.Write([]byte(f))
		}
		h.Write([]byte{'\n'})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func dateOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02")
}

// ArcClaim is the arc's <mark> sentence: "<entity> in <YYYY>: <N> episodes, <first> to <last>."
func ArcClaim(a Arc) string {
	eps := sortedEpisodes(a.Episodes)
	y := memd.YearSegment(a.Year)
	switch len(eps) {
	case 0:
		return fmt.Sprintf("%s in %s: 0 episodes.", a.Entity, y)
	case 1:
		return fmt.Sprintf("%s in %s: 1 episode, %s.", a.Entity, y, dateOf(eps[0].Date))
	}
	return fmt.Sprintf("%s in %s: %d episodes, %s to %s.", a.Entity, y, len(eps), dateOf(eps[0].Date), dateOf(eps[len(eps)-1].Date))
}

// RenderArc renders an arc as a memhtml file of type arc. It is deterministic and uses
// no clock: created/updated are the first and last episode dates, so the same members
// give the same bytes on every machine. The output passes Parse with no violation.
func RenderArc(a Arc) []byte {
	eps := sortedEpisodes(a.Episodes)
	article := renderArcArticle(a, eps)
	// The content hash is memhtml's canonical article text; take it from our own parser
	// so the two can never disagree.
	hash := ParseBytes([]byte("<title>x</title>" + article)).ComputedHash

	created, updated := memd.YearSegment(a.Year)+"-01-01", memd.YearSegment(a.Year)+"-01-01"
	if len(eps) > 0 && !eps[0].Date.IsZero() {
		created, updated = dateOf(eps[0].Date), dateOf(eps[len(eps)-1].Date)
	}
	// A date memhtml cannot sort (a year before 100 or after 9999) would make the arc
	// invalid; such an arc still gets a fixed, valid stamp.
	if !ValidDatetime(created) || !ValidDatetime(updated) {
		created, updated = "1970-01-01", "1970-01-01"
	}
	esc := html.EscapeString
	var b bytes.Buffer
	b.Grow(1024 + 256*len(eps) + len(a.Summary))
	b.WriteString("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(arcTitle(a)))
	metas := []HeadLine{
		{Name: MetaType, Value: memd.TypeArc}, {Name: MetaStatus, Value: memd.StatusActive},
		{Name: MetaCreated, Value: created}, {Name: MetaUpdated, Value: updated},
		{Name: MetaContentHash, Value: hash}, {Name: MetaAuthor, Value: ArcAuthor},
	}
	if e := plain(a.Entity); e != "" {
		metas = append(metas, HeadLine{Name: MetaEntity, Value: e})
	}
	var links []HeadLine
	for _, l := range a.Carry {
		if l.Link {
			links = append(links, l)
		} else {
			metas = append(metas, l)
		}
	}
	// memhtml's META_ORDER, so its editors and memd's rewrites keep each other's lines.
	slices.SortStableFunc(metas, func(x, y HeadLine) int { return metaOrder(x.Name) - metaOrder(y.Name) })
	for _, m := range metas {
		b.WriteString(metaLine(m.Name, m.Value) + "\n")
	}
	// The member list lives in the article (<a href> per member) and in the members'
	// memhtml-part-of links to the arc (memhtml's own arcs' edge); archive's link rewriting
	// repoints the <a href>s like any other.
	b.WriteString(metaLine(MetaMembers, ArcMemberHash(a.Episodes)) + "\n")
	for _, l := range links {
		b.WriteString(linkLine(l.Name, l.Value) + "\n")
	}
	b.WriteString("</head>\n<body>\n")
	b.WriteString(article)
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// plain makes member text safe to render: valid UTF-8, no control characters, runs of
// whitespace collapsed. Writers' files may hold anything; the arc must stay valid.
func plain(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.Join(strings.Fields(s), " ")
}

func arcTitle(a Arc) string {
	t := plain(a.Entity)
	if t == "" {
		t = "Unnamed entity"
	}
	return t + " in " + memd.YearSegment(a.Year)
}

func renderArcArticle(a Arc, eps []ArcEpisode) string {
	esc := html.EscapeString
	var b strings.Builder
	b.WriteString("<article>\n")
	claim := plain(ArcClaim(Arc{Entity: a.Entity, Year: a.Year, Episodes: eps}))
	fmt.Fprintf(&b, "<p><mark>%s</mark></p>\n", esc(claim))
	if len(eps) > 0 {
		b.WriteString("<ol>\n")
		for _, e := range eps {
			d := dateOf(e.Date)
			title := plain(e.Title)
			if title == "" {
				title = plain(e.Path[strings.LastIndexByte(e.Path, '/')+1:])
			}
			if title == "" {
				title = "untitled"
			}
			if ValidDatetime(d) {
				fmt.Fprintf(&b, "<li><time datetime=\"%s\">%s</time> ", d, d)
			} else {
				// memhtml refuses a <time> it cannot sort: the date stays as text.
				fmt.Fprintf(&b, "<li>%s ", esc(d))
			}
			fmt.Fprintf(&b, "<a href=\"%s\">%s</a>", esc(memd.PathToHref(e.Path)), esc(title))
			if g := plain(e.Gist); g != "" {
				fmt.Fprintf(&b, ": %s", esc(g))
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ol>\n")
	}
	// The summary is a <section> of paragraphs: memhtml's element vocabulary has no
	// headings (an <h2> is a warning in its checker).
	b.WriteString("<section>\n")
	summary := strings.TrimSpace(strings.ReplaceAll(strings.ToValidUTF8(a.Summary, "\uFFFD"), "\r\n", "\n"))
	if summary == "" {
		summary = defaultArcSummary(a, eps)
	}
	for _, para := range strings.Split(summary, "\n\n") {
		if para = plain(para); para != "" {
			fmt.Fprintf(&b, "<p>%s</p>\n", esc(para))
		}
	}
	b.WriteString("</section>\n</article>\n")
	return b.String()
}

// defaultArcSummary is the sentence an arc carries until a summarizer fills it.
func defaultArcSummary(a Arc, eps []ArcEpisode) string {
	name := plain(a.Entity)
	if len(eps) == 0 {
		return fmt.Sprintf("No episodes of %s in %s.", name, memd.YearSegment(a.Year))
	}
	last := eps[len(eps)-1]
	title := plain(last.Title)
	if title == "" {
		title = plain(last.Path)
	}
	return fmt.Sprintf("%s appears in %d episodic memories of %s, from %s to %s. The latest is %q.",
		name, len(eps), memd.YearSegment(a.Year), dateOf(eps[0].Date), dateOf(last.Date), title)
}
