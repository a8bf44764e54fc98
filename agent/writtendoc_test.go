package agent

import (
	"testing"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

// TestWrittenDocSkipsTheSameDocument: a publish whose document says what the files hold
// (its time aside) writes nothing; a change writes at once, and so does the same document
// once rewriteStatusEvery has passed, so updated_at never trails a live daemon for long.
func TestWrittenDocSkipsTheSameDocument(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 7, 0, 0, 0, time.UTC)
	doc := func(at time.Time, ahead int) statusline.Document {
		return statusline.Compose(statusline.Facts{Now: at, PID: 42, Repo: "/r", Ahead: ahead, Remote: "origin/main"})
	}
	var w writtenDoc
	steps := []struct {
		at    time.Duration
		ahead int
		want  bool
	}{
		{0, 0, true},                                  // nothing written yet
		{time.Second, 0, false},                       // the same state a second later
		{2 * time.Second, 1, true},                    // a change
		{3 * time.Second, 1, false},                   // the same again
		{2*time.Second + rewriteStatusEvery, 1, true}, // unchanged, but the files' time is due
	}
	for i, s := range steps {
		if got := w.due(doc(t0.Add(s.at), s.ahead), t0.Add(s.at)); got != s.want {
			t.Errorf("step %d (+%s, ahead %d): due %v, want %v", i, s.at, s.ahead, got, s.want)
		}
	}
	w = writtenDoc{} // a failed write forgets what was written
	if !w.due(doc(t0, 1), t0) {
		t.Error("after a failed write the same document is not written again")
	}
}
