package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// DefaultStartTimeout and DefaultExitTimeout are the deadlines Options without its own use
// for `memd run` to say it is running and for a signalled process to end.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultExitTimeout  = 30 * time.Second
)

// describeTail is how much of a process's output Describe quotes: failure messages stay
// readable after a long run (LogOnFailure can add the whole output).
const describeTail = 20000

// Options says how to run a memd process.
type Options struct {
	Env []string // its whole environment (IsolatedEnv); required, so no test hands it its own
	Dir string   // its working directory; "" = the test's

	StartTimeout time.Duration // WaitRunning's deadline; 0 = DefaultStartTimeout
	ExitTimeout  time.Duration // WaitExit's deadline; 0 = DefaultExitTimeout

	// LogOnFailure logs the process's whole output at cleanup when the test has failed;
	// LogAlways logs it at cleanup whatever the outcome.
	LogOnFailure, LogAlways bool
}

// Daemon is one memd process (usually `memd run`) started by a test, with its stdout and
// stderr captured. It is killed at the test's cleanup if it is still running.
type Daemon struct {
	t    testing.TB
	name string // "memd run", for messages
	cmd  *exec.Cmd
	logs LockedBuffer
	done chan struct{} // closed once the process has been waited for
	code int           // exit code, 128+signal when killed by one; valid after done
	addr string        // its HTTP listener, from the log, after WaitRunning
	opts Options
}

// Spawn starts bin with args and returns without waiting for anything.
func Spawn(t testing.TB, bin string, o Options, args ...string) *Daemon {
	t.Helper()
	if o.Env == nil {
		t.Fatal("testutil.Spawn: no Env (a nil one would hand memd the test's own HOME and git config)")
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.ExitTimeout == 0 {
		o.ExitTimeout = DefaultExitTimeout
	}
	name := "memd"
	if len(args) > 0 {
		name += " " + args[0]
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = o.Env, o.Dir
	d := &Daemon{t: t, name: name, cmd: cmd, done: make(chan struct{}), opts: o}
	cmd.Stdout, cmd.Stderr = &d.logs, &d.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		d.code = exitCode(cmd.Wait())
		close(d.done)
	}()
	t.Cleanup(func() {
		if !d.HasExited() {
			_ = cmd.Process.Kill()
			<-d.done
		}
		if o.LogAlways || o.LogOnFailure && t.Failed() {
			t.Logf("%s (pid %d) log:\n%s", name, d.PID(), d.logs.String())
		}
	})
	return d
}

// Start is Spawn and WaitRunning: `memd run` has finished its start-up reconcile.
func Start(t testing.TB, bin string, o Options, args ...string) *Daemon {
	t.Helper()
	d := Spawn(t, bin, o, args...)
	d.WaitRunning()
	return d
}

var httpAddrRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// WaitRunning waits until `memd run` logs that it is running and that its start-up
// reconcile is done (READY comes before that reconcile, the loop's first job), and takes its
// HTTP address from the log. It fails the test if the process exits first.
func (d *Daemon) WaitRunning() {
	d.t.Helper()
	WaitFor(d.t, d.name+" to start", d.opts.StartTimeout, func() bool {
		l := d.logs.String()
		return d.HasExited() || strings.Contains(l, `msg="memd running"`) && strings.Contains(l, `msg="start-up reconcile done"`)
	}, d.Describe)
	if d.HasExited() {
		d.t.Fatalf("%s exited with %d at start\n%s", d.name, d.code, d.logs.String())
	}
	if m := httpAddrRE.FindStringSubmatch(d.logs.String()); m != nil {
		d.addr = m[1]
	}
}

// HasExited reports whether the process has ended (and been waited for).
func (d *Daemon) HasExited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// PID is the process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Addr is the daemon's HTTP address (host:port, known after WaitRunning; "" without one).
func (d *Daemon) Addr() string { return d.addr }

// Logs is everything the process has written to stdout and stderr so far.
func (d *Daemon) Logs() string { return d.logs.String() }

// Describe is a failure message's account of the process: pid, running or its exit code,
// and the last part of its output. It starts with a newline, to follow a message.
func (d *Daemon) Describe() string {
	state := "running"
	if d.HasExited() {
		state = fmt.Sprintf("exited %d", d.code)
	}
	logs := d.logs.String()
	if len(logs) > describeTail {
		logs = "…" + logs[len(logs)-describeTail:]
	}
	return fmt.Sprintf("\n%s (pid %d, %s) log:\n%s", d.name, d.PID(), state, logs)
}

// WaitExit waits for the process to end and returns its exit code (128+n for signal n).
func (d *Daemon) WaitExit() int {
	d.t.Helper()
	select {
	case <-d.done:
		return d.code
	case <-time.After(d.opts.ExitTimeout):
		d.t.Fatalf("%s did not exit within %s%s", d.name, d.opts.ExitTimeout, d.Describe())
		return -1
	}
}

// Stop sends SIGTERM (memd commits what is pending and exits 0) and returns the exit code.
// A process that had already ended fails the test: nobody asked it to.
func (d *Daemon) Stop() int {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		d.t.Fatalf("SIGTERM %s: %v%s", d.name, err, d.Describe())
	}
	return d.WaitExit()
}

