package procgroup

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// A descendant that left the process group (setsid) is ended with the run, in both modes:
// the process-group kill alone (today's main) leaves it running.
func TestRunEndsSetsidDescendant(t *testing.T) {
	modes := []struct {
		name  string
		force bool
	}{{"best", false}, {"subreaper", true}}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			forceSubreaper.Store(m.force)
			defer forceSubreaper.Store(false)
			if m.name == "best" && Mode() != ModeCgroup {
				if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
					t.Fatalf("no writable cgroup v2 here although CI runs as root")
				}
				t.Logf("NOTE: no writable cgroup v2 (%s); the best mode is the subreaper", "/proc/self/cgroup")
			}
			t.Logf("mode %s", Mode())
			dir := t.TempDir()
			pid := filepath.Join(dir, "pid")
			script := "setsid sh -c 'sleep 30' </dev/null >/dev/null 2>&1 & echo $! > " + pid + "; sleep 0.05"
			for _, exit := range []string{"exit 0", "exit 3", "sleep 30"} {
				o := Options{Timeout: 5 * time.Second}
				if exit == "sleep 30" {
					o.Timeout = 300 * time.Millisecond
				}
				start := time.Now()
				r := Run(context.Background(), []string{"sh", "-c", script + "; " + exit}, o)
				if exit == "exit 0" && r.Err != nil {
					t.Fatalf("%s: %v", exit, r.Err)
				}
				// SIGKILLed before Run returned; the kernel may take a moment to finish its exit.
				testutil.WaitFor(t, exit+": the setsid child to be gone after Run returned (mode "+string(Mode())+")",
					2*time.Second, func() bool { return !alive(t, pid) }, nil)
				t.Logf("%s: the setsid child is gone %s after the start", exit, time.Since(start))
			}
		})
	}
}

// The cgroup a run made is gone after it.
func TestRunRemovesItsCgroup(t *testing.T) {
	if Mode() != ModeCgroup {
		t.Skip("NOTE: no writable cgroup v2 here; nothing to remove")
	}
	r := Run(context.Background(), []string{"sh", "-c", "cat /proc/self/cgroup"}, Options{})
	if r.Err != nil || !strings.Contains(string(r.Output), cgroupPrefix) {
		t.Fatalf("the command ran outside its cgroup: %q %v", r.Output, r.Err)
	}
	ents, _ := os.ReadDir(cgroupRoot())
	mine := cgroupPrefix + strconv.Itoa(os.Getpid()) + "-" // other test processes run beside
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), mine) {
			t.Errorf("cgroup %s left behind", e.Name())
		}
	}
}
