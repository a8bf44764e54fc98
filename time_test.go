package memd

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	utc := func(mo time.Month, d, h, mi, s int) time.Time { return time.Date(2026, mo, d, h, mi, s, 0, time.UTC) }
	for in, want := range map[string]time.Time{
		"2026-11-30":                utc(11, 30, 0, 0, 0),
		"2026-11-30T14:32":          utc(11, 30, 14, 32, 0),
		"2026-11-30T14:32Z":         utc(11, 30, 14, 32, 0),
		"2026-11-30T14:32:05":       utc(11, 30, 14, 32, 5),
		"2026-11-30T14:32:05Z":      utc(11, 30, 14, 32, 5),
		"2026-11-30T15:32:05+01:00": utc(11, 30, 14, 32, 5),
		" 2026-11-30T14:32:05.5Z ":  utc(11, 30, 14, 32, 5).Add(500 * time.Millisecond),
	} {
		got, ok := ParseTime(in)
		if !ok || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "next tuesday", "30/11/2026", "2026-13-01", "26-11-30", "2026-11-30 14:32"} {
		if _, ok := ParseTime(in); ok {
			t.Errorf("ParseTime(%q) accepted", in)
		}
	}
}
