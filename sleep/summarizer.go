package sleep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/memd-dev/memd"
)

// MaxSummaryBytes caps what a summarizer may print; more is a failure (the process is
// killed), so a runaway command cannot fill memory.
const MaxSummaryBytes = 64 << 10

// ErrSummaryTooLong is returned when the summarizer prints more than MaxSummaryBytes.
var ErrSummaryTooLong = errors.New("summarizer output over 64 KiB")

// summaryInput is the arc JSON the summarizer reads on stdin.
type summaryInput struct {
	Entity   string           `json:"entity"`
	Year     int              `json:"year"`
	Path     string           `json:"path"`
	Episodes []summaryEpisode `json:"episodes"`
}

type summaryEpisode struct {
	Path  string `json:"path"`
	Date  string `json:"date"`
	Title string `json:"title"`
	Gist  string `json:"gist"`
}

// capWriter keeps at most max bytes and cancels the command when more arrive.
type capWriter struct {
	buf    bytes.Buffer
	max    int
	over   bool
	cancel context.CancelFunc
}

func (w *capWriter) Write(b []byte) (int, error) {
	if w.over {
		return 0, ErrSummaryTooLong
	}
	if w.buf.Len()+len(b) > w.max {
		w.over = true
		w.cancel()
		return 0, ErrSummaryTooLong
	}
	return w.buf.Write(b)
}

// Summarize runs argv (no shell) with the arc as JSON on stdin and returns its stdout as
// plain text (RenderArc escapes it). The command runs in its own process group, and the
// whole group is killed at the timeout or when the output passes 64 KiB, so a command that
// forks a hanging child cannot hold sleep up.
func Summarize(ctx context.Context, argv []string, timeout time.Duration, a memd.Arc, arcPath string) (string, error) {
	if len(argv) == 0 {
		return "", errors.New("no summarizer command")
	}
	in := summaryInput{Entity: a.Entity, Year: a.Year, Path: arcPath}
	for _, e := range a.Episodes {
		in.Episodes = append(in.Episodes, summaryEpisode{Path: e.Path, Date: e.Date.Format("2006-01-02"), Title: e.Title, Gist: e.Gist})
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("summarizer input: %w", err)
	}
	if timeout <= 0 {
		timeout = 120 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		// Negative pid: the whole process group the command leads.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	// A grandchild holding stdout open must not keep Wait waiting.
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdin = bytes.NewReader(stdin)
	out := &capWriter{max: MaxSummaryBytes, cancel: cancel}
	var stderr bytes.Buffer
	cmd.Stdout = out
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 4096}
	err = cmd.Run()
	if cmd.Process != nil {
		// Reap anything the command left behind in its group.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case out.over:
		return "", fmt.Errorf("summarizer %s: %w", argv[0], ErrSummaryTooLong)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "", fmt.Errorf("summarizer %s: timed out after %s", argv[0], timeout)
	case err != nil:
		return "", fmt.Errorf("summarizer %s: %w (stderr: %s)", argv[0], err, strings.TrimSpace(stderr.String()))
	}
	text := strings.TrimSpace(out.buf.String())
	if !utf8.ValidString(text) {
		return "", fmt.Errorf("summarizer %s: output is not UTF-8", argv[0])
	}
	return text, nil
}

// limitedBuffer keeps the first max bytes and swallows the rest (stderr, for the message).
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(b []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		if len(b) > room {
			l.buf.Write(b[:room])
		} else {
			l.buf.Write(b)
		}
	}
	return len(b), nil
}
