// Command daemon benchmarks the running `memd run` process on demo repos (demo.Generate via
// `memd init --demo`) and prints a Markdown table.
//
// Write-to-commit latency: from a write in the repo to the branch ref moving, polled on
// .git/refs/heads/main; minus the quiet window it is memd's own overhead, compared with
// memd's commit time for the same change (memd_commit_duration_seconds from /metrics).
// Target: latency beyond quiet <= 2x commit time. Idle CPU: utime+stime of the daemon
// (/proc/<pid>/stat) over -idle with no changes. RSS: VmRSS after the changes; -rss-size
// adds one more (slow) repo size for it with a few changes. The changes start once the
// first inventory is in (/metrics); -cpuprofile and -memprofile save the daemon's profiles
// over them (http.pprof), -work keeps and reuses the generated repos.
//
//	go run ./bench/daemon -sizes 1000,10000,100000 -changes 20 -idle 60s
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	sizes := flag.String("sizes", "1000,10000", "comma-separated repo sizes (memory files)")
	changes := flag.Int("changes", 20, "measured single-file changes per size")
	quiet := flag.Duration("quiet", 200*time.Millisecond, "watch.quiet of the daemon")
	idle := flag.Duration("idle", 60*time.Second, "idle window for the CPU measurement (0 = skip)")
	rssSize := flag.Int("rss-size", 0, "also measure at this size (e.g. 100000; slow), for RSS")
	bin := flag.String("memd", "", "memd binary (default: build one)")
	keep := flag.Bool("keep", false, "keep the work directory")
	workDir := flag.String("work", "", "work directory to use and keep; a repo already generated there for a size is reused (not a clean start: for profiling runs)")
	flag.StringVar(&prof.cpu, "cpuprofile", "", "write the daemon's CPU profile over the measured changes to FILE-<size>.pprof (http.pprof)")
	flag.StringVar(&prof.log, "log", "", "run the daemon at log level debug and write its log to FILE-<size>.log (each commit's phases, the index refreshes)")
	flag.StringVar(&prof.heap, "memprofile", "", "write the daemon's heap profile after the measured changes to FILE-<size>.pprof (http.pprof)")
	flag.Parse()

	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fatalf("-sizes: %q is not a positive number", s)
		}
		ns = append(ns, n)
	}
	work, err := os.MkdirTemp("", "memd-bench-daemon-")
	if *workDir != "" {
		work, err, *keep = *workDir, os.MkdirAll(*workDir, 0o755), true
	}
	if err != nil {
		fatalf("%v", err)
	}
	if !*keep {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "work dir:", work)
	}
	if *bin == "" {
		*bin = filepath.Join(work, "memd")
		out, err := exec.Command("go", "build", "-o", *bin, "github.com/memd-dev/memd/cmd/memd").CombinedOutput()
		if err != nil {
			fatalf("go build memd: %v\n%s", err, out)
		}
	}

	var rows []row
	for _, n := range ns {
		r, err := measure(*bin, work, n, *changes, *quiet, *idle)
		if err != nil {
			fatalf("size %d: %v", n, err)
		}
		rows = append(rows, r)
	}
	if *rssSize > 0 {
		r, err := measure(*bin, work, *rssSize, max(3, *changes/4), *quiet, 0)
		if err != nil {
			fatalf("size %d: %v", *rssSize, err)
		}
		rows = append(rows, r)
	}
	printTable(rows, *quiet, *idle)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/daemon: "+format+"\n", args...)
	os.Exit(1)
}

// prof names the profile files (empty: none); either one turns on http.pprof.
var prof struct{ cpu, heap, log string }

type row struct {
	files      int
	initTime   time.Duration
	startTime  time.Duration
	invTime    time.Duration   // start to the first inventory published
	latency    []time.Duration // write → ref moved
	commit     []time.Duration // memd's own commit time for the same change
	gitCommit  []time.Duration // git add + git commit of a one-file change, same repo
	idleCPU    time.Duration
	idleWindow time.Duration
	rssKB      int
}

