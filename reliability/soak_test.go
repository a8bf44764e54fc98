package reliability

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// sample is one measurement of one agent.
type sample struct {
	at         time.Duration
	rssKB      int
	heapMiB    float64 // go_memstats_heap_inuse_bytes
	liveMiB    float64 // go_memstats_heap_alloc_bytes: reachable plus not yet swept
	nextGCMiB  float64 // go_memstats_next_gc_bytes: the GC's goal, 2x the last live heap
	goroutines int
	fds        int
	latency    time.Duration // write → in HEAD
}

// procRSS is VmRSS in KiB from /proc/<pid>/status.
func procRSS(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return -1
}

func procFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestSoak runs two agents on two clones of one remote with writer processes on both for
// MEMD_SOAK (e.g. 10m), samples RSS, goroutines (/metrics go_goroutines), open files
// (/proc/<pid>/fd) and commit latency (a probe write until HEAD has it), and asserts memory
// plateaus (RSS and Go heap in use, sampled every 5 s: the last quarter's average within
// 1.1x the second quarter's) and goroutines, files and latency stay flat (within 1.5x plus a small slack).
// At the end every write is in both clones and the remote.
func TestSoak(t *testing.T) {
	v := os.Getenv("MEMD_SOAK")
	if v == "" {
		t.Skip("MEMD_SOAK unset (make soak DURATION=10m)")
	}
	dur, err := time.ParseDuration(v)
	if err != nil || dur < 20*time.Second {
		t.Fatalf("MEMD_SOAK=%q: want a duration of at least 20s", v)
	}
	rng := scenarioRand(t, "soak")
	cfg := strings.Replace(fastConfig, "sync: {pull_interval: 1s, timeout: 3s}", "sync: {pull_interval: 2s, timeout: 10s}", 1) +
		"sleep: {schedule: \"*/2 * * * *\", catch_up: true}\n"
	// MEMD_SOAK_PROFILE=DIR saves each agent's heap profile at the end of each quarter
	// (heap-A-q1.pprof …), for `go tool pprof -diff_base` when something grows, and logs
	// each clone's `git count-objects -v` beside it.
	profDir := os.Getenv("MEMD_SOAK_PROFILE")
	if profDir != "" {
		cfg = strings.Replace(cfg, `http: {listen: "127.0.0.1:0"}`, `http: {listen: "127.0.0.1:0", pprof: true}`, 1)
	}
	a := newWorld(t, worldOpts{remote: true, demo: true, config: cfg})
	b := *a
	b.repo = filepath.Join(a.home, "memory-b")
	if out, code := b.memd("init", "--config", b.config, b.repo, "--remote", a.bare); code != 0 {
		t.Fatalf("memd init (second clone): exit %d\n%s", code, out)
	}
	worlds := []*world{a, &b}
	var daemons []*testutil.Daemon
	for _, w := range worlds {
		daemons = append(daemons, w.start())
	}
	start := time.Now()
	until := start.Add(dur - dur/10) // writers stop before the end, so everything settles
	type proc struct {
		cmd  *exec.Cmd
		out  *bytes.Buffer
		spec writerSpec
	}
	var procs []proc
	for i, m := range []string{modeLock, modeRename, modeLock, modeTruncate} {
		w := worlds[i/2]
		s := writerSpec{Repo: w.repo, ID: 100 + i, Mode: m, Count: 1 << 30, Files: 150, Seed: rng.Uint64(), Pause: 400 * time.Millisecond}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append([]string(nil), w.env...), s.env()...)
		cmd.Env = append(cmd.Env, "MEMD_W_UNTIL="+strconv.FormatInt(until.UnixNano(), 10))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		must(t, cmd.Start())
		procs = append(procs, proc{cmd, &out, s})
	}

	every := max(2*time.Second, dur/60)
	series := make([][]sample, len(worlds)) // memory, every memEvery
	probes := make([][]sample, len(worlds)) // a probe write's latency and the memory then, every every
	probe := 0
	quarter := 0
	snapshot := func(q int) {
		for i, d := range daemons {
			if code, body, err := d.Get("/debug/pprof/heap"); err == nil && code == 200 {
				must(t, os.WriteFile(filepath.Join(profDir, fmt.Sprintf("heap-%c-q%d.pprof", 'A'+i, q)), []byte(body), 0o644))
			}
			objs, _ := exec.Command("git", "-C", worlds[i].repo, "count-objects", "-v").Output()
			t.Logf("agent %c at quarter %d (%s): %s", 'A'+i, q, time.Since(start).Round(time.Second), strings.Join(strings.Fields(string(objs)), " "))
		}
	}
	// Memory is sampled every few seconds and averaged per quarter: heap in use swings
	// between the live heap and twice it within a GC cycle, so an average of the minute
	// probes alone (~13 a quarter) moved by ±5% with where in the cycle each one fell.
	memEvery := min(every, 5*time.Second)
	var lastProbe time.Time
	for time.Since(start) < dur-dur/10 {
		if q := int(4 * time.Since(start) / (dur - dur/10)); profDir != "" && q > quarter {
			quarter = q
			snapshot(q)
		}
		probeNow := time.Since(lastProbe) >= every
		for i, w := range worlds {
			d := daemons[i]
			if d.HasExited() {
				t.Fatalf("agent %d exited%s", i, d.Describe())
			}
			s := sample{at: time.Since(start), rssKB: procRSS(d.PID()), fds: procFDs(d.PID())}
			m := d.Metrics("go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes", "go_memstats_next_gc_bytes")
			s.goroutines = int(m["go_goroutines"])
			s.heapMiB = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
			s.liveMiB = m["go_memstats_heap_alloc_bytes"] / (1 << 20)
			s.nextGCMiB = m["go_memstats_next_gc_bytes"] / (1 << 20)
			series[i] = append(series[i], s)
			if !probeNow {
				continue
			}
			probe++
			rel := fmt.Sprintf("areas/probe/p%d.html", i)
			c := fmt.Sprintf("<p>probe %d</p>\n", probe)
			t0 := time.Now()
			w.write(rel, c)
			if testutil.Poll(2*time.Minute, func() bool { return w.blobs(w.repo, []string{"HEAD:" + rel})["HEAD:"+rel] == c }) {
				s.latency = time.Since(t0)
			} else {
				s.latency = -1
			}
			probes[i] = append(probes[i], s)
		}
		if probeNow {
			lastProbe = time.Now()
		}
		time.Sleep(memEvery)
	}
	if profDir != "" {
		snapshot(4)
	}
	exp := map[string]expectation{}
	writes := 0
	for _, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v\n%s", p.spec.ID, err, p.out.String())
		}
		var n int
		if _, err := fmt.Sscanf(strings.TrimSpace(p.out.String()), "done %d", &n); err != nil {
			t.Fatalf("writer %d said %q", p.spec.ID, p.out.String())
		}
		s := p.spec
		s.Count = n
		writes += n
		for rel, c := range s.finals() {
			exp[rel] = expectation{content: c}
		}
	}
	// Settle: both clones equal the remote and their work trees.
	ok := testutil.Poll(3*time.Minute, func() bool {
		for _, w := range worlds {
			if ok, _ := w.settled(0); !ok {
				return false
			}
		}
		return a.head() == b.head()
	})
	if !ok {
		_, whyA := a.settled(0)
		_, whyB := b.settled(0)
		// The daemons' own words say why (offline, a refused push, a stuck merge).
		for i, d := range daemons {
			st, _ := os.ReadFile(filepath.Join(worlds[i].repo, ".git", "memd", "status.json"))
			t.Logf("agent %c status.json: %s%s", 'A'+i, st, d.Describe())
		}
		t.Fatalf("the clones did not converge: A %s; B %s", whyA, whyB)
	}
	var problems []string
	found := 0
	for _, w := range worlds {
		f, p := w.verifyRepo(exp)
		found += f
		problems = append(problems, p...)
	}
	for i, d := range daemons {
		if code := d.Stop(); code != 0 {
			problems = append(problems, fmt.Sprintf("agent %d SIGTERM: exit %d", i, code))
		}
	}

	// Report and check flatness.
	var tbl strings.Builder
	fmt.Fprintf(&tbl, "\n| t | agent | RSS MiB | heap in use MiB | heap alloc MiB | next GC MiB | goroutines | open fds | commit latency |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for j := range probes[0] {
		for i := range probes {
			if j < len(probes[i]) {
				s := probes[i][j]
				fmt.Fprintf(&tbl, "| %s | %c | %.1f | %.1f | %.1f | %.1f | %d | %d | %s |\n", s.at.Round(time.Second), 'A'+i, float64(s.rssKB)/1024,
					s.heapMiB, s.liveMiB, s.nextGCMiB, s.goroutines, s.fds, s.latency.Round(time.Millisecond))
			}
		}
	}
	t.Log(tbl.String())
	// quarters averages one agent's samples (ss[i]) over the first, second and last quarter.
	quarters := func(all [][]sample, i int, get func(sample) float64) (first, second, last float64, ok bool) {
		ss := all[i]
		q := len(ss) / 4
		if q == 0 {
			return 0, 0, 0, false
		}
		avg := func(xs []sample) float64 {
			sum := 0.0
			for _, x := range xs {
				sum += get(x)
			}
			return sum / float64(len(xs))
		}
		return avg(ss[:q]), avg(ss[q : 2*q]), avg(ss[len(ss)-q:]), true
	}
	// flat checks the last quarter's average against the second's: ≤ factor x + slack.
	// The first quarter is warm-up: go-git's object cache (4 MiB, sync/gitrepo/repo.go) and the
	// fetched packs' indexes (merged past 16 packs, sync/gitrepo/packs.go) fill to their bounds.
	// A leak keeps growing after that, so the second quarter is the baseline.
	flat := func(name string, ss [][]sample, i int, get func(sample) float64, factor, slack float64) string {
		first, second, last, ok := quarters(ss, i, get)
		if !ok {
			return ""
		}
		msg := fmt.Sprintf("agent %c %s: first quarter %.1f, second %.1f, last %.1f", 'A'+i, name, first, second, last)
		t.Log(msg)
		if factor > 0 && last > second*factor+slack {
			problems = append(problems, msg+fmt.Sprintf(" (the last quarter grew more than %.1fx + %.0f over the second)", factor, slack))
		}
		return fmt.Sprintf("%c %s %.0f→%.0f→%.0f", 'A'+i, name, first, second, last)
	}
	// info reports a series without a check: the GC's goal (twice the heap live after the
	// last collection) tells a live heap that grew from garbage awaiting collection.
	info := func(name string, i int, get func(sample) float64) string { return flat(name, series, i, get, 0, 0) }
	var notes []string
	for i := range series {
		notes = append(notes,
			// Memory plateaus: the last quarter within 1.1x the second (issue 17), no slack.
			flat("RSS MiB", series, i, func(s sample) float64 { return float64(s.rssKB) / 1024 }, 1.1, 0),
			flat("heap MiB", series, i, func(s sample) float64 { return s.heapMiB }, 1.1, 0),
			info("next GC MiB", i, func(s sample) float64 { return s.nextGCMiB }),
			flat("goroutines", series, i, func(s sample) float64 { return float64(s.goroutines) }, 1.5, 10),
			flat("fds", series, i, func(s sample) float64 { return float64(s.fds) }, 1.5, 8),
			flat("latency ms", probes, i, func(s sample) float64 { return float64(s.latency.Milliseconds()) }, 1.5, 3000))
	}
	for i := range probes {
		for _, s := range probes[i] {
			if s.latency < 0 {
				problems = append(problems, fmt.Sprintf("agent %c: a probe write at %s was not committed in 2 minutes", 'A'+i, s.at))
			}
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	record(t, row{Scenario: "soak " + dur.String() + " (2 agents, 4 writers, 1 remote)", Iterations: len(probes[0]), Writes: 2 * len(exp),
		Found: found, Corruptions: len(problems), Time: time.Since(start),
		Note: fmt.Sprintf("%d write ops; %s", writes, strings.Join(notes, "; "))})
}
