package textsafe

import "unicode/utf8"

// Clip cuts s to at most n bytes on a rune boundary, marking a cut with "…" (a quoted
// line in an error message stays short and valid UTF-8).
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// InvalidUTF8At is the offset of b's first byte that is not UTF-8 text (len(b) when b is
// valid): what an error about a file that is not UTF-8 names.
func InvalidUTF8At(b []byte) int {
	off := 0
	for off < len(b) {
		r, n := utf8.DecodeRune(b[off:])
		if r == utf8.RuneError && n <= 1 {
			break
		}
		off += n
	}
	return off
}
