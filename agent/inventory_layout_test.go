package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
)

// A directory of project memories (seed 003): the inventory measures each project's
// MEMORY.md with the template check and the soft caps (memorymd.InspectProject), so the
// status names the one out of the template and the one at its soft cap.
func TestInventoryProjectMemories(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sections := "## CRITICAL RULES\n\n- r\n\n## Architecture & Config Facts\n\n%s\n\n## Active Warnings\n\n- w\n\n## Topic Files\n\n- t\n"
	write("ok/MEMORY.md", "# ok\n\n"+strings.Replace(sections, "%s", "- a", 1))
	write("ok/history.md", "# ok: history\n")
	write("full/MEMORY.md", "# full\n\n"+strings.Replace(sections, "%s", strings.Repeat("- fact\n", memorymd.ProjectSoftLines), 1))
	write("loose/MEMORY.md", "# loose\n\n## CRITICAL RULES\n\n- r\n\n## Notes\n\n- n\n")
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	s := buildInventory(cfg, nil).snapshot(time.Now())
	if strings.Join(s.overCap, ",") != "full/MEMORY.md" {
		t.Errorf("over the soft cap: %v", s.overCap)
	}
	if strings.Join(s.untemplated, ",") != "loose/MEMORY.md" {
		t.Errorf("out of the template: %v", s.untemplated)
	}
	if len(s.MemoryMD) != 3 {
		t.Errorf("MEMORY.md stats: %+v", s.MemoryMD)
	}
}
