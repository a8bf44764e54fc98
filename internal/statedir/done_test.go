package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportsRoundTrip: reports come back oldest first and are gone once taken; a file that
// is not a report is named and dropped.
func TestReportsRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memd")
	d, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	at := time.Date(2026, 12, 1, 14, 32, 0, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.WriteReport(Report{At: at.Add(time.Second), Command: "sync", Commits: 1, Pushed: true}))
	must(d.WriteReport(Report{At: at, Command: "sleep", Commits: 2, Sleep: &SleepDone{Counts: map[string]int{"arcs": 1}}}))
	must(os.WriteFile(filepath.Join(dir, "done-0-1.json"), []byte("not json"), 0o600))
	if _, err := os.Stat(filepath.Join(dir, KickFile)); err != nil {
		t.Fatalf("no kick after a report: %v", err)
	}
	got, err := d.TakeReports()
	if err == nil || !strings.Contains(err.Error(), "done-0-1.json") {
		t.Fatalf("bad report not named: %v", err)
	}
	if len(got) != 2 || got[0].Command != "sleep" || got[0].Sleep.Counts["arcs"] != 1 || got[1].Command != "sync" || !got[1].Pushed {
		t.Fatalf("reports %+v", got)
	}
	if again, err := d.TakeReports(); len(again) != 0 || err != nil {
		t.Fatalf("taken twice: %+v %v", again, err)
	}
}
