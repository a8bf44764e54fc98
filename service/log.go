package service

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
)

// ParseLevel reads a config log level (debug, info, warn, error; case-insensitive, as slog
// spells them). Anything else is info: the config was validated before it got here, and a
// logger must never fail to exist.
func ParseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return slog.LevelInfo
	}
	return l
}

// NewLevelVar returns a level variable set to level. A logger built on it changes level when
// the variable is Set, which is how SIGHUP applies a new log.level without a new logger.
func NewLevelVar(level string) *slog.LevelVar {
	v := new(slog.LevelVar)
	v.Set(ParseLevel(level))
	return v
}

// NewLogger builds memd's logger writing to w. Under journald (see UnderJournald) it writes
// one plain line per record with a syslog priority prefix ("<6>committed 3 files path=…")
// and no timestamp, since the journal stamps and levels lines itself. Otherwise format
// "json" gives slog JSON and anything else slog text. level may be a *slog.LevelVar to be
// changed later; nil means info.
func NewLogger(w io.Writer, level slog.Leveler, format string) *slog.Logger {
	if w == nil {
		w = io.Discard
	}
	if level == nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	switch {
	case UnderJournald(w):
		return slog.New(newJournalHandler(w, level))
	case format == "json":
		return slog.New(slog.NewJSONHandler(w, opts))
	default:
		return slog.New(slog.NewTextHandler(w, opts))
	}
}

// UnderJournald reports whether w is connected to the systemd journal. systemd sets
// JOURNAL_STREAM=<dev>:<inode> for a service whose stdout/stderr is the journal. When w is
// an *os.File the pair must match it: a shell started from such a service inherits the
// variable while its stderr is a terminal. Any other writer trusts the variable alone.
func UnderJournald(w io.Writer) bool {
	js := os.Getenv("JOURNAL_STREAM")
	if js == "" {
		return false
	}
	f, ok := w.(*os.File)
	if !ok {
		return true
	}
	dev, ino, ok := fileDevIno(f)
	if !ok {
		return true
	}
	want := strings.SplitN(js, ":", 2)
	if len(want) != 2 {
		return false
	}
	return want[0] == strconv.FormatUint(dev, 10) && want[1] == strconv.FormatUint(ino, 10)
}

// JournalPriority maps a slog level to the syslog priority journald reads from a "<N>"
// line prefix (sd-daemon(3)): debug 7, info 6, warn 4, error 3.
func JournalPriority(l slog.Level) int {
	switch {
	case l < slog.LevelInfo:
		return 7
	case l < slog.LevelWarn:
		return 6
	case l < slog.LevelError:
		return 4
	default:
		return 3
	}
}

// journalHandler formats attributes with slog's text handler (so quoting and groups are
// slog's own) into a shared buffer, then writes "<N>message attrs\n" in one Write.
type journalHandler struct {
	inner slog.Handler
	level slog.Leveler
	out   *journalOut
}

type journalOut struct {
	mu   sync.Mutex
	w    io.Writer
	buf  bytes.Buffer // the inner handler's output
	line bytes.Buffer // the line written; reused under mu
}

// bufWriter lets the inner text handler write into the shared buffer; it is only called
// while out.mu is held by Handle.
type bufWriter struct{ out *journalOut }

func (b bufWriter) Write(p []byte) (int, error) { return b.out.buf.Write(p) }

func newJournalHandler(w io.Writer, level slog.Leveler) *journalHandler {
	out := &journalOut{w: w}
	inner := slog.NewTextHandler(bufWriter{out}, &slog.HandlerOptions{
		Level: slog.LevelDebug, // the outer handler filters
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 {
				switch a.Key {
				case slog.TimeKey, slog.LevelKey, slog.MessageKey:
					return slog.Attr{}
				}
			}
			return a
		},
	})
	return &journalHandler{inner: inner, level: level, out: out}
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	attrs := bytes.TrimRight(h.out.buf.Bytes(), "\n")
	line := &h.out.line
	line.Reset()
	line.WriteByte('<')
	line.WriteString(strconv.Itoa(int(JournalPriority(r.Level))))
	line.WriteByte('>')
	// journald splits the stream at newlines: a message with one would lose its priority on
	// the second line, so newlines are written as the two characters \n.
	line.WriteString(strings.ReplaceAll(r.Message, "\n", `\n`))
	if len(attrs) > 0 {
		line.WriteByte(' ')
		line.Write(attrs)
	}
	line.WriteByte('\n')
	_, err := h.out.w.Write(line.Bytes())
	return err
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &journalHandler{inner: h.inner.WithAttrs(as), level: h.level, out: h.out}
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	return &journalHandler{inner: h.inner.WithGroup(name), level: h.level, out: h.out}
}