// env isolates the daemon: its own HOME and XDG dirs, no global or system git config.
func env(home string) []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "MEMD_") || strings.HasPrefix(k, "XDG_") || k == "HOME" {
			continue
		}
		e = append(e, kv)
	}
	return append(e, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var addrRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

func measure(bin, work string, n, changes int, quiet, idle time.Duration) (row, error) {
	r := row{files: n, idleWindow: idle}
	home := filepath.Join(work, fmt.Sprintf("home-%d", n))
	repo := filepath.Join(home, "memory")
	cfgPath := filepath.Join(home, "memd.yaml")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return r, err
	}
	pprofOn := prof.cpu != "" || prof.heap != ""
	cfg := fmt.Sprintf("watch: {quiet: %s, max_delay: 2s}\nhttp: {listen: \"127.0.0.1:0\", pprof: %t}\nsleep: {catch_up: false}\n", quiet, pprofOn)
	if prof.log != "" {
		cfg += "log: {level: debug}\n"
	}
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return r, err
	}
	e := env(home)

	t0 := time.Now()
	if _, err := os.Stat(filepath.Join(repo, ".git")); err == nil {
		fmt.Fprintf(os.Stderr, "size %d: reusing %s\n", n, repo)
	} else {
		fmt.Fprintf(os.Stderr, "size %d: memd init --demo ...\n", n)
		initCmd := exec.Command(bin, "init", "--config", cfgPath, "--demo", "--demo-count", strconv.Itoa(n), repo)
		initCmd.Env = e
		if out, err := initCmd.CombinedOutput(); err != nil {
			return r, fmt.Errorf("memd init: %v\n%s", err, out)
		}
		r.initTime = time.Since(t0)
	}

	var files []string
	err := filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".html") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	sort.Strings(files)
	if len(files) == 0 {
		return r, errors.New("demo repo has no .html files")
	}

	fmt.Fprintf(os.Stderr, "size %d: %d files; memd run ...\n", n, len(files))
	logs := &logBuf{}
	if prof.log != "" {
		defer func() { _ = os.WriteFile(fmt.Sprintf("%s-%d.log", prof.log, n), []byte(logs.String()), 0o644) }()
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--repo", repo)
	cmd.Env, cmd.Stdout, cmd.Stderr = e, logs, logs
	t0 = time.Now()
	if err := cmd.Start(); err != nil {
		return r, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var stopOnce sync.Once
	stopDaemon := func() {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	defer stopDaemon()
	if err := waitFor(5*time.Minute, done, func() bool { return strings.Contains(logs.String(), `msg="memd running"`) }); err != nil {
		return r, fmt.Errorf("start: %v\n%s", err, logs.String())
	}
	r.startTime = time.Since(t0)
	m := addrRE.FindStringSubmatch(logs.String())
	if m == nil {
		return r, fmt.Errorf("no http address in the log:\n%s", logs.String())
	}
	addr := m[1]
	ref := filepath.Join(repo, ".git", "refs", "heads", "main")
	// The first inventory is built after READY (it parses every memory file); the changes
	// are measured once it is in, so they show the steady cost, not the start-up's.
	err = waitFor(5*time.Minute, done, func() bool {
		n, err := metricSum(addr, "memd_memories{")
		return err == nil && n > 0
	})
	if err != nil {
		return r, fmt.Errorf("first inventory: %v", err)
	}
	r.invTime = time.Since(t0)
	settle(addr, done)

	// The CPU profile covers the measured changes: a window of about one second a change
	// (quiet + commit + settle), started with the first one.
	var profDone chan error
	if prof.cpu != "" {
		profDone = make(chan error, 1)
		go func() {
			profDone <- fetch(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, max(1, changes)), fmt.Sprintf("%s-%d.pprof", prof.cpu, n))
		}()
	}
	for i := range changes {
		f := files[(i*7919)%len(files)]
		before, err := os.ReadFile(ref)
		if err != nil {
			return r, err
		}
		sumBefore, countBefore, err := commitHistogram(addr)
		if err != nil {
			return r, err
		}
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return r, err
		}
		start := time.Now()
		_, werr := fmt.Fprintf(fh, "<!-- bench change %d -->\n", i)
		cerr := fh.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return r, err
		}
		// Tight poll on the ref file: a 41-byte read every 200µs costs the daemon nothing
		// noticeable and resolves the commit moment well below a millisecond.
		var lat time.Duration
		deadline := time.Now().Add(30 * time.Second)
		for {
			cur, err := os.ReadFile(ref)
			if err == nil && !bytes.Equal(cur, before) && len(cur) > 0 {
				lat = time.Since(start)
				break
			}
			if time.Now().After(deadline) {
				return r, fmt.Errorf("change %d (%s) not committed within 30s\n%s", i, f, logs.String())
			}
			time.Sleep(200 * time.Microsecond)
		}
		// The metrics snapshot is published right after the job.
		var sum float64
		err = waitFor(10*time.Second, done, func() bool {
			s, c, err := commitHistogram(addr)
			if err == nil && c > countBefore {
				sum = s - sumBefore
				return true
			}
			return false
		})
		if err != nil {
			return r, fmt.Errorf("commit metric after change %d: %v", i, err)
		}
		r.latency = append(r.latency, lat)
		r.commit = append(r.commit, time.Duration(sum*float64(time.Second)))
		settle(addr, done)
	}

	if profDone != nil {
		if err := <-profDone; err != nil {
			return r, fmt.Errorf("cpu profile: %v", err)
		}
	}
	if prof.heap != "" {
		if err := fetch("http://"+addr+"/debug/pprof/heap", fmt.Sprintf("%s-%d.pprof", prof.heap, n)); err != nil {
			return r, fmt.Errorf("heap profile: %v", err)
		}
	}
	pid := cmd.Process.Pid
	if idle > 0 {
		fmt.Fprintf(os.Stderr, "size %d: idle %s ...\n", n, idle)
		c0, err := cpuTime(pid)
		if err != nil {
			return r, err
		}
		time.Sleep(idle)
		c1, err := cpuTime(pid)
		if err != nil {
			return r, err
		}
		r.idleCPU = c1 - c0
	}
	if r.rssKB, err = rss(pid); err != nil {
		return r, err
	}
	stopDaemon()

	// git on the same data for the same kind of change: one appended file, `git add` of
	// that path and `git commit`, with memd stopped (the index is memd's, kept up to date).
	for i := range min(changes, 10) {
		f := files[(i*7919+1)%len(files)]
		fh, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return r, err
		}
		_, werr := fmt.Fprintf(fh, "<!-- git change %d -->\n", i)
		if err := errors.Join(werr, fh.Close()); err != nil {
			return r, err
		}
		rel, _ := filepath.Rel(repo, f)
		start := time.Now()
		for _, args := range [][]string{
			{"add", "--", rel},
			{"-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "bench", "--", rel},
		} {
			c := exec.Command("git", args...)
			c.Dir, c.Env = repo, e
			if out, err := c.CombinedOutput(); err != nil {
				return r, fmt.Errorf("git %v: %v\n%s", args, err, out)
			}
		}
		r.gitCommit = append(r.gitCommit, time.Since(start))
	}
	return r, nil
}

