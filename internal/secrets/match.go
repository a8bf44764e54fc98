package secrets

import (
	"math"
	"strings"
)

// Finding is one credential found: the rule that found it and where. It never carries the
// secret or any part of it (docs/ARCHITECTURE.md §11): what memd reports about a finding is only this.
type Finding struct {
	RuleID    string
	StartLine int // 1-based, the first line of the match
	EndLine   int
}

// allowSignature on a finding's line allows it (gitleaks' inline convention).
const allowSignature = "gitleaks:allow"

// candidate is a finding while the matcher still needs its text (the dedupe and the
// allowlists look at it); it never leaves this file.
type candidate struct {
	Finding
	secret, match string
	startCol      int
}

// Scan reports the findings in content, a file at path (repo-relative, slash-separated;
// it is matched by the path rules and path allowlists) in commit ("" for the work tree).
// It follows gitleaks' Detector.DetectContext on one fragment without the decoding passes
// (base64, hex and percent-encoded text is matched as it is written).
func (rs *Rules) Scan(path, content, commit string) []Finding {
	if globallyAllowed(rs.allowlists, path, commit) {
		return nil
	}
	lower := strings.ToLower(content)
	present := rs.pre.present(lower)
	var cands []candidate
	nl := newlines(content)
	for _, id := range rs.order {
		r := rs.rules[id]
		if !r.wanted(present) {
			continue
		}
		cands = append(cands, rs.detectRule(r, path, content, lower, commit, nl, false)...)
	}
	cands = dedupeGeneric(cands)
	out := make([]Finding, len(cands))
	for i, c := range cands {
		out[i] = c.Finding
	}
	return out
}

func (r *rule) wanted(present map[string]bool) bool {
	if len(r.keywords) == 0 {
		return true
	}
	for _, k := range r.keywords {
		if present[k] {
			return true
		}
	}
	return false
}

// globallyAllowed is gitleaks' checkCommitOrPathAllowed: a path or commit an allowlist lets
// through whole (an AND allowlist with regexes or stopwords is checked per finding instead).
func globallyAllowed(als []*allowlist, path, commit string) bool {
	if path == "" && commit == "" {
		return false
	}
	for _, a := range als {
		commitOK := a.commitAllowed(commit)
		pathOK := a.pathAllowed(path)
		if !a.and {
			if commitOK || pathOK {
				return true
			}
			continue
		}
		if a.nRegexes > 0 || len(a.stopwords) > 0 {
			continue
		}
		checks := []bool{}
		if len(a.commits) > 0 {
			checks = append(checks, commitOK)
		}
		if a.nPaths > 0 {
			checks = append(checks, pathOK)
		}
		if allTrue(checks) {
			return true
		}
	}
	return false
}

func (a *allowlist) commitAllowed(c string) bool {
	return c != "" && a.commits[strings.ToLower(c)]
}

func (a *allowlist) pathAllowed(p string) bool {
	return p != "" && a.paths != nil && a.paths.MatchString(p)
}

func (a *allowlist) regexAllowed(s string) bool {
	return s != "" && a.regexes != nil && a.regexes.MatchString(s)
}

