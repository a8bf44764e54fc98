package memd

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Special folders and the memory file extension (docs/FORMATS.md §1).
const (
	InboxDir     = "areas/inbox"
	TaskInboxDir = "areas/inbox/tasks"
	ArcsDir      = "areas/arcs"
	PeopleDir    = "resources/people"
	MemoryExt    = ".html"
)

// TasksSubdir is the directory segment tasks sit under inside a project or the inbox.
const TasksSubdir = "tasks"

// ErrBadHref is wrapped by HrefToPath for every href it refuses.
var ErrBadHref = errors.New("not a root-relative memory href")

// NormalizePath reduces a caller path to the git-tree form: leading slashes dropped,
// runs of slashes collapsed, one trailing slash dropped. One pass, so its cost is
// linear in len(p) whatever the input (the seed measured a regex strip at 3 s on 64 KB
// of slashes).
func NormalizePath(p string) string {
	i := 0
	for i < len(p) && p[i] == '/' {
		i++
	}
	p = p[i:]
	// Fast path: nothing to collapse and no trailing slash, return the input as is.
	if !strings.Contains(p, "//") {
		return strings.TrimSuffix(p, "/")
	}
	var b strings.Builder
	b.Grow(len(p))
	prevSlash := false
	for j := 0; j < len(p); j++ {
		c := p[j]
		if c == '/' {
			if prevSlash {
				continue
			}
			prevSlash = true
		} else {
			prevSlash = false
		}
		b.WriteByte(c)
	}
	return strings.TrimSuffix(b.String(), "/")
}

// PathViolation says why p is not a usable memory path, naming what it saw, or ""
// when p is one. It is the single source of truth: ValidMemoryPath asks it.
// A memory path is repo-relative, '/'-separated, without a leading slash, inside a PARA
// bucket, ends in .html and has no empty, "." or ".." segment.
func PathViolation(p string) string {
	if p == "" {
		return "memory path is empty"
	}
	q := QuoteInput(p)
	if !utf8.ValidString(p) {
		return fmt.Sprintf("memory path %s is not valid UTF-8", q)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c < 0x20 || c == 0x7f {
			return fmt.Sprintf("memory path %s contains control character %q", q, c)
		}
		if c == '\\' {
			return fmt.Sprintf("memory path %s contains a backslash; paths are '/'-separated", q)
		}
	}
	if p[0] == '/' {
		return fmt.Sprintf("memory path %s has a leading slash; it must be repo-relative", q)
	}
	// Traversal first: it is the clause that keeps a path inside the repo.
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch seg := p[start:i]; seg {
		case "":
			if i == len(p) {
				return fmt.Sprintf("memory path %s ends in a slash; it must name a file", q)
			}
			return fmt.Sprintf("memory path %s has an empty segment (\"//\")", q)
		case ".":
			return fmt.Sprintf("memory path %s has a \".\" segment", q)
		case "..":
			return fmt.Sprintf("memory path %s has a \"..\" segment (traversal)", q)
		}
		start = i + 1
	}
	first, _, hasDir := strings.Cut(p, "/")
	if !hasDir {
		return fmt.Sprintf("memory path %s is not inside a bucket (projects/, areas/, resources/, archive/)", q)
	}
	if !isBucket(first) {
		return fmt.Sprintf("memory path %s starts with %s, not a bucket (projects, areas, resources, archive)", q, QuoteInput(first))
	}
	if !strings.HasSuffix(p, MemoryExt) {
		base := p[strings.LastIndexByte(p, '/')+1:]
		ext := ""
		if k := strings.LastIndexByte(base, '.'); k >= 0 {
			ext = base[k:]
		}
		if ext == "" {
			return fmt.Sprintf("memory path %s has no extension; memories end in .html", q)
		}
		return fmt.Sprintf("memory path %s ends in %s, not .html", q, QuoteInput(ext))
	}
	if base := p[strings.LastIndexByte(p, '/')+1:]; base == MemoryExt {
		return fmt.Sprintf("memory path %s has an empty file name before .html", q)
	}
	return ""
}

// ValidMemoryPath reports whether p is a usable memory path (PathViolation(p) == "").
func ValidMemoryPath(p string) bool { return PathViolation(p) == "" }

// GeneratedNames are the listings memhtml publish and memhtml's sleep generate in any
// directory (its indexer's GENERATED_NAMES): never memories.
var GeneratedNames = []string{"index.html", "sitemap.xml"}

// IsMemoryMD reports whether rel (slash-separated) is a MEMORY.md, in any directory.
func IsMemoryMD(rel string) bool {
	return rel == MemoryMDName || strings.HasSuffix(rel, "/"+MemoryMDName)
}