// settle lets the index refresh that follows a commit finish before the next change, so
// each measured change starts from a quiet daemon (the bench may wait; tests may not).
func settle(addr string, done chan error) {
	_ = waitFor(5*time.Second, done, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	time.Sleep(300 * time.Millisecond)
}

// fetch GETs url into file.
func fetch(url, file string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

func waitFor(timeout time.Duration, done chan error, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("memd run exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// commitHistogram reads memd_commit_duration_seconds sum and count from /metrics.
func commitHistogram(addr string) (sum, count float64, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "memd_commit_duration_seconds_sum "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(l, "memd_commit_duration_seconds_count "); ok {
			count, _ = strconv.ParseFloat(v, 64)
		}
	}
	return sum, count, sc.Err()
}

// metricSum sums the /metrics samples whose line starts with prefix.
func metricSum(addr, prefix string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, prefix) {
			if i := strings.LastIndexByte(l, ' '); i > 0 {
				v, _ := strconv.ParseFloat(l[i+1:], 64)
				sum += v
			}
		}
	}
	return sum, nil
}

// clkTck is USER_HZ, 100 on every Linux architecture Go supports.
const clkTck = 100

// cpuTime is utime+stime of pid from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from after its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clkTck, nil
}

// rss is VmRSS of pid in kB.
func rss(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func printTable(rows []row, quiet, idle time.Duration) {
	fmt.Printf("memd run: write-to-commit latency (quiet %s), idle CPU, RSS\n\n", quiet)
	fmt.Println("| files | init --demo | start | inventory | changes | latency p50 | latency p90 | beyond quiet p50 | beyond quiet p90 | memd commit p50 | beyond/commit (p50) | target ≤ 2x | git add+commit p50 | idle CPU | RSS |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: | ---: | ---: | ---: |")
	for _, r := range rows {
		beyond := make([]time.Duration, len(r.latency))
		for i, l := range r.latency {
			beyond[i] = l - quiet
		}
		b50, c50 := pct(beyond, 0.5), pct(r.commit, 0.5)
		ratio := float64(b50) / float64(max(c50, time.Microsecond))
		ok := "yes"
		if ratio > 2 {
			ok = "no"
		}
		idleCell := "–"
		if r.idleWindow > 0 {
			idleCell = fmt.Sprintf("%s over %s (%.3f%% of a core)", ms(r.idleCPU), r.idleWindow,
				100*float64(r.idleCPU)/float64(r.idleWindow))
			if r.idleCPU == 0 {
				// /proc counts in clock ticks: zero means less than one tick in the window.
				idleCell = fmt.Sprintf("< %s over %s (< %.3f%% of a core)", ms(time.Second/clkTck), r.idleWindow,
					100*float64(time.Second/clkTck)/float64(r.idleWindow))
			}
		}
		fmt.Printf("| %d | %.1f s | %.2f s | %.2f s | %d | %s | %s | %s | %s | %s | %.2fx | %s | %s | %s | %.1f MiB |\n",
			r.files, r.initTime.Seconds(), r.startTime.Seconds(), r.invTime.Seconds(), len(r.latency),
			ms(pct(r.latency, 0.5)), ms(pct(r.latency, 0.9)), ms(b50), ms(pct(beyond, 0.9)), ms(c50),
			ratio, ok, ms(pct(r.gitCommit, 0.5)), idleCell, float64(r.rssKB)/1024)
	}
	fmt.Println()
	if len(rows) > 1 && len(rows[0].commit) > 0 {
		base := pct(rows[0].commit, 0.5)
		for _, r := range rows[1:] {
			if len(r.commit) > 0 {
				fmt.Printf("memd commit p50 at %d files: %.2fx the %d-file p50.\n", r.files,
					float64(pct(r.commit, 0.5))/float64(max(base, time.Microsecond)), rows[0].files)
			}
		}
		fmt.Println()
	}
	fmt.Println("start: memd run to READY (the \"memd running\" log line); inventory: to the first inventory in /metrics (built after READY); the changes start after it.")
	fmt.Println("latency: write → .git/refs/heads/main changed; beyond quiet = latency − quiet; memd commit = Δ memd_commit_duration_seconds_sum for that change")
	fmt.Println("(writer lock + stage + commit + ref + inventory update, so it also covers work done after the ref moved).")
	if idle > 0 {
		fmt.Printf("idle CPU: utime+stime of the daemon over %s with no changes, after the measured changes.\n", idle)
	}
}
