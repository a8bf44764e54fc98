package secrets

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
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

// spanOf is the window margins of a rule's regex in lines: before, the most newlines a
// match holds before its keyword; after, the most it holds in all (unbounded: scan whole
// texts). before is 0 when the regex is a sequence whose items up to a mandatory one that
// can only match text containing a keyword hold no newline (gitleaks' generic rule:
// `[\w.-]{0,50}?(?:access|auth|...|token)...`); else it is after.
//
// probe, when not nil, is the regex from that keyword item on: every match of the rule holds
// a match of it, and with no leading repetition it runs several times faster, so a text (or
// window) it does not match is skipped (the generic rule: ~0.3 ms of a 1 KiB memory's
// 0.5 ms scan was its `[\w.-]{0,50}?` prefix).
// shape is what spanOf says of a rule's regex, worked out at the rule's first match: most
// rules never run on a given file (none of their keywords is in it), and working it out for
// the ~200 default rules at load was 40 ms of every one-shot command that commits (issue 48).
type shape struct {
	once       sync.Once
	pattern    string
	keywords   []string // the rule's own, as its config gave them
	lead, span int      // most newlines a match holds before its keyword, and in all
	probe      *regexp.Regexp
}

// noShape is a rule's without a regex.
var noShape = &shape{}

// shape is r's, worked out once.
func (r *rule) shape() *shape {
	if r.sh == nil {
		return noShape
	}
	r.sh.once.Do(func() { r.sh.lead, r.sh.span, r.sh.probe = spanOf(r.sh.pattern, r.sh.keywords) })
	return r.sh
}

func spanOf(pattern string, keywords []string) (before, after int, probe *regexp.Regexp) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return unbounded, unbounded, nil
	}
	after = maxNewlines(re)
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op != syntax.OpConcat || len(keywords) == 0 {
		return after, after, nil
	}
	for k, item := range re.Sub {
		if maxNewlines(item) > 0 {
			break
		}
		if lits, ok := literals(item, 256); ok && allHaveKeyword(lits, keywords) {
			if k > 0 {
				rest := &syntax.Regexp{Op: syntax.OpConcat, Sub: re.Sub[k:], Flags: re.Flags}
				probe, _ = regexp.Compile(rest.String()) // nil on failure: no probe
			}
			return 0, after, probe
		}
	}
	return after, after, nil
}

// literals is every string item can match, lower case, when that is a finite set of at
// most limit strings (ok false otherwise).
func literals(re *syntax.Regexp, limit int) ([]string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}, true
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if len(out) >= 8 {
					return nil, false
				}
				out = append(out, strings.ToLower(string(r)))
			}
		}
		return out, true
	case syntax.OpCapture:
		return literals(re.Sub[0], limit)
	case syntax.OpQuest:
		l, ok := literals(re.Sub[0], limit)
		return append(l, ""), ok && len(l) < limit
	case syntax.OpAlternate:
		var out []string
		for _, s := range re.Sub {
			l, ok := literals(s, limit)
			if !ok || len(out)+len(l) > limit {
				return nil, false
			}
			out = append(out, l...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range re.Sub {
			l, ok := literals(s, limit)
			if !ok || len(out)*len(l) > limit {
				return nil, false
			}
			var next []string
			for _, a := range out {
				for _, b := range l {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}

func allHaveKeyword(lits, keywords []string) bool {
	for _, l := range lits {
		if !slices.ContainsFunc(keywords, func(k string) bool { return strings.Contains(l, k) }) {
			return false
		}
	}
	return true
}

// minWindowed: texts shorter than this are scanned whole (windows would save nothing).
const minWindowed = 2 << 10

// windows is the byte ranges of raw (at line starts, ending after a newline or at the
// end) that rule r must be run on: nil = all of raw.
func (r *rule) windows(raw, lower string, nl []int) [][2]int {
	if len(raw) < minWindowed || len(r.keywords) == 0 || r.shape().span >= unbounded/2 || len(lower) != len(raw) {
		return nil
	}
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
		s, e := lineStart(l-r.shape().lead-1), lineEnd(l+r.shape().span+1)
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

func toLower(s string) string { return strings.ToLower(s) }