// IsNonMemory reports whether p is a file memhtml never treats as a memory, so memd never
// parses, counts, reports or plans it as one (docs/FORMATS.md §2): a generated listing
// (index.html, sitemap.xml) anywhere, or anything outside the four buckets (memhtml's
// .memhtml/, a root README.html). It is the one predicate sleep, doctor, the inventory
// and the metrics use.
func IsNonMemory(p string) bool {
	return IsGenerated(p) || BucketOf(p) == ""
}

// IsGenerated reports whether p's base name is one of GeneratedNames.
func IsGenerated(p string) bool {
	base := p[strings.LastIndexByte(p, '/')+1:]
	return base == GeneratedNames[0] || base == GeneratedNames[1]
}

// isBucket is the bucket names' match without an error: BucketOf must not allocate.
func isBucket(s string) bool {
	_, ok := lookupName(s, Buckets)
	return ok
}

// BucketOf returns the PARA bucket p sits in ("" when none). p may carry leading or
// repeated slashes; it does not allocate.
func BucketOf(p string) Bucket {
	i := 0
	for i < len(p) && p[i] == '/' {
		i++
	}
	p = p[i:]
	first, _, _ := strings.Cut(p, "/")
	if isBucket(first) {
		return Bucket(first)
	}
	return ""
}

// ArchivePath maps p to archive/<YYYY>/<p>, the whole normalised path mirrored under a
// four-digit year, so the move is a pure rename that git follows.
func ArchivePath(p string, year int) string {
	return string(BucketArchive) + "/" + YearSegment(year) + "/" + NormalizePath(p)
}

// YearSegment is an archive year's folder name: four digits, zero-padded (archive/0999/...).
func YearSegment(year int) string {
	if year < 0 {
		year = 0
	}
	s := strconv.Itoa(year)
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}

// splitArchive parses archive/<YYYY>/<rest> out of a normalised path. rest may be "".
func splitArchive(n string) (year int, rest string, ok bool) {
	after, found := strings.CutPrefix(n, string(BucketArchive)+"/")
	if !found {
		return 0, "", false
	}
	seg, rest, _ := strings.Cut(after, "/")
	// Four or more digits (a calendar-year label); capped so it fits an int.
	if len(seg) < 4 || len(seg) > 9 {
		return 0, "", false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return 0, "", false
		}
	}
	y, _ := strconv.Atoi(seg)
	return y, rest, true
}

// UnarchivePath strips exactly one archive/<YYYY>/ prefix, returning the original path
// and the year. It is the left inverse of ArchivePath, even for a path archived twice.
func UnarchivePath(p string) (orig string, year int, ok bool) {
	y, rest, ok := splitArchive(NormalizePath(p))
	if !ok || rest == "" {
		return "", 0, false
	}
	return rest, y, true
}

// ArchiveYear returns the year partition of an archive path (archive/<YYYY> or below it).
func ArchiveYear(p string) (int, bool) {
	y, _, ok := splitArchive(NormalizePath(p))
	return y, ok
}

// IsArchived reports whether p sits under archive/ with a year partition; memhtml reads
// "archived" from the path, not from the status meta.
func IsArchived(p string) bool {
	_, ok := ArchiveYear(p)
	return ok
}

// PlacementInput is what Place decides from; Path is the caller's explicit override.
type PlacementInput struct {
	Path, MemoryType, Workspace string
	Entities, Tags              []string
}

// Place returns the directory a memory belongs in; the first matching rule wins:
//  1. an explicit valid path contributes its directory;
//  2. type arc → areas/arcs;
//  3. type task → projects/<workspace>/tasks, or areas/inbox/tasks without a workspace;
//  4. a semantic memory naming a person: entity → resources/people;
//  5. a workspace → projects/<workspace>;
//  6. semantic/procedural/precedent with a tag → resources/<first tag>;
//  7. otherwise areas/inbox.
//
// It is total: it always returns a directory inside a bucket. An unusable explicit path
// is ignored, not propagated.
func Place(in PlacementInput) string {
	if in.Path != "" {
		if n := NormalizePath(in.Path); ValidMemoryPath(n) {
			return n[:strings.LastIndexByte(n, '/')]
		}
	}
	typ := strings.ToLower(strings.TrimSpace(in.MemoryType))
	ws := Slug(in.Workspace)
	switch typ {
	case TypeArc:
		return ArcsDir
	case TypeTask:
		if ws != "" {
			return string(BucketProjects) + "/" + ws + "/" + TasksSubdir
		}
		return TaskInboxDir
	}
	if typ == "semantic" {
		for _, e := range in.Entities {
			kind, _, found := strings.Cut(strings.TrimSpace(e), ":")
			if found && strings.EqualFold(kind, "person") {
				return PeopleDir
			}
		}
	}
	if ws != "" {
		return string(BucketProjects) + "/" + ws
	}
	switch typ {
	case "semantic", "procedural", "precedent":
		for _, t := range in.Tags {
			if s := Slug(t); s != "" {
				return string(BucketResources) + "/" + s
			}
		}
	}
	return InboxDir
}

