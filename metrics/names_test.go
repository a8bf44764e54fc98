package metrics

import (
	"path/filepath"
	"testing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics/statusline"
)

// The status line spells the state directory itself (it imports only the standard library);
// it must be the one Config.StateDir names.
func TestStatusLineDirIsStateDir(t *testing.T) {
	cfg := memd.DefaultConfig()
	cfg.Repo = "/home/u/memory"
	if got, want := filepath.FromSlash(statusline.Dir(cfg.Repo)), cfg.StateDir(); got != want {
		t.Errorf("statusline.Dir = %s, Config.StateDir = %s", got, want)
	}
}
