package memd

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
)

// MetaMembers is memd's own meta on an arc: the member hash (ArcMemberHash). memhtml
// ignores metas without its prefix.
const MetaMembers = "memd-members"

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
}

// ArcPath is areas/arcs/<Slug(entity)>-<YYYY>.html. An entity with nothing sluggable
// gets a stable name from its hash so two such entities do not share a file.
func ArcPath(entity string, year int) string {
	s := Slug(entity)
	if s == "" {
		sum := sha256.Sum256([]byte(entity))
		s = "entity-" + hex.EncodeToString(sum[:4])
	}
	return ArcsDir + "/" + s + "-" + yearSegment(year) + MemoryExt
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
	y := yearSegment(a.Year)
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
// give the same bytes on every machine. The output passes ParseMemory with no violation.
func RenderArc(a Arc) []byte {
	eps := sortedEpisodes(a.Episodes)
	article := renderArcArticle(a, eps)
	// The content hash is memhtml's canonical article text; take it from our own parser
	// so the two can never disagree.
	hash := ParseMemoryBytes([]byte("<title>x</title>" + article)).ComputedHash

	created, updated := yearSegment(a.Year)+"-01-01", yearSegment(a.Year)+"-01-01"
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
	meta := func(name, content string) {
		fmt.Fprintf(&b, "<meta name=\"%s\" content=\"%s\">\n", name, esc(content))
	}
	meta(MetaType, TypeArc)
	meta(MetaStatus, StatusActive)
	meta(MetaCreated, created)
	meta(MetaUpdated, updated)
	meta(MetaContentHash, hash)
	if e := plain(a.Entity); e != "" {
		meta(MetaEntity, e)
	}
	// The member list lives in the article (<a href> per member): memhtml's edge
	// vocabulary is closed, so no invented <link rel>; archive's link rewriting repoints
	// the <a href>s like any other.
	meta(MetaMembers, ArcMemberHash(a.Episodes))
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
	return t + " in " + yearSegment(a.Year)
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
			fmt.Fprintf(&b, "<a href=\"%s\">%s</a>", esc(PathToHref(e.Path)), esc(title))
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
		return fmt.Sprintf("No episodes of %s in %s.", name, yearSegment(a.Year))
	}
	last := eps[len(eps)-1]
	title := plain(last.Title)
	if title == "" {
		title = plain(last.Path)
	}
	return fmt.Sprintf("%s appears in %d episodic memories of %s, from %s to %s. The latest is %q.",
		name, len(eps), yearSegment(a.Year), dateOf(eps[0].Date), dateOf(last.Date), title)
}