func (a *allowlist) stopword(s string) bool {
	if s == "" {
		return false
	}
	s = strings.ToLower(s)
	for _, w := range a.stopwords {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

// detectRule is gitleaks' Detector.detectRule for one rule on the raw content.
func (rs *Rules) detectRule(r *rule, path, raw, lower, commit string, nl []int, inherited bool) []candidate {
	if r.skipReport && !inherited {
		return nil
	}
	if globallyAllowed(r.allowlists, path, commit) {
		return nil
	}
	if r.path != nil {
		if !r.path.MatchString(path) {
			return nil
		}
		if r.regex == nil {
			return []candidate{{Finding: Finding{RuleID: r.id, StartLine: 0, EndLine: 0}}}
		}
	}
	if r.regex == nil {
		return nil
	}
	var out []candidate
	for _, m := range r.matches(raw, lower, nl) {
		secret := strings.Trim(raw[m[0]:m[1]], "\n")
		// gitleaks#1352: a match's trailing newline is not part of it.
		start, end := m[0], m[0]+len(secret)
		loc := locate(nl, raw, start, end)
		c := candidate{Finding: Finding{RuleID: r.id, StartLine: loc.startLine, EndLine: loc.endLine},
			secret: secret, match: secret, startCol: loc.startCol}
		line := raw[loc.lineStart:loc.lineEnd]
		if strings.Contains(line, allowSignature) {
			continue
		}
		if groups := r.regex.FindStringSubmatch(secret); len(groups) >= 2 {
			if r.secretGroup > 0 {
				if len(groups) <= r.secretGroup {
					continue
				}
				c.secret = groups[r.secretGroup]
			} else {
				for _, g := range groups[1:] {
					if g != "" {
						c.secret = g
						break
					}
				}
			}
		}
		if r.entropy != 0 && shannonEntropy(c.secret) <= r.entropy {
			continue
		}
		if findingAllowed(rs.allowlists, c, path, commit, line) || findingAllowed(r.allowlists, c, path, commit, line) {
			continue
		}
		out = append(out, c)
	}
	if inherited || len(r.required) == 0 {
		return out
	}
	return rs.withRequired(r, path, raw, lower, commit, nl, out)
}

// matches is the rule's regex's matches in raw, found in its windows (window.go).
func (r *rule) matches(raw, lower string, nl []int) [][]int {
	ws := r.windows(raw, lower, nl)
	if ws == nil {
		if probe := r.shape().probe; probe != nil && !probe.MatchString(raw) {
			return nil
		}
		return r.regex.FindAllStringIndex(raw, -1)
	}
	var out [][]int
	probe := r.shape().probe
	for _, w := range ws {
		if probe != nil && !probe.MatchString(raw[w[0]:w[1]]) {
			continue
		}
		for _, m := range r.regex.FindAllStringIndex(raw[w[0]:w[1]], -1) {
			out = append(out, []int{m[0] + w[0], m[1] + w[0]})
		}
	}
	return out
}

// findingAllowed is gitleaks' checkFindingAllowed.
func findingAllowed(als []*allowlist, c candidate, path, commit, line string) bool {
	for _, a := range als {
		target := c.secret
		switch a.regexTarget {
		case "match":
			target = c.match
		case "line":
			target = line
		}
		regexOK := a.regexAllowed(target)
		stopOK := a.stopword(c.secret)
		if !a.and {
			if regexOK || stopOK {
				return true
			}
			continue
		}
		var checks []bool
		if len(a.commits) > 0 {
			checks = append(checks, a.commitAllowed(commit))
		}
		if a.nPaths > 0 {
			checks = append(checks, a.pathAllowed(path))
		}
		if a.nRegexes > 0 {
			checks = append(checks, regexOK)
		}
		if len(a.stopwords) > 0 {
			checks = append(checks, stopOK)
		}
		if allTrue(checks) {
			return true
		}
	}
	return false
}

// withRequired keeps the primary findings of a multi-part rule that have, for each required
// rule, a finding of it within the proximity asked (gitleaks' processRequiredRules).
func (rs *Rules) withRequired(r *rule, path, raw, lower, commit string, nl []int, primary []candidate) []candidate {
	if len(primary) == 0 {
		return nil
	}
	found := map[string][]candidate{}
	for _, q := range r.required {
		found[q.id] = rs.detectRule(rs.rules[q.id], path, raw, lower, commit, nl, true)
	}
	var out []candidate
	for _, p := range primary {
		all := true
		for _, q := range r.required {
			near := false
			for _, f := range found[q.id] {
				if within(p, f, q) {
					near = true
					break
				}
			}
			all = all && near
		}
		if all {
			out = append(out, p)
		}
	}
	return out
}

func within(p, f candidate, q required) bool {
	abs := func(x int) int {
		if x < 0 {
			return -x
		}
		return x
	}
	if q.withinLines != nil && abs(p.StartLine-f.StartLine) > *q.withinLines {
		return false
	}
	if q.withinCols != nil && abs(p.startCol-f.startCol) > *q.withinCols {
		return false
	}
	return true
}

// dedupeGeneric drops a generic rule's finding when a specific rule found a secret on the
// same line that contains it (gitleaks' filter).
func dedupeGeneric(cs []candidate) []candidate {
	var out []candidate
	for _, f := range cs {
		keep := true
		if strings.Contains(strings.ToLower(f.RuleID), "generic") {
			for _, g := range cs {
				if f.StartLine == g.StartLine && f.RuleID != g.RuleID && strings.Contains(g.secret, f.secret) &&
					!strings.Contains(strings.ToLower(g.RuleID), "generic") {
					keep = false
					break
				}
			}
		}
		if keep {
			out = append(out, f)
		}
	}
	return out
}

// shannonEntropy is gitleaks' (rune frequencies over the byte length, as it computes it).
func shannonEntropy(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, c := range s {
		counts[c]++
	}
	inv := 1.0 / float64(len(s))
	e := 0.0
	for _, n := range counts {
		f := float64(n) * inv
		e -= f * math.Log2(f)
	}
	return e
}

// newlines is the byte offsets of content's '\n's.
func newlines(s string) []int {
	var out []int
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, i)
		}
	}
	return out
}

type location struct {
	startLine, endLine int // 1-based
	startCol           int
	lineStart, lineEnd int // the byte range of the match's lines
}

// locate finds the lines of the match [start, end) (gitleaks' location, 1-based lines).
func locate(nl []int, raw string, start, end int) location {
	var l location
	prev := 0
	set := false
	for i, pos := range nl {
		if prev <= start && start < pos {
			set = true
			l.startLine, l.endLine = i+1, i+1
			l.startCol = start - prev + 1
			l.lineStart, l.lineEnd = prev, pos
		}
		if prev < end && end <= pos {
			l.endLine = i + 1
			l.lineEnd = pos
		}
		prev = pos
	}
	if !set {
		l.startLine, l.endLine = len(nl)+1, len(nl)+1
		l.startCol = start - prev + 1
		l.lineStart = prev
		if len(nl) == 0 {
			l.lineStart = 0
		}
		i := end
		for i < len(raw) && raw[i] != '\n' && raw[i] != '\r' {
			i++
		}
		l.lineEnd = i
	}
	if end > l.lineEnd {
		l.lineEnd = end
	}
	return l
}
