package agent

import (
	"errors"
	"strings"

	"github.com/memd-dev/memd/internal/textsafe"
)

// maxReason bounds the reason an event gives: one line of a sidebar entry.
const maxReason = 80

// reasonOf is what a person reads of a sync failure: the innermost error's own words
// ("connection refused", "no such host"), not Go's chain of wrapped contexts, on one line.
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	inner := err
	for {
		next := errors.Unwrap(inner)
		if next == nil {
			break
		}
		inner = next
	}
	// One line: a wrapped error's line breaks are spaces before the last ": " is looked for.
	s := strings.Join(strings.Fields(inner.Error()), " ")
	if i := strings.LastIndex(s, ": "); i >= 0 && i+2 < len(s) {
		s = s[i+2:]
	}
	s = textsafe.Escape(strings.TrimSpace(s))
	if s == "" {
		s = textsafe.Escape(err.Error())
	}
	if r := []rune(s); len(r) > maxReason {
		s = string(r[:maxReason-1]) + "…"
	}
	return s
}
