package memd

import (
	"strings"
	"time"
)

// isoLayouts are the ISO 8601 forms memd accepts in memory files and the ledger: a calendar
// date, or a date and time with optional seconds and fraction, zoned (Z or ±hh:mm) or not
// (read as UTC). Writers differ (JS toISOString, Python isoformat, a hand-typed minute).
var isoLayouts = []string{
	"2006-01-02",
	time.RFC3339Nano, // also accepts no fraction
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04",
}

// ParseTime is memd's one reader of a written time (memory file dates, the ledger's
// createdAt, updatedAt and expiresAt): the forms of isoLayouts, surrounding space ignored.
// False when s is none of them.
func ParseTime(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 10 || s[4] != '-' {
		return time.Time{}, false
	}
	for _, l := range isoLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}
