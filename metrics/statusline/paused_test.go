package statusline_test

import (
	"testing"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// A held mass deletion (or any pause) is state paused with its reason on the line, above an
// error: memd stands aside on purpose.
func TestComposePausedShowsReason(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateError]
	reason := "mass deletion: 73 memory files deleted locally (of 200); memd resume --allow-deletes lets it through"
	f.Paused = &statusline.Paused{Reason: reason}
	d := statusline.Compose(f)
	if d.State != statusline.StatePaused || d.Paused == nil || d.Paused.Reason != reason {
		t.Fatalf("state %s paused %+v", d.State, d.Paused)
	}
	// The line is cut to 80 columns (the reason whole in the document and the detail).
	if want := "memd: paused: mass deletion: 73 memory files deleted locally (of 200);… · 14:32"; d.Summary.Text != want {
		t.Fatalf("line %q, want %q", d.Summary.Text, want)
	}
}
