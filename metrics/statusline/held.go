package statusline

import (
	"fmt"
	"sort"
	"strings"
)

// heldWarning is the warning for files memd holds back from commits (docs/ARCHITECTURE.md §11): the long
// form names each file with why (the gitleaks rule and line, never the secret); the short
// form, for the line, counts files by reason: "1 held: secret", "3 held: 2 secret, 1 size".
// No held file: ok false.
func heldWarning(held []Held) (long, short string, ok bool) {
	if len(held) == 0 {
		return "", "", false
	}
	files := map[string][]Held{} // by path
	for _, h := range held {
		files[h.Path] = append(files[h.Path], h)
	}
	byReason := map[string]int{}
	var names []string
	for p, hs := range files {
		seen := map[string]bool{}
		for _, h := range hs {
			if !seen[h.Reason] {
				seen[h.Reason] = true
				byReason[h.Reason]++
			}
		}
		names = append(names, clean(p)+" ("+heldWhy(hs)+")")
	}
	sort.Strings(names)
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	n := len(files)
	if len(reasons) == 1 {
		short = fmt.Sprintf("%d held: %s", n, clean(reasons[0]))
	} else {
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%d %s", byReason[r], clean(r))
		}
		short = fmt.Sprintf("%d held: %s", n, strings.Join(parts, ", "))
	}
	long = fmt.Sprintf("%d %s held, not committed: %s", n, plural(n, "file", "files"),
		strings.Join(firstN(names, 3), ", ")+more(n, 3))
	return long, short, true
}

// heldWhy is one file's reasons: "secret: aws-access-token line 3, github-pat line 9".
func heldWhy(hs []Held) string {
	var out []string
	for _, h := range hs {
		s := clean(h.Reason)
		if h.Rule != "" {
			s += ": " + clean(h.Rule)
		}
		if h.Line > 0 {
			s += fmt.Sprintf(" line %d", h.Line)
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}
