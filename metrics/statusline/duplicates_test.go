package statusline

import (
	"strings"
	"testing"
	"time"
)

// A duplicate article makes every `memhtml index update` fail (and so memhtml's hooks on
// every machine): the status line says so, not only memd doctor.
func TestComposeWarnsOfDuplicates(t *testing.T) {
	d := Compose(Facts{Now: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Duplicates: 2})
	if d.State != StateWarn {
		t.Errorf("state %q, want warn", d.State)
	}
	if len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "2 duplicate articles: memhtml index update fails") {
		t.Errorf("warnings %q", d.Warnings)
	}
	if !strings.Contains(d.Summary.Text, "2 duplicates") {
		t.Errorf("summary %q", d.Summary.Text)
	}
}
