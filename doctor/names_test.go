package doctor

import (
	"testing"

	"github.com/memd-dev/memd/metrics/statusline"
)

// The status line keeps its own copy of the inbox thresholds (it imports only the standard
// library); doctor and the status line must warn at the same depth.
func TestInboxThresholdsMatchStatusLine(t *testing.T) {
	if InboxWarn != statusline.InboxWarnAbove || TaskInboxWarn != statusline.TaskInboxWarnAbove {
		t.Errorf("doctor warns above %d/%d, the status line above %d/%d",
			InboxWarn, TaskInboxWarn, statusline.InboxWarnAbove, statusline.TaskInboxWarnAbove)
	}
}
