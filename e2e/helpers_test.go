// Package e2e drives the real memd binary as a process against real git repos: `memd run`
// watches, commits, survives kills and restarts; the real `git` binary checks every result.
package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// memdBin is the memd binary built once in TestMain (without -race: the daemon is the thing
// under test, the race detector runs on the test process).
var memdBin string

func TestMain(m *testing.M) {
	bin, remove, err := testutil.BuildMemd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	memdBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// Timeouts for conditions. They are deadlines, not sleeps: every wait polls a condition.
const (
	startTimeout  = 20 * time.Second
	commitTimeout = 20 * time.Second
	exitTimeout   = 30 * time.Second
	pollEvery     = 20 * time.Millisecond
)

// baseConfig is what every test runs with unless it says otherwise: fast debounce, an
// ephemeral loopback port, no sleep catch-up (so no sleep commit mixes into what we count).
const baseConfig = `watch: {quiet: 200ms, max_delay: 2s}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
`

// world is one isolated user: HOME, XDG_CONFIG_HOME, git config and a memory repo made by
// `memd init`.
type world struct {
	t      *testing.T
	home   string
	repo   string
	config string
	env    []string
}

// newWorld makes a fresh home and a repo made by `memd init`, with baseConfig. Tests that
// need other settings pass a whole config to newWorldConfig (YAML refuses a repeated key).
func newWorld(t *testing.T) *world { return newWorldConfig(t, baseConfig) }

func newWorldConfig(t *testing.T, config string) *world {
	t.Helper()
	home := t.TempDir()
	w := &world{t: t, home: home, repo: filepath.Join(home, "memory"), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	// No user identity on purpose: memd must commit on a machine without one.
	if err := os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "MEMD_") || strings.HasPrefix(k, "XDG_") ||
			k == "HOME" || k == "NOTIFY_SOCKET" || k == "WATCHDOG_USEC" || k == "WATCHDOG_PID" || k == "JOURNAL_STREAM" {
			continue
		}
		w.env = append(w.env, kv)
	}
	w.env = append(w.env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"GIT_CONFIG_GLOBAL="+gitconfig, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, code := w.memd("init", "--config", w.config, w.repo)
	if code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	return w
}

// memd runs a short memd command to completion and returns its combined output and exit code.
func (w *world) memd(args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(memdBin, args...)
	cmd.Env = w.env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	default:
		w.t.Fatalf("memd %v: %v", args, err)
		return "", -1
	}
}

// path is the absolute path of a repo-relative one.
func (w *world) path(rel string) string { return filepath.Join(w.repo, filepath.FromSlash(rel)) }

func (w *world) write(rel, content string) {
	w.t.Helper()
	p := w.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) read(rel string) string {
	w.t.Helper()
	b, err := os.ReadFile(w.path(rel))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// sh runs a shell command line in the repo, as a user or an agent would.
func (w *world) sh(script string) {
	w.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env = w.repo, w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("sh %q: %v\n%s", script, err, out)
	}
}

