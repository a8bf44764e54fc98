package statusline_test

import (
	"testing"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// A held mass deletion (or any pause) is state paused, briefly on the line and with its reason in the detail, above an
// error: memd stands aside on purpose.
func TestComposePausedShowsReason(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateError]
	reason := "mass deletion: 73 memory files deleted locally (of 200); memd resume --allow-deletes lets it through"
	f.Paused, f.PauseBrief = &statusline.Paused{Reason: reason}, "mass deletion held"
	d := statusline.Compose(f)
	if d.State != statusline.StatePaused || d.Paused == nil || d.Paused.Reason != reason {
		t.Fatalf("state %s paused %+v", d.State, d.Paused)
	}
	// The line says it short; the reason is whole in the document and the detail.
	if want := "memd: paused (mass deletion held) · 14:32"; d.Summary.Text != want || d.Detail != reason {
		t.Fatalf("line %q detail %q, want %q and the reason", d.Summary.Text, d.Detail, want)
	}
}
