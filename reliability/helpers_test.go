package reliability

import (
	"bufio"
	"bytes"
	"encoding/json"
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

const (
	startTimeout  = 30 * time.Second
	settleTimeout = 60 * time.Second
	exitTimeout   = 30 * time.Second
	pollEvery     = 25 * time.Millisecond
)

// fastConfig: quick debounce, an ephemeral loopback port, syncs kicked by every commit and a
// short pull interval, a short network timeout so a hung remote is noticed in seconds.
const fastConfig = `watch: {quiet: 150ms, max_delay: 1s}
http: {listen: "127.0.0.1:0"}
sync: {pull_interval: 1s, timeout: 3s}
`

// world is one isolated user: a HOME, a git config without identity, a config file, a
// memory repo and (optionally) a bare remote.
type world struct {
	t      testing.TB
	home   string
	repo   string
	bare   string // "" without a remote
	config string
	env    []string
}

type worldOpts struct {
	config string // the config file's text; "" = fastConfig
	remote bool   // a bare remote at <home>/remote.git, origin of the repo
	demo   bool   // memd init --demo
	noInit bool   // make no repo (hostile tests build their own)
}

func newWorld(t testing.TB, o worldOpts) *world {
	t.Helper()
	home := t.TempDir()
	w := &world{t: t, home: home, repo: filepath.Join(home, "memory"), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	must(t, os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n[init]\n\tdefaultBranch = main\n"), 0o600))
	cfg := o.config
	if cfg == "" {
		cfg = fastConfig
	}
	must(t, os.WriteFile(w.config, []byte(cfg), 0o600))
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
	if o.noInit {
		return w
	}
	args := []string{"init", "--config", w.config, w.repo}
	if o.remote {
		w.bare = filepath.Join(home, "remote.git")
		w.gitIn(home, "init", "-q", "--bare", "-b", "main", w.bare)
		// A push runs `git gc --auto` on the remote; detached, it would pack and prune loose
		// objects under a later `git fsck` and make it report objects missing.
		w.gitIn(w.bare, "config", "gc.autoDetach", "false")
		args = append(args, "--remote", w.bare)
	}
	if o.demo {
		args = append(args, "--demo")
	}
	if out, code := w.memd(args...); code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	return w
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memd runs a short memd command to completion (with a deadline: a hang is a failure).
func (w *world) memd(args ...string) (string, int) {
	w.t.Helper()
	return w.memdEnv(nil, 2*time.Minute, args...)
}

func (w *world) memdEnv(extraEnv []string, timeout time.Duration, args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(memdBin, args...)
	cmd.Env = append(append([]string(nil), w.env...), extraEnv...)
	cmd.Dir = w.home
	var out testutil.LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("memd %v: %v", args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		w.t.Fatalf("memd %v hung: no exit within %s\n%s", args, timeout, out.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return out.String(), 128 + int(ws.Signal())
		}
		return out.String(), ee.ExitCode()
	default:
		w.t.Fatalf("memd %v: %v", args, err)
		return "", -1
	}
}

func (w *world) path(rel string) string { return filepath.Join(w.repo, filepath.FromSlash(rel)) }

func (w *world) write(rel, content string) {
	w.t.Helper()
	p := w.path(rel)
	must(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(w.t, os.WriteFile(p, []byte(content), 0o644))
}

// gitIn runs git in dir and fails the test on error.
func (w *world) gitIn(dir string, args ...string) string {
	w.t.Helper()
	out, err := w.gitRun(dir, nil, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func (w *world) gitRun(dir string, extraEnv []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), w.env...), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.String(), nil
}

func (w *world) git(args ...string) string { w.t.Helper(); return w.gitIn(w.repo, args...) }

// rev is the commit a ref names in dir, "" when it does not exist.
func (w *world) rev(dir, ref string) string {
	out, err := w.gitRun(dir, nil, "rev-parse", "-q", "--verify", ref+"^{commit}")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

func (w *world) head() string       { return w.rev(w.repo, "HEAD") }
func (w *world) remoteHead() string { return w.rev(w.bare, "refs/heads/main") }

// isAncestor reports whether commit a is an ancestor of (or equal to) b in dir.
func (w *world) isAncestor(dir, a, b string) bool {
	_, err := w.gitRun(dir, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// treeDiff is git's answer to "does HEAD hold exactly the work tree?": a throwaway index
// read from HEAD and `git status` against it (independent of memd's own .git/index).
func (w *world) treeDiff() (string, error) {
	idx := filepath.Join(w.home, fmt.Sprintf("probe-index-%d", time.Now().UnixNano()))
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if _, err := w.gitRun(w.repo, env, "read-tree", "HEAD"); err != nil {
		return "", err
	}
	return w.gitRun(w.repo, env, "-c", "core.quotepath=false", "status", "--porcelain", "--untracked-files=all")
}

// blobs reads many "<rev>:<path>" objects in one `git cat-file --batch`; a missing one is
// absent from the map.
func (w *world) blobs(dir string, specs []string) map[string]string {
	w.t.Helper()
	out := map[string]string{}
	if len(specs) == 0 {
		return out
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir, cmd.Env = dir, w.env
	var in bytes.Buffer
	for _, s := range specs {
		in.WriteString(s + "\n")
	}
	cmd.Stdin = &in
	raw, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("git cat-file --batch in %s: %v", dir, err)
	}
	r := bufio.NewReader(bytes.NewReader(raw))
	for _, s := range specs {
		hdr, err := r.ReadString('\n')
		if err != nil {
			w.t.Fatalf("cat-file --batch: short output at %q", s)
		}
		f := strings.Fields(hdr)
		if len(f) == 2 && f[1] == "missing" || len(f) < 3 {
			continue
		}
		n, _ := strconv.Atoi(f[2])
		b := make([]byte, n+1)
		if _, err := io.ReadFull(r, b); err != nil {
			w.t.Fatalf("cat-file --batch: %v", err)
		}
		out[s] = string(b[:n])
	}
	return out
}

// fsck returns a problem text, "" when `git fsck --full` is clean.
func (w *world) fsck(dir string) string {
	out, err := w.gitRun(dir, nil, "fsck", "--full", "--no-dangling", "--no-progress")
	if err != nil {
		return err.Error()
	}
	if s := strings.TrimSpace(out); s != "" {
		return s
	}
	return ""
}

// conflictMarkers lists HEAD's files that hold a git conflict marker line.
func (w *world) conflictMarkers() []string {
	out, err := w.gitRun(w.repo, nil, "grep", "-I", "-l", "-E", "-e", "^(<<<<<<<|>>>>>>>) ", "HEAD")
	if err != nil || strings.TrimSpace(out) == "" {
		return nil // exit 1: no match
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// statusDoc is the part of status.json the tests read.
type statusDoc struct {
	State   string `json:"state"`
	Detail  string `json:"detail"`
	Error   string `json:"error"`
	Ahead   int    `json:"ahead"`
	PID     int    `json:"pid"`
	Summary struct {
		Text string `json:"text"`
	} `json:"summary"`
}

func (w *world) status() statusDoc {
	var d statusDoc
	b, err := os.ReadFile(filepath.Join(w.repo, ".git", "memd", "status.json"))
	if err == nil {
		_ = json.Unmarshal(b, &d)
	}
	return d
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	if !poll(timeout, cond) {
		msg := ""
		if describe != nil {
			msg = describe()
		}
		t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, msg)
	}
}

// poll is waitFor without failing: it reports whether cond came true in time.
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollEvery)
	}
	return true
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

// start runs `memd run` and waits until it says it is running.
func (w *world) start(extra ...string) *daemon {
	w.t.Helper()
	d := w.spawn(nil, extra...)
	d.waitRunning()
	return d
}

func (d *daemon) waitRunning() {
	d.w.t.Helper()
	waitFor(d.w.t, "memd run to start", startTimeout, func() bool {
		return d.hasExited() || strings.Contains(d.logs.String(), `msg="memd running"`)
	}, d.describe)
	if d.hasExited() {
		d.w.t.Fatalf("memd run exited with %d at start\n%s", d.code, d.logs.String())
	}
	if m := httpAddrRE.FindStringSubmatch(d.logs.String()); m != nil {
		d.addr = m[1]
	}
}

// spawn starts `memd run` without waiting.
func (w *world) spawn(extraEnv []string, extra ...string) *daemon {
	w.t.Helper()
	return w.spawnArgs(extraEnv, append([]string{"run", "--config", w.config, "--repo", w.repo}, extra...))
}

// spawnArgs starts any memd command as a killable process.
func (w *world) spawnArgs(extraEnv []string, args []string) *daemon {
	w.t.Helper()
	cmd := exec.Command(memdBin, args...)
	cmd.Env = append(append([]string(nil), w.env...), extraEnv...)
	cmd.Dir = w.home
	d := &daemon{w: w, cmd: cmd, logs: &testutil.LockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = d.logs, d.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
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
	logs := d.logs.String()
	if len(logs) > 20000 {
		logs = "…" + logs[len(logs)-20000:]
	}
	return fmt.Sprintf("\nmemd run (pid %d, %s) log:\n%s", d.pid(), state, logs)
}

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

// stop sends SIGTERM (commit what is pending, exit 0) and returns the exit code.
func (d *daemon) stop() int {
	d.w.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	return d.waitExit()
}

// kill is the crash: SIGKILL, then wait for the process to be gone.
func (d *daemon) kill() {
	d.w.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL)
	d.waitExit()
}

// get fetches a path from the daemon's HTTP server.
func (d *daemon) get(path string) (int, string, error) {
	if d.addr == "" {
		return 0, "", errors.New("daemon has no http address")
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + d.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// metric reads one unlabelled sample from /metrics.
func (d *daemon) metric(name string) (float64, bool) {
	_, body, err := d.get("/metrics")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(l[len(name):]), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// settled waits until HEAD equals the work tree and, with a remote, the remote's main is
// HEAD; it returns false (with what it saw) when that does not happen in time.
func (w *world) settled(timeout time.Duration) (bool, string) {
	var last string
	ok := poll(timeout, func() bool {
		diff, err := w.treeDiff()
		if err != nil {
			last = err.Error()
			return false
		}
		if diff != "" {
			last = "work tree differs from HEAD:\n" + diff
			return false
		}
		if w.bare != "" {
			h, r := w.head(), w.remoteHead()
			if h != r {
				last = fmt.Sprintf("HEAD %s, remote main %s", h, r)
				return false
			}
		}
		return true
	})
	return ok, last
}

// writeLockFile creates the writer lock exactly as the Python writer does: O_CREAT|O_EXCL,
// 0644, pid/hostname/acquired_at lines. It returns os.ErrExist when the lock is held.
func writeLockFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	_, err = fmt.Fprintf(f, "pid: %d\nhostname: %s\nacquired_at: %s\n", os.Getpid(), host,
		time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cp copies a directory tree with cp -a (a template repo per iteration).
func cp(t testing.TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", from, to, err, out)
	}
}
