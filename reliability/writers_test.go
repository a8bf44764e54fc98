package reliability

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReliabilityConcurrentWriters runs 8 writer processes (4 through the writer lock with a
// two-step write inside it, 3 by atomic rename, 1 by plain truncate-and-write) while memd
// commits, pushes to a bare remote and sleeps (a catch-up sleep of the demo memories at
// start, then every minute). Every final content must be committed and pushed, and no
// version of a lock writer's or rename writer's file in the whole history may be half
// written.
func TestReliabilityConcurrentWriters(t *testing.T) {
	t.Parallel()
	name := "concurrent writers (8 processes)"
	rng := scenarioRand(t, name)
	total := 320
	if isLong() {
		total = 10000
	}
	w := newWorld(t, worldOpts{remote: true, demo: true, config: fastConfig + "sleep: {schedule: \"* * * * *\", catch_up: true}\n"})
	must(t, os.MkdirAll(filepath.Join(w.repo, ".git", "memd"), 0o700))
	must(t, os.WriteFile(filepath.Join(w.repo, ".git", "memd", "sleep.json"),
		[]byte(`{"version":1,"baseline":"2026-01-01T00:00:00Z","phases":{}}`), 0o600))
	start := time.Now()
	d := w.start()

	modes := []string{modeLock, modeLock, modeLock, modeLock, modeRename, modeRename, modeRename, modeTruncate}
	var specs []writerSpec
	type proc struct {
		cmd *exec.Cmd
		out *bytes.Buffer
	}
	var procs []proc
	for i, m := range modes {
		s := writerSpec{Repo: w.repo, ID: i, Mode: m, Count: total / len(modes), Seed: rng.Uint64(), Pause: 4 * time.Millisecond}
		s.Files = max(1, s.Count/3)
		specs = append(specs, s)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append([]string(nil), w.env...), s.env()...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		must(t, cmd.Start())
		procs = append(procs, proc{cmd, &out})
	}
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("writer %d (%s): %v\n%s%s", i, modes[i], err, p.out.String(), d.Describe())
		}
	}
	writersDone := time.Since(start)
	timeout := settleTimeout
	if isLong() {
		timeout = 10 * time.Minute
	}
	if ok, why := w.settled(timeout); !ok {
		t.Fatalf("not settled %s after the writers: %s%s", timeout, why, d.Describe())
	}
	exp := map[string]expectation{}
	for _, s := range specs {
		for p, c := range s.finals() {
			exp[p] = expectation{content: c}
		}
	}
	found, problems := w.verifyRepo(exp)
	half, versions := w.halfWritten(specs)
	problems = append(problems, half...)
	if code := d.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("SIGTERM: exit %d", code))
	}
	if _, err := os.Stat(w.path(".memory.lock")); err == nil {
		problems = append(problems, ".memory.lock left behind")
	}
	sleeps := strings.Count(w.git("log", "--format=%s"), "sleep(")
	commits := strings.Count(w.git("log", "--format=%s"), "\n")
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s%s", len(problems), strings.Join(problems, "\n"), d.Describe())
	}
	if sleeps == 0 {
		t.Errorf("memd made no sleep commit while the writers wrote%s", d.Describe())
	}
	record(t, row{Scenario: name, Iterations: 1, Writes: len(exp), Found: found, Corruptions: len(problems),
		Time: time.Since(start), Note: fmt.Sprintf("%d write ops (writers done in %s); %d commits, %d sleep commits; %d historical versions of lock/rename files checked whole",
			total/len(modes)*len(modes), writersDone.Round(100*time.Millisecond), commits, sleeps, versions)})
}

// halfWritten reads every version, in the whole history, of every file the lock and rename
// writers wrote and returns those that are not whole (no end mark).
func (w *world) halfWritten(specs []writerSpec) (problems []string, versions int) {
	w.t.Helper()
	prefixes := map[string]writerSpec{}
	for _, s := range specs {
		if s.Mode == modeLock || s.Mode == modeRename {
			prefixes[fmt.Sprintf("resources/w%d-%s/", s.ID, s.Mode)] = s
		}
	}
	// Every object reachable from any ref, each once, with a path it was seen at (a blob
	// at two paths is the same bytes, so once is enough).
	out := w.git("rev-list", "--all", "--objects")
	var specsList []string
	var paths []string
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.SplitN(l, " ", 2)
		if len(f) != 2 {
			continue
		}
		for pre := range prefixes {
			if strings.HasPrefix(f[1], pre) && !seen[f[0]] {
				seen[f[0]] = true
				specsList = append(specsList, f[0])
				paths = append(paths, f[1])
			}
		}
	}
	blobs := w.blobs(w.repo, specsList)
	for i, h := range specsList {
		c, ok := blobs[h]
		if !ok {
			continue // a tree object under the prefix
		}
		versions++
		if !strings.Contains(c, "<!-- END w") || !strings.HasSuffix(c, "-->\n") {
			problems = append(problems, fmt.Sprintf("half-written version committed: %s blob %s: %.80q…", paths[i], h, c))
		}
	}
	return problems, versions
}
