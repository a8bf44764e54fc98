// Package procgroup runs a user's command the one way memd runs any: argv without a shell,
// in a process group of its own, its output capped, and every descendant killed at the
// timeout, when the output passes the cap, and after the command exits (so a child it forked,
// even one that left the group with setsid, can neither hold memd up nor outlive it: on
// Linux a cgroup of the run's own, else a subreaper, tree_linux.go). The hooks and sleep's
// arc summarizer use it.
package procgroup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// WaitDelay bounds how long a command's exit waits for a child still holding its output open.
const WaitDelay = 2 * time.Second

// Sentinels of Run's error, for callers that report each in their own words.
var (
	ErrNoCommand      = errors.New("no command")
	ErrOutputTooLarge = errors.New("output over the cap")
	ErrTimeout        = errors.New("timed out")
)

// Options say how to run a command. Zero values: the caller's directory and environment,
// stdin /dev/null, no timeout beyond ctx, no cap.
type Options struct {
	Dir       string
	Env       []string
	Stdin     io.Reader
	Timeout   time.Duration
	MaxOutput int // bytes of stdout (and of stderr too when MergeStderr); 0 = no cap
	// MergeStderr sends stderr into the same capped buffer as stdout; otherwise stderr's
	// first StderrKeep bytes are kept apart (for an error message) and the rest dropped.
	MergeStderr bool
	StderrKeep  int
	// StderrTail keeps the last StderrTail bytes of stderr apart as well (a failed hook's
	// status names its last line), merged or not.
	StderrTail int
}

// Result is what a run printed and how it ended.
type Result struct {
	Output []byte // stdout (with stderr when MergeStderr), at most MaxOutput bytes
	Stderr []byte // the first StderrKeep bytes of stderr, unless MergeStderr
	Tail   []byte // the last StderrTail bytes of stderr
	// Err is nil for an exit 0 (even one whose child held the output open past WaitDelay),
	// else wraps ErrOutputTooLarge, ErrTimeout, the context's cause, or the exit error.
	Err error
}

// Run runs argv as Options say and waits for it and its whole process group to be gone.
func Run(ctx context.Context, argv []string, o Options) Result {
	if len(argv) == 0 || argv[0] == "" {
		return Result{Err: ErrNoCommand}
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	out := &capWriter{max: o.MaxOutput, cancel: stop}
	var stderr keepWriter
	stderr.max = o.StderrKeep
	tail := &tailWriter{max: o.StderrTail}
	build := func() (*exec.Cmd, *tree) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Dir, cmd.Env, cmd.Stdin = o.Dir, o.Env, o.Stdin
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		tr := newTree(cmd)
		cmd.Cancel = func() error { tr.kill(false); return killGroup(cmd) }
		cmd.WaitDelay = WaitDelay
		cmd.Stdout = out
		if o.MergeStderr {
			cmd.Stderr = out // one writer: exec serialises its writes
		} else {
			cmd.Stderr = &stderr
		}
		if o.StderrTail > 0 {
			// Two writers now (exec copies each on its own goroutine): capWriter locks.
			tail.next = cmd.Stderr
			cmd.Stderr = tail
		}
		return cmd, tr
	}
	cmd, tr := build()
	err := cmd.Start()
	if err != nil && tr.refused() {
		// The kernel would not start the command inside its cgroup (a cgroup made but not
		// ours to enter): from now on the subreaper, and this run once more.
		tr.close()
		cmd, tr = build()
		err = cmd.Start()
	}
	defer tr.close()
	if err == nil {
		err = cmd.Wait()
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited 0 but left a child holding its output open: the command succeeded, and
		// the child is killed below.
		err = nil
	}
	_ = killGroup(cmd) // whatever it left behind in its group goes with it
	tr.kill(true)      // and whatever left the group
	res := Result{Output: out.buf.Bytes(), Stderr: stderr.buf.Bytes(), Tail: tail.buf}
	switch {
	case out.over:
		res.Err = ErrOutputTooLarge
	case err == nil:
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.Err = ErrTimeout
	case ctx.Err() != nil:
		res.Err = context.Cause(ctx)
	default:
		res.Err = err
	}
	return res
}

// killGroup kills the process group the command leads (negative pid).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// capWriter keeps at most max bytes (0: no cap) and cancels the run when more arrive.
type capWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	max    int
	over   bool
	cancel context.CancelFunc
}

func (w *capWriter) Write(b []byte) (int, error) {
	w.mu.Lock() // stdout's copy and, through tailWriter, stderr's
	defer w.mu.Unlock()
	if w.over {
		return 0, ErrOutputTooLarge
	}
	if w.max > 0 && w.buf.Len()+len(b) > w.max {
		w.over = true
		w.buf.Write(b[:w.max-w.buf.Len()])
		w.cancel()
		return 0, ErrOutputTooLarge
	}
	return w.buf.Write(b)
}

// tailWriter keeps the last max bytes of what passes through it to next (exec's stderr
// goroutine alone writes it; Result reads it after Wait).
type tailWriter struct {
	buf  []byte
	max  int
	next io.Writer
}

func (w *tailWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return w.next.Write(b)
}

// keepWriter keeps the first max bytes and swallows the rest.
type keepWriter struct {
	buf bytes.Buffer
	max int
}

func (w *keepWriter) Write(b []byte) (int, error) {
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}
