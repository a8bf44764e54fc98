package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"html"
	"strconv"
	"strings"
)

// indexSep separates the parts of an index MEMORY.md bullet (U+00B7, middle dot).
const indexSep = "\u00b7"

// render appends m as a memhtml file to buf. The content hash is computed from the
// article's canonical text directly (the article's shape is fixed here), so generating
// 100k files never re-parses one; the tests check it against memfile.Parse.
func render(buf []byte, m mem) []byte {
	esc := html.EscapeString
	gist, body, more := clean(m.gist), clean(m.body), clean(m.more)
	human := ""
	if !m.event.IsZero() {
		human = m.event.Format("January 2, 2006")
	}
	sum := articleHash(m)

	meta := func(name, content string) {
		buf = append(buf, `<meta name="`...)
		buf = append(buf, name...)
		buf = append(buf, `" content="`...)
		buf = append(buf, esc(content)...)
		buf = append(buf, "\">\n"...)
	}
	buf = append(buf, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"...)
	buf = append(buf, esc(clean(m.title))...)
	buf = append(buf, "</title>\n"...)
	meta("memhtml-type", m.typ)
	meta("memhtml-status", m.status)
	meta("memhtml-created", m.created.UTC().Format("2006-01-02T15:04:05Z"))
	meta("memhtml-updated", m.updated.UTC().Format("2006-01-02T15:04:05Z"))
	if m.confidence != "" {
		meta("memhtml-confidence", m.confidence)
	}
	if m.importance > 0 {
		meta("memhtml-importance", strconv.Itoa(m.importance))
	}
	meta("memhtml-content-hash", "sha256:"+hex.EncodeToString(sum[:]))
	meta("memhtml-author", "agent:memd-demo")
	if m.validUntil != "" {
		meta("memhtml-valid-until", m.validUntil)
	}
	if m.taskStatus != "" {
		meta("memhtml-task-status", m.taskStatus)
	}
	if m.due != "" {
		meta("memhtml-due", m.due)
	}
	for _, e := range m.entities {
		meta("memhtml-entity", e)
	}
	for _, t := range m.tags {
		meta("memhtml-tag", t)
	}
	for _, l := range m.links {
		buf = append(buf, `<link rel="memhtml-supersedes" href="`...)
		buf = append(buf, esc(l)...)
		buf = append(buf, "\">\n"...)
	}
	buf = append(buf, "</head>\n<body>\n<article>\n<p><mark>"...)
	buf = append(buf, esc(gist)...)
	buf = append(buf, "</mark> "...)
	buf = append(buf, esc(body)...)
	if human != "" {
		buf = append(buf, `, on <time datetime="`...)
		buf = append(buf, m.event.Format("2006-01-02")...)
		buf = append(buf, `">`...)
		buf = append(buf, human...)
		buf = append(buf, "</time>"...)
	}
	buf = append(buf, ".</p>\n<p>"...)
	buf = append(buf, esc(more)...)
	buf = append(buf, "</p>\n</article>\n</body>\n</html>\n"...)
	return buf
}

// articleHash is the sha256 of m's article as memhtml canonicalises it (its content hash).
func articleHash(m mem) [32]byte {
	canon := clean(m.gist) + " " + clean(m.body)
	if !m.event.IsZero() {
		canon += ", on " + m.event.Format("January 2, 2006")
	}
	return sha256.Sum256([]byte(canon + ". " + clean(m.more)))
}

// clean collapses whitespace so the canonical text above is exactly what a parser sees.
func clean(s string) string { return strings.Join(strings.Fields(s), " ") }
