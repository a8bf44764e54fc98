// Command liveremote benchmarks how soon a write on one machine is on another, and what the
// looks at the remote cost while nothing happens (issue 29): two `memd run` daemons with the
// default sync config (check_interval 10s, pull_interval 5m) on clones of one bare repo
// served by `git http-backend` behind a counting proxy, with 200 extra refs on the remote.
//
//   - A writes → B has the same bytes on disk: p50 and p90 over -writes writes, each after a
//     random pause of up to check_interval.
//
//   - Idle: over -idle, requests per minute per machine and bytes per look at the proxy;
//     A's CPU (utime+stime) as a share of one core, its wakeups (voluntary context switches
//     of all threads, /proc/<pid>/task/*/status) per second, and its RSS before and after.
//
//     go run ./bench/liveremote -files 1000 -writes 20 -idle 10m
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/cgi"
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
	files := flag.Int("files", 1000, "memory files in the demo repo")
	writes := flag.Int("writes", 20, "writes on A measured until they are on B")
	idle := flag.Duration("idle", 10*time.Minute, "idle window for requests, CPU and wakeups")
	bin := flag.String("memd", "", "memd binary (default: build one)")
	logs := flag.String("logs", "", "write both daemons' debug logs and the writes' times to this directory (where the time goes)")
	flag.Parse()
	work, err := os.MkdirTemp("", "memd-bench-liveremote-")
	check(err)
	defer os.RemoveAll(work)
	if *bin == "" {
		*bin = filepath.Join(work, "memd")
		run("", nil, "go", "build", "-o", *bin, "./cmd/memd")
	}
	proxy := startServer(work)
	bare := filepath.Join(work, "srv", "mem.git")
	run("", nil, "git", "init", "-q", "--bare", "-b", "main", bare)
	run(bare, nil, "git", "config", "http.receivepack", "true")

	debugLogs = *logs != ""
	a := newMachine(*bin, work, "a")
	run("", a.env, *bin, "init", "--config", a.cfg, "--demo", "--demo-count", strconv.Itoa(*files), a.repo)
	run(a.repo, a.env, "git", "push", "-q", bare, "main")
	head := strings.TrimSpace(run(bare, nil, "git", "rev-parse", "main"))
	var refs strings.Builder
	for i := range 200 {
		fmt.Fprintf(&refs, "create refs/pull/%d/head %s\n", i, head)
	}
	runIn(bare, refs.String(), "git", "update-ref", "--stdin")
	url := proxy.url("mem.git")
	run(a.repo, a.env, "git", "remote", "add", "origin", url)
	run(a.repo, a.env, "git", "fetch", "-q", "origin")
	b := newMachine(*bin, work, "b")
	// B reaches the same server by another name, so the proxy tells its requests from A's.
	bURL := strings.Replace(url, "127.0.0.1", "localhost", 1)
	if debugLogs {
		defer func() {
			check(os.MkdirAll(*logs, 0o755))
			check(os.WriteFile(filepath.Join(*logs, "a.log"), []byte(a.logs.String()), 0o644))
			check(os.WriteFile(filepath.Join(*logs, "b.log"), []byte(b.logs.String()), 0o644))
			check(os.WriteFile(filepath.Join(*logs, "writes.txt"), []byte(writeTimes.String()), 0o644))
		}()
	}
	run("", b.env, "git", "clone", "-q", bURL, b.repo)

	a.start()
	defer a.stop()
	b.start()
	defer b.stop()
	time.Sleep(15 * time.Second) // both start-up syncs and a first look

	var lat, aFixed, bWait, bFixed []time.Duration
	for i := range *writes {
		// A pause of a random share of check_interval first: a user's writes keep no step
		// with B's looks (back to back, each write would start just after B's look and wait
		// a whole interval for the next).
		time.Sleep(time.Duration(rand.Float64() * float64(10*time.Second)))
		rel := fmt.Sprintf("areas/bench/w-%03d.html", i)
		body := []byte(fmt.Sprintf("<p>write %d at %s</p>\n", i, time.Now().Format(time.RFC3339Nano)))
		check(os.MkdirAll(filepath.Join(a.repo, "areas", "bench"), 0o755))
		t0 := time.Now()
		check(os.WriteFile(filepath.Join(a.repo, rel), body, 0o644))
		for {
			got, err := os.ReadFile(filepath.Join(b.repo, rel))
			if err == nil && bytes.Equal(got, body) {
				break
			}
			if time.Since(t0) > 10*time.Minute {
				fatalf("write %d not on B after 10 minutes\nA:\n%s\nB:\n%s", i, a.logs.String(), b.logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
		// Where the time went: A's part (quiet period, commit, fetch, push: until its push
		// was answered), the wait for B's next look, B's part (look, fetch, checkout).
		if pushed, ok := proxy.first(t0, "127.0.0.1", "git-receive-pack"); ok {
			if looked, ok := proxy.first(pushed, "localhost", "git-upload-pack"); ok {
				aFixed = append(aFixed, pushed.Sub(t0))
				bWait = append(bWait, looked.Sub(pushed))
				bFixed = append(bFixed, t0.Add(lat[i]).Sub(looked))
			}
		}
		fmt.Fprintf(&writeTimes, "%d %s %s\n", i, t0.Format(time.RFC3339Nano), time.Now().Format(time.RFC3339Nano))
		fmt.Fprintf(os.Stderr, "write %d on B after %s\n", i, lat[i].Round(time.Millisecond))
	}
	time.Sleep(15 * time.Second) // the last pushes and fetches settle

	n0, b0 := proxy.served()
	cpu0, sw0, rss0, ch0 := a.cpu(), a.wakeups(), a.rss(), a.childCPU()
	t0 := time.Now()
	time.Sleep(*idle)
	el := time.Since(t0)
	n1, b1 := proxy.served()
	cpu1, sw1, rss1, ch1 := a.cpu(), a.wakeups(), a.rss(), a.childCPU()

	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%d memory files, %d writes, idle window %s, load average %s\n\n", *files, *writes, el.Round(time.Second), loadavg())
	fmt.Println("| figure | value | goal |")
	fmt.Println("| --- | ---: | ---: |")
	fmt.Printf("| A writes → B has the bytes, p50 | %.1f s | ≤ 8 s |\n", pct(lat, 0.5).Seconds())
	fmt.Printf("| A writes → B has the bytes, p90 | %.1f s | ≤ 13 s |\n", pct(lat, 0.9).Seconds())
	if len(aFixed) > 0 {
		for _, d := range [][]time.Duration{aFixed, bWait, bFixed} {
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		}
		fmt.Printf("| of which A: write → its push answered (2 s quiet period included), p50 | %.2f s | |\n", pct(aFixed, 0.5).Seconds())
		fmt.Printf("| of which the wait for B's next look, p50 | %.2f s | |\n", pct(bWait, 0.5).Seconds())
		fmt.Printf("| of which B: look → the bytes on disk, p50 | %.3f s | |\n", pct(bFixed, 0.5).Seconds())
	}
	perMin := float64(n1-n0) / 2 / el.Minutes()
	fmt.Printf("| idle requests per minute per machine (200 extra refs) | %.1f | ≤ 7 |\n", perMin)
	if n1 > n0 {
		fmt.Printf("| bytes per look (request and answer bodies) | %d B | ≤ 4 KiB |\n", (b1-b0)/(n1-n0))
	}
	fmt.Printf("| idle CPU of A, share of one core | %.3f%% | ≤ 0.1%% |\n", 100*float64(cpu1-cpu0)/float64(el))
	fmt.Printf("| idle CPU of A's git children (status, fetch), share of one core | %.3f%% | |\n", 100*float64(ch1-ch0)/float64(el))
	fmt.Printf("| idle wakeups of A per second (voluntary switches, all threads) | %.2f | ≤ 1 |\n", float64(sw1-sw0)/el.Seconds())
	fmt.Printf("| A's RSS before → after the idle window | %d → %d kB | unchanged |\n", rss0, rss1)
}

// debugLogs: -logs was given (the daemons log at debug level; the idle figures then include
// the logging).
var (
	debugLogs  bool
	writeTimes strings.Builder
)

type machine struct {
	bin, home, repo, cfg string
	env                  []string
	cmd                  *exec.Cmd
	logs                 *logBuf
	done                 chan error
}

func newMachine(bin, work, name string) *machine {
	home := filepath.Join(work, name)
	check(os.MkdirAll(home, 0o755))
	m := &machine{bin: bin, home: home, repo: filepath.Join(home, "memory"), cfg: filepath.Join(home, "memd.yaml")}
	m.env = env(home)
	cfg := "http: {listen: \"127.0.0.1:0\"}\nsleep: {catch_up: false}\n"
	if debugLogs {
		cfg += "log: {level: debug}\n"
	}
	check(os.WriteFile(m.cfg, []byte(cfg), 0o600))
	return m
}

func (m *machine) start() {
	m.logs = &logBuf{}
	m.cmd = exec.Command(m.bin, "run", "--config", m.cfg, "--repo", m.repo)
	m.cmd.Env, m.cmd.Stdout, m.cmd.Stderr = m.env, m.logs, m.logs
	check(m.cmd.Start())
	m.done = make(chan error, 1)
	go func() { m.done <- m.cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(m.logs.String(), "start-up reconcile done") {
		if time.Now().After(deadline) {
			fatalf("%s did not start:\n%s", m.home, m.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *machine) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
	}
}

// cpu is utime+stime from /proc/<pid>/stat.
func (m *machine) cpu() time.Duration { return m.stat(11, 12) }

// childCPU is cutime+cstime: the git commands memd ran and waited for (git status of the
// reconcile, the pull interval's fetch), which utime+stime leave out.
func (m *machine) childCPU() time.Duration { return m.stat(13, 14) }

func (m *machine) stat(i, j int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.cmd.Process.Pid))
	check(err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseInt(f[i], 10, 64)
	st, _ := strconv.ParseInt(f[j], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

var switchesRE = regexp.MustCompile(`(?m)^voluntary_ctxt_switches:\s+(\d+)`)

// wakeups sums voluntary context switches over the process's threads: each is a sleep that
// ended, i.e. a wakeup.
func (m *machine) wakeups() int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", m.cmd.Process.Pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if s := switchesRE.FindSubmatch(b); s != nil {
			v, _ := strconv.ParseInt(string(s[1]), 10, 64)
			n += v
		}
	}
	return n
}

func (m *machine) rss() int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// countingServer is git http-backend under net/http/cgi, counting requests and bytes.
type countingServer struct {
	addr     string
	mu       sync.Mutex
	requests int64
	bytes    int64
	log      []served
}

func startServer(work string) *countingServer {
	execPath := strings.TrimSpace(run("", nil, "git", "--exec-path"))
	root := filepath.Join(work, "srv")
	check(os.MkdirAll(root, 0o755))
	s := &countingServer{}
	h := &cgi.Handler{Path: filepath.Join(execPath, "git-http-backend"), Root: "/git", Env: []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH")}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	s.addr = ln.Addr().String()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		s.mu.Lock()
		s.requests++
		s.bytes += cw.n + max(r.ContentLength, 0)
		host, _, _ := strings.Cut(r.Host, ":")
		// A push is timed at its answer (the ref moved), any other request at its start.
		at := start
		if strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			at = time.Now()
		}
		s.log = append(s.log, served{at: at, host: host, path: r.URL.Path})
		s.mu.Unlock()
	}))
	return s
}

// first is the time of the first request after t from host to a path ending in suffix.
func (s *countingServer) first(t time.Time, host, suffix string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best time.Time
	for _, e := range s.log {
		if e.at.After(t) && e.host == host && strings.HasSuffix(e.path, suffix) && (best.IsZero() || e.at.Before(best)) {
			best = e.at
		}
	}
	return best, !best.IsZero()
}

type served struct {
	at         time.Time
	host, path string
}

func (s *countingServer) url(name string) string { return "http://" + s.addr + "/git/" + name }

func (s *countingServer) served() (int64, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.bytes
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// env isolates a daemon: its own HOME, no global or system git config.
func env(home string) []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "MEMD_") || strings.HasPrefix(k, "XDG_") || k == "HOME" {
			continue
		}
		e = append(e, kv)
	}
	return append(e, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "GIT_AUTHOR_NAME=b", "GIT_AUTHOR_EMAIL=b@b",
		"GIT_COMMITTER_NAME=b", "GIT_COMMITTER_EMAIL=b@b")
}

func run(dir string, env []string, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func runIn(dir, stdin, name string, args ...string) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		fatalf("%s: %v\n%s", name, err, out)
	}
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func check(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/liveremote: "+format+"\n", args...)
	os.Exit(1)
}