// Kill is the crash: SIGKILL, then wait for the process to be gone. It returns the exit
// code, 128+9 unless the process had ended on its own before.
func (d *Daemon) Kill() int {
	d.t.Helper()
	_ = d.cmd.Process.Signal(syscall.SIGKILL) // it may have ended already: the code says so
	return d.WaitExit()
}

// Signal sends sig (SIGSTOP, SIGCONT…) and does not wait.
func (d *Daemon) Signal(sig os.Signal) error { return d.cmd.Process.Signal(sig) }

// Get fetches path from the daemon's HTTP server (known after WaitRunning) and returns the
// status code and body.
func (d *Daemon) Get(path string) (int, string, error) {
	if d.addr == "" {
		return 0, "", fmt.Errorf("GET %s: %s has no http address (no http listening line in its log)", path, d.name)
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + d.addr + path)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, string(b), fmt.Errorf("GET %s: reading the body: %w", path, err)
	}
	return resp.StatusCode, string(b), nil
}

// Metric reads one sample from /metrics: series is the name with its label set as the
// exposition text writes it (`memd_commits_total{kind="change"}`); ok=false when the
// series is absent. A /metrics that cannot be fetched or a sample that does not parse
// fails the test: a broken endpoint is not an absent series.
func (d *Daemon) Metric(series string) (v float64, ok bool) {
	d.t.Helper()
	v, ok = d.Metrics(series)[series]
	return v, ok
}

// Metrics reads several series from one GET of /metrics, as Metric does one; a series
// that is absent is absent from the map.
func (d *Daemon) Metrics(series ...string) map[string]float64 {
	d.t.Helper()
	code, body, err := d.Get("/metrics")
	if err != nil || code != http.StatusOK {
		d.t.Fatalf("/metrics: %d %v%s", code, err, d.Describe())
	}
	out := make(map[string]float64, len(series))
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		l := sc.Text()
		for _, name := range series {
			if strings.HasPrefix(l, name+" ") {
				v, err := strconv.ParseFloat(strings.TrimSpace(l[len(name):]), 64)
				if err != nil {
					d.t.Fatalf("metric %s: %v", l, err)
				}
				out[name] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		d.t.Fatalf("/metrics: %v", err)
	}
	return out
}

// Run runs a short memd command (Env and Dir from o) to completion and returns its combined
// output and exit code. A command still running after timeout is killed and fails the test: a hang is a
// failure, not a slow pass.
func Run(t testing.TB, bin string, o Options, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	if o.Env == nil {
		t.Fatal("testutil.Run: no Env (a nil one would hand memd the test's own HOME and git config)")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = o.Env, o.Dir
	var out LockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("memd %v: %v", args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("memd %v hung: no exit within %s\n%s", args, timeout, out.String())
	}
	code := exitCode(err)
	if code == -1 {
		t.Fatalf("memd %v: %v", args, err)
	}
	return out.String(), code
}

// exitCode is a waited-for process's exit code: 128+n when signal n ended it (as a shell
// reports it), -1 when err is not about how the process ended.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
