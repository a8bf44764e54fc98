package gitrepo

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestUserGitNotRefusedByIndexRefresh: a person's `git add` and `git commit` in a loop
// beside memd committing and refreshing the index as fast as it can. git refuses at once
// ("Unable to create '.git/index.lock': File exists") whenever it meets a lock, so memd's
// refresher must not take index.lock while the person's git is at work.
//
// A measurement (MEMD_LONG=1, bench/run.sh): two writers of one O_EXCL lock file can always
// meet, and on a loaded machine the moment between memd's last look and its lock grows, so a
// count of zero is a figure, not a guarantee make test can hold. The rules behind it are
// pinned deterministically by TestIndexLockHeldBacksOff and TestIndexLockHeldOnlyForTheRename.
func TestUserGitNotRefusedByIndexRefresh(t *testing.T) {
	if os.Getenv("MEMD_LONG") != "1" {
		t.Skip("MEMD_LONG=1: a race count, measured in bench/run.sh")
	}
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "resources/m/seed.html", "<p>seed</p>\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "seed")
	r := openTest(t, dir, testOptions())

	const iterations = 40
	deadline := time.Now().Add(8 * time.Second) // bounds the test on a slow machine
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var refreshes int
	wg.Add(1)
	go func() { // memd: commits and refreshes, back to back
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			testutil.WriteFile(t, dir, fmt.Sprintf("resources/m/n%04d.html", i), fmt.Sprintf("<p>%d</p>\n", i))
			// A stand-aside or a moved HEAD: next round. Each commit schedules the background
			// refresh, memd's own path (explicit: every other round, back to back).
			_, _ = r.CommitPaths([]string{"resources"})
			if i%2 == 0 && r.RefreshIndex() == nil {
				refreshes++
			}
		}
	}()
	refused, failed := 0, 0
	var firstRefusal string
	for i := 0; i < iterations && time.Now().Before(deadline); i++ {
		testutil.WriteFile(t, dir, fmt.Sprintf("notes/u%04d.txt", i), fmt.Sprintf("user %d\n", i))
		for _, args := range [][]string{{"add", fmt.Sprintf("notes/u%04d.txt", i)}, {"commit", "-q", "-m", fmt.Sprintf("user %d", i)}} {
			cmd := exec.Command("git", args...)
			cmd.Dir, cmd.Env = dir, testutil.GitEnv()
			var errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &errb, &errb
			if err := cmd.Run(); err != nil {
				if strings.Contains(errb.String(), "index.lock") {
					refused++
					if firstRefusal == "" {
						firstRefusal = errb.String()
					}
				} else {
					failed++ // e.g. nothing to commit: not this test's subject
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("user git: %d index.lock refusals, %d other failures in %d commands; memd refreshes %d", refused, failed, 2*iterations, refreshes)
	if refused > 0 {
		t.Fatalf("the person's git was refused %d times by memd's index.lock; first:\n%s", refused, firstRefusal)
	}
	// Once the person is done, memd's commit and index catch up (a person's commit built on
	// an index that lagged memd's commit leaves memd's files out: memd commits them again).
	mustCommit(t, r, "resources")
	statusClean(t, r)
}