// EpisodeDate parses the YYYYMMDD- prefix of p's base name as a UTC date.
func EpisodeDate(p string) (time.Time, bool) {
	base := p[strings.LastIndexByte(p, '/')+1:]
	if len(base) < 9 || base[8] != '-' {
		return time.Time{}, false
	}
	for i := 0; i < 8; i++ {
		if base[i] < '0' || base[i] > '9' {
			return time.Time{}, false
		}
	}
	t, err := time.Parse("20060102", base[:8])
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// Slug lowercases s and joins its runs of [a-z0-9] with '-': "person:Sanju Rao" →
// "person-sanju-rao". Anything else (punctuation, spaces, non-ASCII) separates runs.
// It may return "" when s has no ASCII letter or digit.
func Slug(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	pending := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') {
			if pending && b.Len() > 0 {
				b.WriteByte('-')
			}
			pending = false
			b.WriteByte(c)
			continue
		}
		pending = true
	}
	return b.String()
}

// HrefToPath turns a root-relative href ("/areas/x.html") into a repo path
// ("areas/x.html"). A query or fragment is dropped and percent-escapes are decoded
// before checking, so an encoded ".." cannot slip through. Hrefs with a scheme, a host,
// no leading slash, a "." or ".." segment, a backslash or nothing after the slash are
// refused with an error wrapping ErrBadHref.
func HrefToPath(href string) (string, error) {
	bad := func(why string) error { return fmt.Errorf("href %s: %w: %s", QuoteInput(href), ErrBadHref, why) }
	s := strings.TrimSpace(href)
	if s == "" {
		return "", bad("empty")
	}
	if strings.HasPrefix(s, "//") {
		return "", bad("names a host")
	}
	if s[0] != '/' {
		if i := strings.IndexByte(s, ':'); i > 0 && !strings.ContainsAny(s[:i], "/?#") {
			return "", bad(fmt.Sprintf("has scheme %s", QuoteInput(s[:i])))
		}
		return "", bad("is relative; it must start with /")
	}
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if strings.IndexByte(s, '\\') >= 0 {
		return "", bad("contains a backslash")
	}
	dec, err := url.PathUnescape(s)
	if err != nil {
		return "", bad("bad percent-escape")
	}
	for _, seg := range strings.Split(dec, "/") {
		if seg == ".." {
			return "", bad("has a \"..\" segment (traversal)")
		}
		if seg == "." {
			return "", bad("has a \".\" segment")
		}
	}
	if strings.HasPrefix(dec, "//") || strings.IndexByte(dec, '\\') >= 0 {
		return "", bad("decodes to a host or backslash")
	}
	p := NormalizePath(dec)
	if p == "" {
		return "", bad("names no path")
	}
	return p, nil
}

// PathToHref is the root-relative href of a repo path: "/" + path. Only the bytes an
// href cannot carry literally ('%', '?', '#', controls, bytes that are not UTF-8) are
// escaped, so HrefToPath inverts it.
func PathToHref(p string) string {
	p = NormalizePath(p)
	if !strings.ContainsAny(p, "%?#") && !hasControl(p) && utf8.ValidString(p) {
		return "/" + p
	}
	var b strings.Builder
	b.WriteByte('/')
	for i := 0; i < len(p); {
		c := p[i]
		if c == '%' || c == '?' || c == '#' || c < 0x20 || c == 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(p[i:])
		if r == utf8.RuneError && n <= 1 {
			fmt.Fprintf(&b, "%%%02X", c) // a byte that is not UTF-8 text
			i++
			continue
		}
		b.WriteString(p[i : i+n])
		i += n
	}
	return b.String()
}

func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// QuoteInput quotes a caller's input for a message, cut to a readable length so a
// 64 KB hostile path yields a short message (and costs no more than the check itself).
func QuoteInput(s string) string {
	const max = 200
	if len(s) <= max {
		return strconv.Quote(s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("...(%d bytes)", len(s))
}
