package service

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// notifySocket listens on a real unixgram socket and sets NOTIFY_SOCKET to it, as systemd
// does for a Type=notify service.
type notifySocket struct {
	conn *net.UnixConn
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	// A short directory: sun_path holds 108 bytes and t.TempDir() paths can be long.
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return &notifySocket{conn: conn}
}

// next returns the next datagram, or fails the test at the deadline.
func (s *notifySocket) next(t *testing.T, within time.Duration) string {
	t.Helper()
	msg, ok := s.try(within)
	if !ok {
		t.Fatalf("no notify message within %s", within)
	}
	return msg
}

func (s *notifySocket) try(within time.Duration) (string, bool) {
	buf := make([]byte, 4096)
	_ = s.conn.SetReadDeadline(time.Now().Add(within))
	n, err := s.conn.Read(buf)
	if err != nil {
		return "", false
	}
	return string(buf[:n]), true
}

// waitFor reads messages until one satisfies match, skipping others (watchdog pings
// interleave with the rest).
func (s *notifySocket) waitFor(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if msg, ok := s.try(time.Until(deadline)); ok && match(msg) {
			return msg
		}
	}
	t.Fatalf("no %s message within 5s", what)
	return ""
}

func is(want string) func(string) bool { return func(s string) bool { return s == want } }

func TestNotifierStates(t *testing.T) {
	sock := listenNotify(t)
	n := NewNotifier(nil)
	if !n.Enabled() {
		t.Fatal("not enabled with NOTIFY_SOCKET set")
	}
	n.Ready()
	if got := sock.next(t, 5*time.Second); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	n.Reloading()
	got := sock.next(t, 5*time.Second)
	lines := strings.Split(got, "\n")
	if lines[0] != "RELOADING=1" {
		t.Fatalf("got %q, want RELOADING=1 first", got)
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
		t.Fatalf("reloading message %q lacks MONOTONIC_USEC", got)
	}
	if us, err := strconv.ParseInt(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64); err != nil || us <= 0 {
		t.Fatalf("bad MONOTONIC_USEC in %q", got)
	}
	n.Ready()
	if got := sock.next(t, 5*time.Second); got != "READY=1" {
		t.Fatalf("after reload got %q, want READY=1", got)
	}
	// An unchanged status is sent once.
	n.Status("memd: ok")
	n.Status("memd: ok")
	n.Status("memd: +2\n~1")
	n.Stopping()
	for _, want := range []string{"STATUS=memd: ok", "STATUS=memd: +2 ~1", "STOPPING=1"} {
		if got := sock.next(t, 5*time.Second); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

func TestWatchdogPingsOnlyWhileAlive(t *testing.T) {
	sock := listenNotify(t)
	t.Setenv("WATCHDOG_USEC", "200000") // 200ms: pings every 100ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	var alive atomic.Bool
	alive.Store(true)
	var falseCalls atomic.Int64
	check := func() bool {
		ok := alive.Load()
		if !ok {
			falseCalls.Add(1)
		}
		return ok
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); NewNotifier(nil).RunWatchdog(ctx, check) }()

	for i := 0; i < 3; i++ {
		if got := sock.next(t, 5*time.Second); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: got %q", i, got)
		}
	}

	// Not alive: once alive() has said so, pings sent before are in the socket buffer
	// (sends are synchronous); drain them, then let three more checks pass and expect
	// nothing new.
	alive.Store(false)
	testutil.WaitFor(t, "alive() to be asked", 5*time.Second, func() bool { return falseCalls.Load() >= 1 }, nil)
	for {
		if _, ok := sock.try(20 * time.Millisecond); !ok {
			break
		}
	}
	base := falseCalls.Load()
	testutil.WaitFor(t, "three more checks", 5*time.Second, func() bool { return falseCalls.Load() >= base+3 }, nil)
	if msg, ok := sock.try(20 * time.Millisecond); ok {
		t.Fatalf("got %q while not alive", msg)
	}

	alive.Store(true)
	if got := sock.waitFor(t, "WATCHDOG", is("WATCHDOG=1")); got != "WATCHDOG=1" {
		t.Fatal(got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunWatchdog did not return after cancel")
	}
}

// Without systemd, or with a watchdog meant for another process, RunWatchdog returns at
// once and nothing is sent.
func TestWatchdogOff(t *testing.T) {
	returns := func(n *Notifier) bool {
		done := make(chan struct{})
		go func() { defer close(done); n.RunWatchdog(context.Background(), func() bool { return true }) }()
		select {
		case <-done:
			return true
		case <-time.After(5 * time.Second):
			return false
		}
	}
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "200000")
	n := NewNotifier(nil)
	if n.Enabled() || !returns(n) {
		t.Fatal("watchdog ran without NOTIFY_SOCKET")
	}
	n.Ready() // no-op, no panic
	var nilN *Notifier
	nilN.Ready()
	nilN.Status("x")
	if !returns(nilN) {
		t.Fatal("nil notifier watchdog did not return")
	}

	sock := listenNotify(t)
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
	if !returns(NewNotifier(nil)) {
		t.Fatal("watchdog ran for another pid")
	}
	t.Setenv("WATCHDOG_PID", "")
	t.Setenv("WATCHDOG_USEC", "")
	if !returns(NewNotifier(nil)) {
		t.Fatal("watchdog ran without WATCHDOG_USEC")
	}
	if msg, ok := sock.try(50 * time.Millisecond); ok {
		t.Fatalf("sent %q with the watchdog off", msg)
	}
}

// A socket that is gone is logged once, not once per ping, and again when it works.
func TestNotifierLogsFailureOnce(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "notify")
	t.Setenv("NOTIFY_SOCKET", path)
	var mu sync.Mutex
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
	n := NewNotifier(log)
	for i := 0; i < 5; i++ {
		n.Ready()
	}
	mu.Lock()
	if c := strings.Count(buf.String(), "sd_notify failed"); c != 1 {
		t.Fatalf("%d failure lines:\n%s", c, buf.String())
	}
	mu.Unlock()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n.Ready()
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "sd_notify works again") {
		t.Fatalf("no recovery line:\n%s", buf.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
