package statusline_test

import (
	"strings"
	"testing"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

func TestComposeUntemplatedMD(t *testing.T) {
	f := statuslinetest.Fixtures()[statusline.StateOK]
	f.UntemplatedMD = []string{"proj/MEMORY.md"}
	d := statusline.Compose(f)
	if d.State != statusline.StateWarn || !strings.Contains(d.Summary.Text, "1 MEMORY.md out of template") {
		t.Errorf("state %s, summary %q", d.State, d.Summary.Text)
	}
	if len(d.Warnings) != 1 || d.Warnings[0] != "1 MEMORY.md out of the four-section template (tidy repairs it): proj/MEMORY.md" {
		t.Errorf("warnings %q", d.Warnings)
	}
}
