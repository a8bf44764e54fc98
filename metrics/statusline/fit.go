package statusline

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxColumns is the widest any status line is drawn: a terminal's 80 columns, whatever the
// error message or the number of warnings.
const MaxColumns = 80

// Width is how many terminal columns s takes: East Asian wide and fullwidth runes two,
// combining marks and other zero-width runes none, every other rune one.
func Width(s string) int {
	n := 0
	for _, r := range s {
		n += runeWidth(r)
	}
	return n
}

func runeWidth(r rune) int {
	switch {
	case r < 0x300:
		return 1
	case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Me, r) || r == 0x200b || r == 0x200d || r == 0xfeff:
		return 0
	case r >= 0x1100 && (r <= 0x115f || r == 0x2329 || r == 0x232a ||
		(r >= 0x2e80 && r <= 0xa4cf && r != 0x303f) || (r >= 0xac00 && r <= 0xd7a3) ||
		(r >= 0xf900 && r <= 0xfaff) || (r >= 0xfe30 && r <= 0xfe4f) || (r >= 0xff00 && r <= 0xff60) ||
		(r >= 0xffe0 && r <= 0xffe6) || (r >= 0x1f300 && r <= 0x1f64f) || (r >= 0x1f900 && r <= 0x1f9ff) ||
		(r >= 0x20000 && r <= 0x3fffd)):
		return 2
	}
	return 1
}

// truncate cuts s to at most w columns, ending in "…" when anything was cut.
func truncate(s string, w int) string {
	if Width(s) <= w {
		return s
	}
	if w <= 0 {
		return ""
	}
	var b strings.Builder
	used := 0
	for _, r := range s {
		rw := runeWidth(r)
		if used+rw > w-1 {
			break
		}
		b.WriteRune(r)
		used += rw
	}
	return strings.TrimRight(b.String(), " ") + "…"
}

// fitParts cuts a line in parts to at most w columns (the last part that overflows ends in
// "…", the rest are dropped): the last rule, for a document written by hand.
func fitParts(parts []Part, w int) []Part {
	total := 0
	for _, p := range parts {
		total += Width(p.Text)
	}
	if total <= w {
		return parts
	}
	var out []Part
	used := 0
	for _, p := range parts {
		pw := Width(p.Text)
		if used+pw <= w-1 {
			out = append(out, p)
			used += pw
			continue
		}
		if t := truncate(p.Text, w-used); t != "" && utf8.RuneCountInString(t) > 0 {
			out = append(out, Part{Text: t, Kind: p.Kind})
		}
		break
	}
	return out
}

// line is the head of the summary before it is fitted: the state (what is happening), then
// counts (↓behind, pending), then the warnings' short forms.
type line struct {
	state    []Part
	counts   []Part
	warnings []string
	// afterChange: the state is a change count (`+2 ~1`), which the next item follows after
	// a space (the seed's `+2 1 refused`); after anything else a comma.
	afterChange bool
}

// fit draws the head within budget columns, eliding by rule: first the warnings, from the
// last, into `+N warnings`; then the counts, from the last; then the state itself is cut.
func (l line) fit(budget int) []Part {
	for shown := len(l.warnings); shown >= 0; shown-- {
		if p := l.draw(len(l.counts), shown); partsWidth(p) <= budget {
			return p
		}
	}
	for c := len(l.counts) - 1; c >= 0; c-- {
		if p := l.draw(c, 0); partsWidth(p) <= budget {
			return p
		}
	}
	return fitParts(l.state, budget)
}

// draw is the head with the first c counts and the first shown warnings; the warnings left
// out are counted as `+N warnings`.
func (l line) draw(c, shown int) []Part {
	out := append([]Part(nil), l.state...)
	first := true
	sep := func() Part {
		s := ", "
		if first && l.afterChange {
			s = " "
		}
		first = false
		return Part{Text: s}
	}
	for _, p := range l.counts[:c] {
		out = append(out, sep(), p)
	}
	for _, w := range l.warnings[:shown] {
		out = append(out, sep(), Part{Text: w, Kind: KindWarn})
	}
	if n := len(l.warnings) - shown; n > 0 {
		out = append(out, sep(), Part{Text: fmt.Sprintf("+%d %s", n, plural(n, "warning", "warnings")), Kind: KindWarn})
	}
	return out
}

func partsWidth(ps []Part) int {
	n := 0
	for _, p := range ps {
		n += Width(p.Text)
	}
	return n
}
