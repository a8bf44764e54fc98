package sleep

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// TestSleepLeavesConflictCopiesAlone: a pending conflict copy of a 2024 episode (and of a
// person's episode arcs would group) is never moved, archived or listed by any phase.
func TestSleepLeavesConflictCopiesAlone(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	when := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	copyOld := memd.ConflictCopyPath(epOld1, "hostb", when)
	copyNew := memd.ConflictCopyPath(epNew1, "hostb", when)
	testutil.WriteFile(t, dir, copyOld, readFile(t, dir, epOld1))
	testutil.WriteFile(t, dir, copyNew, readFile(t, dir, epNew1))
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "conflict copies from a merge")
	store := openStore(t, dir)
	if rep := runSleep(t, dir, store, testConfig(), nil); rep.Failed() {
		t.Fatalf("run failed: %+v", rep)
	}
	for _, cp := range []string{copyOld, copyNew} {
		if !exists(dir, cp) {
			t.Errorf("conflict copy %s was moved", cp)
		}
	}
	if !exists(dir, "archive/2026/"+epOld1) { // memhtml files by the year of the archiving run
		t.Fatal("the fixture's 2024 episode was not archived: the run did not get that far")
	}
	base := filepath.Base(strings.TrimSuffix(copyOld, memd.MemoryExt))
	baseNew := filepath.Base(strings.TrimSuffix(copyNew, memd.MemoryExt))
	for _, p := range treeList(t, dir) {
		if strings.HasPrefix(p, "archive/") && strings.Contains(p, ".conflict-") {
			t.Errorf("a conflict copy went to the archive: %s", p)
		}
		if p == copyOld || p == copyNew {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), base) || strings.Contains(string(b), baseNew) {
			t.Errorf("%s lists a conflict copy", p)
		}
	}
}
