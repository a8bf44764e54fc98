package sleep

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd"
)

// A folder sleep would move or write into that is a symlink to elsewhere (issue 12 item 4):
// (archive/2026: the run's year) the phase is refused before it changes anything, naming the path; nothing is committed,
// nothing written outside.
func TestSleepRefusesSymlinkedFolders(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "archive"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "archive", "2026")); err != nil {
		t.Fatal(err)
	}
	before := head(t, dir)
	store := openStore(t, dir)
	rep := runSleep(t, dir, store, testConfig(), func(o *Options) { o.Phases = []memd.Phase{"archive"} })
	if len(rep.Phases) != 1 || rep.Phases[0].Err == nil {
		t.Fatalf("archive through a symlinked archive/2026: %+v, want a failed phase", rep.Phases)
	}
	err := rep.Phases[0].Err
	if !errors.Is(err, ErrThroughSymlink) || !strings.Contains(err.Error(), "archive/2026") {
		t.Fatalf("error %v, want ErrThroughSymlink naming archive/2026", err)
	}
	if h := head(t, dir); h != before {
		t.Fatalf("committed %s over the refusal", h)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Fatalf("written outside the repo: %v", ents)
	}
	if !exists(dir, epOld1) {
		t.Fatalf("%s moved", epOld1)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".git", "memd", "sleep-journal", "*")); len(m) != 0 {
		t.Fatalf("journal left: %v", m)
	}
}