// gitRun runs git in the repo with extra environment.
func (w *world) gitRun(extraEnv []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = w.repo
	cmd.Env = append(append([]string(nil), w.env...), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// git runs git and fails the test on error.
func (w *world) git(args ...string) string {
	w.t.Helper()
	out, err := w.gitRun(nil, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func (w *world) head() string {
	w.t.Helper()
	out, err := w.gitRun(nil, "rev-parse", "-q", "--verify", "HEAD")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func (w *world) commitCount() int {
	w.t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(w.git("rev-list", "--count", "HEAD")))
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// committed returns HEAD's content at rel, or ok=false when HEAD has no such path.
func (w *world) committed(rel string) (string, bool) {
	out, err := w.gitRun(nil, "cat-file", "-p", "HEAD:"+rel)
	if err != nil {
		return "", false
	}
	return out, true
}

// committedMany reads HEAD's content at many paths with one `git cat-file --batch`; a path
// HEAD lacks is absent from the map.
func (w *world) committedMany(paths []string) map[string]string {
	w.t.Helper()
	var in bytes.Buffer
	for _, p := range paths {
		in.WriteString("HEAD:" + p + "\n")
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir, cmd.Env, cmd.Stdin = w.repo, w.env, &in
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("git cat-file --batch: %v", err)
	}
	got := make(map[string]string, len(paths))
	r := bufio.NewReader(bytes.NewReader(out))
	for _, p := range paths {
		header, err := r.ReadString('\n')
		if err != nil {
			w.t.Fatalf("git cat-file --batch: short output at %s", p)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			continue // "<name> missing"
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			w.t.Fatalf("git cat-file --batch header %q", header)
		}
		body := make([]byte, size+1) // content and a newline
		if _, err := io.ReadFull(r, body); err != nil {
			w.t.Fatalf("git cat-file --batch: %v", err)
		}
		got[p] = string(body[:size])
	}
	return got
}

// commitsTouching lists the commits (newest first) whose diff names rel.
func (w *world) commitsTouching(rel string) []string {
	w.t.Helper()
	out := strings.TrimSpace(w.git("--literal-pathspecs", "log", "--format=%H", "--", rel))
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// namesInCommit lists the paths commit h changed against its first parent.
func (w *world) namesInCommit(h string) []string {
	w.t.Helper()
	out := w.git("-c", "core.quotepath=false", "show", "--format=", "--name-only", "--no-renames", h)
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			names = append(names, l)
		}
	}
	return names
}

// treeDiff is git's own answer to "does HEAD hold exactly what is on disk?": a throwaway
// index read from HEAD (no stat cache, so git hashes every file) and `git status` against
// it. Empty means every file's content, mode and symlink target on disk equals HEAD, and
// HEAD has nothing the disk lacks. It does not depend on memd's own .git/index.
func (w *world) treeDiff() (string, error) {
	idx := filepath.Join(w.home, fmt.Sprintf("probe-index-%d", time.Now().UnixNano()))
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if _, err := w.gitRun(env, "read-tree", "HEAD"); err != nil {
		return "", err
	}
	out, err := w.gitRun(env, "-c", "core.quotepath=false", "status", "--porcelain", "--untracked-files=all")
	return out, err
}

// waitFor polls cond until it holds or the deadline passes; describe says what was seen.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			msg := ""
			if describe != nil {
				msg = describe()
			}
			t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, msg)
		}
		time.Sleep(pollEvery)
	}
}

// waitCommitted waits until HEAD holds exactly the tree on disk.
func (w *world) waitCommitted(d *daemon) {
	w.t.Helper()
	var last string
	waitFor(w.t, "HEAD to equal the work tree", commitTimeout, func() bool {
		out, err := w.treeDiff()
		if err != nil {
			last = err.Error()
			return false
		}
		last = out
		return out == ""
	}, func() string { return "differences:\n" + last + d.describe() })
}

// waitHeadMoves waits until HEAD is no longer from.
func (w *world) waitHeadMoves(d *daemon, from string) string {
	w.t.Helper()
	var h string
	waitFor(w.t, "a new commit", commitTimeout, func() bool {
		h = w.head()
		return h != "" && h != from
	}, d.describe)
	return h
}

// checkClean is the invariant after every scenario: HEAD equals the disk (by git, not by
// memd's index), memd's .git/index has caught up (`git status --porcelain` empty), and the
// object store is sound (`git fsck --full`).
func (w *world) checkClean(d *daemon) {
	w.t.Helper()
	w.waitCommitted(d)
	var st string
	waitFor(w.t, "git status --porcelain to be empty", commitTimeout, func() bool {
		out, err := w.gitRun(nil, "status", "--porcelain", "--untracked-files=all")
		st = out
		if err != nil {
			st = err.Error()
		}
		return err == nil && out == ""
	}, func() string { return "git status:\n" + st + d.describe() })
	out, err := w.gitRun(nil, "fsck", "--full", "--no-dangling")
	if err != nil || strings.TrimSpace(out) != "" {
		w.t.Fatalf("git fsck --full: %v\n%s", err, out)
	}
}

// neverCommitted fails when any commit in history ever named rel.
func (w *world) neverCommitted(rel string) {
	w.t.Helper()
	if cs := w.commitsTouching(rel); len(cs) > 0 {
		w.t.Fatalf("%s was committed (%d commits), it must never be", rel, len(cs))
	}
}

// daemon is one `memd run` process.
type daemon struct {
	w    *world
	cmd  *exec.Cmd
	logs *testutil.LockedBuffer
	done chan struct{}
	code int
	addr string
}

var httpAddrRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// start runs `memd run` and waits until it says it is running (start-up reconcile done).
func (w *world) start(extra ...string) *daemon {
	w.t.Helper()
	d := w.spawn(extra...)
	waitFor(w.t, "memd run to start", startTimeout, func() bool {
		return d.hasExited() || strings.Contains(d.logs.String(), `msg="memd running"`)
	}, d.describe)
	if d.hasExited() {
		w.t.Fatalf("memd run exited with %d at start\n%s", d.code, d.logs.String())
	}
	if m := httpAddrRE.FindStringSubmatch(d.logs.String()); m != nil {
		d.addr = m[1]
	}
	return d
}

// spawn starts `memd run` without waiting for anything.
func (w *world) spawn(extra ...string) *daemon {
	w.t.Helper()
	args := append([]string{"run", "--config", w.config, "--repo", w.repo}, extra...)
	cmd := exec.Command(memdBin, args...)
	cmd.Env = w.env
	d := &daemon{w: w, cmd: cmd, logs: &testutil.LockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		d.code = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			d.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				d.code = 128 + int(ws.Signal())
			}
		} else if err != nil {
			d.code = -1
		}
		close(d.done)
	}()
	w.t.Cleanup(func() {
		if !d.hasExited() {
			_ = cmd.Process.Kill()
			<-d.done
		}
		if w.t.Failed() || os.Getenv("MEMD_E2E_LOGS") != "" {
			w.t.Logf("memd run (pid %d) log:\n%s", cmd.Process.Pid, d.logs.String())
		}
	})
	return d
}

func (d *daemon) hasExited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

func (d *daemon) describe() string {
	state := "running"
	if d.hasExited() {
		state = fmt.Sprintf("exited %d", d.code)
	}
	return fmt.Sprintf("\nmemd run (pid %d, %s) log:\n%s", d.pid(), state, d.logs.String())
}

// waitExit waits for the process to end and returns its exit code.
func (d *daemon) waitExit() int {
	d.w.t.Helper()
	select {
	case <-d.done:
		return d.code
	case <-time.After(exitTimeout):
		d.w.t.Fatalf("memd run did not exit within %s%s", exitTimeout, d.describe())
		return -1
	}
}

// stop sends SIGTERM and returns the exit code.
func (d *daemon) stop() int {
	d.w.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.w.t.Fatal(err)
	}
	return d.waitExit()
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *daemon) kill() {
	d.w.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	d.waitExit()
}

// waitLog waits until the daemon's log contains s.
func (d *daemon) waitLog(s string) {
	d.w.t.Helper()
	waitFor(d.w.t, "log line "+strconv.Quote(s), commitTimeout, func() bool {
		return strings.Contains(d.logs.String(), s)
	}, d.describe)
}

// get fetches a path from the daemon's HTTP server.
func (d *daemon) get(path string) (int, string) {
	d.w.t.Helper()
	if d.addr == "" {
		d.w.t.Fatalf("daemon has no http address%s", d.describe())
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + d.addr + path)
	if err != nil {
		d.w.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric reads one sample (name with its label set, as exposition text writes it) from
// /metrics; ok=false when absent.
func (d *daemon) metric(series string) (float64, bool) {
	d.w.t.Helper()
	_, body := d.get("/metrics")
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, series+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(l[len(series):]), 64)
			if err != nil {
				d.w.t.Fatalf("metric %s: %v", l, err)
			}
			return v, true
		}
	}
	return 0, false
}

// inotifyWatches counts the inotify watches a process holds (from /proc/<pid>/fdinfo), so a
// test can see that the watcher has taken in a new directory without guessing with a sleep.
func inotifyWatches(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		n += bytes.Count(b, []byte("inotify wd:"))
	}
	return n
}

// writerLock creates the writer lock the way the Python memory writer does (O_EXCL, pid of a
// live process, hostname, acquired_at) and returns its release.
func (w *world) writerLock() (release func()) {
	w.t.Helper()
	p := w.path(".memory.lock")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		w.t.Fatalf("take writer lock: %v", err)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(f, "pid: %d\nhostname: %s\nacquired_at: %s\ncontext: e2e writer\n",
		os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Close(); err != nil {
		w.t.Fatal(err)
	}
	return func() {
		if err := os.Remove(p); err != nil {
			w.t.Fatalf("release writer lock: %v", err)
		}
	}
}
