package sleep

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/testutil"
)

// TestMain doubles as the helper process that the kill tests SIGKILL mid-phase: with
// MEMD_SLEEP_HELPER set it runs a sleep that stops after op N of a phase (signalling
// through a marker file) and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("MEMD_SLEEP_HELPER") == "1" {
		os.Exit(helperMain())
	}
	os.Exit(m.Run())
}

func helperMain() int {
	dir := os.Getenv("MEMD_SLEEP_DIR")
	phase := memd.Phase(os.Getenv("MEMD_SLEEP_KILL_PHASE"))
	at, _ := strconv.Atoi(os.Getenv("MEMD_SLEEP_KILL_AT"))
	marker := os.Getenv("MEMD_SLEEP_MARKER")
	store, err := openStoreErr(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	opts := Options{Config: testConfig(), Now: func() time.Time { return fixNow }, NoGC: true,
		afterOp: func(ph memd.Phase, i int) error {
			if ph == phase && i == at {
				_ = os.WriteFile(marker, []byte("ready"), 0o644)
				select {} // wait for SIGKILL
			}
			return nil
		}}
	if _, err := NewRunner(dir, store, opts).Run(context.Background(), RunID(fixNow)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// killMidPhase runs the helper on dir and SIGKILLs it once it reached op `at` of phase.
func killMidPhase(t *testing.T, dir, phase string, at int) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "marker")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(testutil.GitEnv(), "MEMD_SLEEP_HELPER=1", "MEMD_SLEEP_DIR="+dir, "MEMD_SLEEP_KILL_PHASE="+phase,
		"MEMD_SLEEP_KILL_AT="+strconv.Itoa(at), "MEMD_SLEEP_MARKER="+marker)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !testutil.Poll(60*time.Second, func() bool { _, err := os.Stat(marker); return err == nil }) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("helper never reached %s op %d:\n%s", phase, at, out.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper did not die of SIGKILL: %v\n%s", err, out.String())
	}
}

// A run SIGKILLed in the middle of a phase, then resumed with the same run id, ends in the
// same tree (work tree and HEAD tree) as a run that was never interrupted.
func TestKilledRunResumesToSameTree(t *testing.T) {
	want := t.TempDir()
	buildFixture(t, want)
	runSleep(t, want, openStore(t, want), testConfig(), nil)
	wantDigest := treeDigest(t, want)
	wantTree := strings.TrimSpace(testutil.RunGit(t, want, "rev-parse", "HEAD^{tree}"))

	for _, kp := range []struct {
		phase string
		at    int
	}{
		{"expire", 0},  // drained file appended, ledger not yet rewritten
		{"archive", 2}, // some files moved, links not yet rewritten
		{"archive", 6}, // all moved, some links rewritten
		{"tidy", 0},    // backup written, MEMORY.md not yet repaired
	} {
		t.Run(fmt.Sprintf("%s-%d", kp.phase, kp.at), func(t *testing.T) {
			dir := t.TempDir()
			buildFixture(t, dir)
			killMidPhase(t, dir, kp.phase, kp.at)
			if !exists(dir, filepath.Join(".git", "memd", journalDirName, "journal.json")) {
				t.Fatal("no journal after the kill")
			}
			if st := testutil.RunGit(t, dir, "status", "--porcelain"); st == "" {
				t.Fatal("the kill left nothing half-applied; the test kills too late")
			}
			store := openStore(t, dir)
			rep := runSleep(t, dir, store, testConfig(), nil)
			if rep.Failed() {
				t.Fatalf("resumed run failed: %+v", rep)
			}
			skipped := 0
			for _, p := range rep.Phases {
				if p.Skipped {
					skipped++
				}
			}
			wantSkipped := map[string]int{"expire": 0, "archive": 2, "tidy": 3}[kp.phase]
			if skipped != wantSkipped {
				t.Errorf("resumed run skipped %d phases, want %d (committed before the kill)", skipped, wantSkipped)
			}
			if got := treeDigest(t, dir); got != wantDigest {
				t.Errorf("work tree differs from an uninterrupted run:\n got %v\nwant %v", treeList(t, dir), treeList(t, want))
			}
			if got := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "HEAD^{tree}")); got != wantTree {
				t.Errorf("HEAD tree %s, want %s", got, wantTree)
			}
			store.WaitIndexRefresh()
			if st := testutil.RunGit(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("not clean after resume:\n%s", st)
			}
			if msgs := commitsSince(t, dir, strings.TrimSpace(testutil.RunGit(t, dir, "rev-list", "--max-parents=0", "HEAD"))); len(msgs) != 4 {
				t.Errorf("%d sleep commits after resume, want 4", len(msgs))
			}
		})
	}
}

// A journal left by a phase that did get committed (killed between commit and cleanup) is
// dropped, not undone.
func TestJournalOfCommittedPhaseIsNotUndone(t *testing.T) {
	dir := t.TempDir()
	buildFixture(t, dir)
	store := openStore(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	jdir := filepath.Join(dir, ".git", "memd", journalDirName)
	if err := os.MkdirAll(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	man := journalManifest{Run: RunID(fixNow), Phase: "archive", Entries: []journalEntry{{Kind: opMove, Path: epOld1, To: "archive/2026/" + epOld1}}}
	b, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(jdir, "journal.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	h := head(t, dir)
	runSleep(t, dir, store, testConfig(), nil)
	if !exists(dir, "archive/2026/"+epOld1) || exists(dir, epOld1) {
		t.Fatal("a committed phase's move was undone")
	}
	if exists(dir, jdir[len(dir)+1:]) || head(t, dir) != h {
		t.Fatal("journal kept or something committed")
	}
}
