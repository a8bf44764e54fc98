package gitattr

import "strings"

// wildmatch results, as git's wildmatch.c: abortAll and abortStar stop the backtracking a
// "*" would do when the rest cannot match anyway.
const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortStar
)

// wildmatch is git's wildmatch(pattern, text, pathname): with pathname, "*" and "?" never
// match "/" and "**" between slashes matches any number of directories.
func wildmatch(pattern, text string, pathname bool) bool {
	return dowild(pattern, text, pathname) == wmMatch
}

func dowild(p, text string, pathname bool) int {
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pc := p[pi]
		if ti >= len(text) && pc != '*' {
			return wmAbortAll
		}
		switch pc {
		case '\\':
			pi++
			if pi >= len(p) || text[ti] != p[pi] {
				return wmNoMatch
			}
		case '?':
			if pathname && text[ti] == '/' {
				return wmNoMatch
			}
		case '[':
			n, ok := matchClass(p[pi:], text[ti], pathname)
			if !ok {
				return wmNoMatch
			}
			pi += n - 1
		case '*':
			return star(p, pi, text, ti, pathname)
		default:
			if text[ti] != pc {
				return wmNoMatch
			}
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// star matches the "*" or "**" at p[pi] against text[ti:].
func star(p string, pi int, text string, ti int, pathname bool) int {
	matchSlash := !pathname
	pi++
	if pi < len(p) && p[pi] == '*' {
		prev := pi - 2
		for pi < len(p) && p[pi] == '*' {
			pi++
		}
		rest := p[pi:]
		if (prev < 0 || p[prev] == '/') && (rest == "" || rest[0] == '/' || strings.HasPrefix(rest, `\/`)) {
			// "**/" may match no directory at all: foo/**/bar matches foo/bar.
			if rest != "" && rest[0] == '/' && dowild(rest[1:], text[ti:], pathname) == wmMatch {
				return wmMatch
			}
			matchSlash = true
		} else {
			matchSlash = false
		}
	}
	rest := p[pi:]
	if rest == "" {
		if !matchSlash && strings.Contains(text[ti:], "/") {
			return wmNoMatch
		}
		return wmMatch
	}
	if !matchSlash && rest[0] == '/' {
		// One "*" then "/": the rest of this directory name.
		slash := strings.IndexByte(text[ti:], '/')
		if slash < 0 {
			return wmNoMatch
		}
		return dowild(rest[1:], text[ti+slash+1:], pathname)
	}
	for ; ti < len(text); ti++ {
		m := dowild(rest, text[ti:], pathname)
		if m != wmNoMatch {
			if matchSlash || m != wmAbortStar {
				return m
			}
		} else if !matchSlash && text[ti] == '/' {
			return wmAbortStar
		}
	}
	return wmAbortAll
}

// matchClass matches one bracket expression at the start of p against c; n is its length.
// A malformed class (no closing bracket) matches nothing, as in git.
func matchClass(p string, c byte, pathname bool) (n int, ok bool) {
	i := 1
	negated := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negated, i = true, i+1
	}
	matched := false
	first := true
	for ; i < len(p); i++ {
		ch := p[i]
		if ch == ']' && !first {
			if pathname && c == '/' {
				return i + 1, false
			}
			return i + 1, matched != negated
		}
		first = false
		if ch == '\\' && i+1 < len(p) {
			i++
			ch = p[i]
		} else if ch == '[' && i+1 < len(p) && p[i+1] == ':' {
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				if posixClass(p[i+2:i+2+end], c) {
					matched = true
				}
				i += 2 + end + 1
				continue
			}
		}
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			hi := p[i+2]
			if hi == '\\' && i+3 < len(p) {
				hi = p[i+3]
				i++
			}
			if ch <= c && c <= hi {
				matched = true
			}
			i += 2
			continue
		}
		if c == ch {
			matched = true
		}
	}
	return len(p), false
}

func posixClass(name string, c byte) bool {
	switch name {
	case "alnum":
		return isAlpha(c) || isDigit(c)
	case "alpha":
		return isAlpha(c)
	case "digit":
		return isDigit(c)
	case "lower":
		return c >= 'a' && c <= 'z'
	case "upper":
		return c >= 'A' && c <= 'Z'
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r')
	case "blank":
		return c == ' ' || c == '\t'
	case "punct":
		return c > ' ' && c < 127 && !isAlpha(c) && !isDigit(c)
	case "xdigit":
		return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
	case "print":
		return c >= ' ' && c < 127
	case "graph":
		return c > ' ' && c < 127
	case "cntrl":
		return c < ' ' || c == 127
	}
	return false
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
