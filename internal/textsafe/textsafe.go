// Package textsafe is the one sanitiser of text that reaches a person (docs/ARCHITECTURE.md §11, "Human
// output"): a terminal, a status line, the page, the sidebar, the log's text values. Names
// come from remotes and other writers, and a name holding ESC ]52 writes the user's
// clipboard, ESC ]8 disguises a link, C1 0x9b opens a control sequence, and U+202E shows
// "lmth.exe" for "exe.html". Every such character is replaced by a visible escape, so the
// reader sees that the name is odd and what it holds; nothing is dropped.
//
// The JSON documents (status.json, --json output) keep the real names: JSON escapes them,
// and a program reading them needs the path as it is on disk.
package textsafe

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Unsafe reports whether r is shown as an escape: C0 (with tab and newline: one name, one
// line), DEL, C1, the bidi embeddings, overrides and isolates (U+202A–U+202E,
// U+2066–U+2069), the marks U+200E, U+200F and U+061C, and the line and paragraph
// separators U+2028 and U+2029 (a new line in some terminals and every browser).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
		return true
	}
	return false
}

// Clean reports whether s needs no escape (valid UTF-8, no Unsafe rune).
func Clean(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 || Unsafe(r) {
			return false
		}
		i += n
	}
	return true
}

// Escape returns s with every Unsafe rune written as a Go-style escape (\n, \t, \r, \x1b,
// \u009b, \u202e) and every byte that is not UTF-8 as \xNN. A backslash is left as it is:
// memd's names are slash-separated and a doubled backslash would misquote ordinary text;
// what an escape stands for is one of the characters above, never typed text.
func Escape(s string) string {
	if Clean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case !Unsafe(r):
			b.WriteString(s[i : i+n])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		default:
			q := strconv.FormatInt(int64(r), 16)
			b.WriteString(`\u` + strings.Repeat("0", 4-len(q)) + q)
		}
		i += n
	}
	return b.String()
}

// Line is Escape capped at max bytes of its input's end-trimmed last non-empty line (a
// failed command's stderr, for a status warning); a cut is marked with "…".
func Line(s string, max int) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return Escape(s[:cut]) + "…"
	}
	return Escape(s)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
