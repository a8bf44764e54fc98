package secrets

import (
	"regexp/syntax"
	"slices"
	"strings"
)

// Windows: Go's regexp walks every byte of the text for each rule, and gitleaks' generic
// rule costs ~2 µs a byte, 20 ms for a 10 KiB memory. A rule's match contains one of its
// keywords (that is what gitleaks' keyword prefilter relies on) and, for most rules, at
// most a few newlines (maxNewlines). So such a rule is run only on the lines around its
// keywords' occurrences: from maxNewlines+1 lines before each to maxNewlines+1 after, the
// windows of neighbouring occurrences merged. The extra line on each side keeps gitleaks'
// anchors meaning what they mean on the whole text (a match cannot reach a window's edge
// unless the edge is the text's). A rule without keywords, or whose match can span any
// number of lines (a private key block), runs on the whole text.

const unbounded = 1 << 30

// maxNewlines is the most newlines a match of re can hold (unbounded: no bound).
func maxNewlines(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if r == '\n' {
				n++
			}
		}
		return n
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return 1
			}
		}
		return 0
	case syntax.OpAnyChar:
		return 1
	case syntax.OpCapture, syntax.OpQuest:
		return maxNewlines(re.Sub[0])
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n = min(unbounded, n+maxNewlines(s))
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			n = max(n, maxNewlines(s))
		}
		return n
	case syntax.OpStar, syntax.OpPlus:
		if maxNewlines(re.Sub[0]) > 0 {
			return unbounded
		}
		return 0
	case syntax.OpRepeat:
		n := maxNewlines(re.Sub[0])
		switch {
		case n == 0:
			return 0
		case re.Max < 0:
			return unbounded
		}
		return min(unbounded, n*re.Max)
	}
	return 0 // anchors, boundaries, empty
}

// spanOf is the window margin of a rule's regex in lines (unbounded: scan whole texts).
func spanOf(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return unbounded
	}
	return maxNewlines(re)
}

// minWindowed: texts shorter than this are scanned whole (windows would save nothing).
const minWindowed = 2 << 10

// windows is the byte ranges of raw (at line starts, ending after a newline or at the
// end) that rule r must be run on: nil = all of raw.
func (r *rule) windows(raw, lower string, nl []int) [][2]int {
	if len(raw) < minWindowed || len(r.keywords) == 0 || r.span >= unbounded/2 || len(lower) != len(raw) {
		return nil
	}
	margin := r.span + 1
	lineOf := func(pos int) int { // 0-based line of byte pos
		lo, hi := 0, len(nl)
		for lo < hi {
			m := (lo + hi) / 2
			if nl[m] < pos {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo
	}
	lineStart := func(l int) int {
		if l <= 0 {
			return 0
		}
		return nl[l-1] + 1
	}
	lineEnd := func(l int) int { // after the newline ending line l, or the text's end
		if l >= len(nl) {
			return len(raw)
		}
		return nl[l] + 1
	}
	var lines []int
	for _, k := range r.keywords {
		for off := 0; ; {
			i := strings.Index(lower[off:], k)
			if i < 0 {
				break
			}
			lines = append(lines, lineOf(off+i))
			off += i + len(k)
		}
	}
	if len(lines) == 0 {
		return [][2]int{}
	}
	slices.Sort(lines)
	var out [][2]int
	for _, l := range lines {
		s, e := lineStart(l-margin), lineEnd(l+margin)
		if n := len(out); n > 0 && s <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], e)
			continue
		}
		out = append(out, [2]int{s, e})
	}
	if len(out) == 1 && out[0][0] == 0 && out[0][1] == len(raw) {
		return nil
	}
	return out
}
