package writerlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// logRecorder is a slog handler that keeps every message with its attributes.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	h.mu.Lock()
	h.msgs = append(h.msgs, s)
	h.mu.Unlock()
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }
func (h *logRecorder) find(sub string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.msgs {
		if strings.Contains(m, sub) {
			return m
		}
	}
	return ""
}

// pyLock is a running testdata/lock/pylock.py process.
type pyLock struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startPyLock(t *testing.T, args ...string) *pyLock {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	cmd := exec.Command(py, append([]string{"testdata/lock/pylock.py"}, args...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pyLock{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// expect waits for the script's next output line and checks its prefix.
func (p *pyLock) expect(t *testing.T, prefix string) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok || !strings.HasPrefix(l, prefix) {
			t.Fatalf("python lock: got %q (open=%v), want %q", l, ok, prefix)
		}
		return l
	case <-time.After(20 * time.Second):
		t.Fatalf("python lock: no %q line within 20s", prefix)
	}
	return ""
}

func TestLockPythonHoldsMemdWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".memory.lock")
	py := startPyLock(t, path, "hold")
	line := py.expect(t, "acquired ")
	pyPID, _ := strconv.Atoi(strings.TrimPrefix(line, "acquired "))
	info, err := ReadInfo(path)
	if err != nil || info.PID != pyPID || info.Context != "pylock.hold" || info.Hostname != lockHostname() {
		t.Fatalf("python's lock info: %+v %v", info, err)
	}
	if IsStale(info) {
		t.Fatal("a live python holder judged stale")
	}

	rec := &logRecorder{}
	type result struct {
		lk  *Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		lk, err := Acquire(context.Background(), path, Options{Timeout: 20 * time.Second, Logger: slog.New(rec), Context: "memd test"})
		done <- result{lk, err}
	}()
	testutil.WaitFor(t, "memd to report it is waiting", 20*time.Second, func() bool { return rec.find("writer lock held, waiting") != "" }, nil)
	if m := rec.find("waiting"); !strings.Contains(m, fmt.Sprintf("pid %d", pyPID)) || !strings.Contains(m, "pylock.hold") {
		t.Errorf("waiting log does not name the holder: %s", m)
	}
	select {
	case r := <-done:
		t.Fatalf("memd got the lock while python held it: %+v", r)
	default:
	}
	if _, err := io.WriteString(py.stdin, "release\n"); err != nil {
		t.Fatal(err)
	}
	py.expect(t, "released")
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("memd did not get the lock after python released it")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	info, err = ReadInfo(path)
	if err != nil || info.PID != os.Getpid() || info.Context != "memd test" {
		t.Errorf("memd's lock info: %+v %v", info, err)
	}
	if err := r.lk.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file left after release: %v", err)
	}
}

func TestLockMemdHoldsPythonWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".memory.lock")
	lk, err := Acquire(context.Background(), path, Options{Context: "sleep(expire)"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{fmt.Sprintf("pid: %d\n", os.Getpid()), "hostname: " + lockHostname() + "\n", "acquired_at: ", "context: sleep(expire)\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("lock file %q lacks %q", data, want)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm()&^0o022 != 0o644&^0o022 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	py := startPyLock(t, path, "hold", "0.01")
	py.expect(t, "waiting")
	if info, _ := ReadInfo(path); info.PID != os.Getpid() {
		t.Fatalf("python took memd's lock: %+v", info)
	}
	if err := lk.Release(); err != nil {
		t.Fatal(err)
	}
	line := py.expect(t, "acquired ")
	if info, err := ReadInfo(path); err != nil || strconv.Itoa(info.PID) != strings.TrimPrefix(line, "acquired ") {
		t.Errorf("python's lock: %+v %v", info, err)
	}
	_, _ = io.WriteString(py.stdin, "\n")
	py.expect(t, "released")
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func writeLockFile(t *testing.T, path string, info Info) {
	t.Helper()
	if err := os.WriteFile(path, formatLockInfo(info), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLockStaleTakeover(t *testing.T) {
	dir := t.TempDir()
	for name, pid := range map[string]int{"dead pid": deadPID(t), "own pid, not held": os.Getpid()} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".lock")
			old := Info{PID: pid, Hostname: lockHostname(), AcquiredAt: "2026-11-29T03:00:00Z", Context: "crashed writer"}
			writeLockFile(t, path, old)
			if pid != os.Getpid() && !IsStale(old) {
				t.Fatal("dead pid not stale")
			}
			rec := &logRecorder{}
			lk, err := Acquire(context.Background(), path, Options{Timeout: 5 * time.Second, Logger: slog.New(rec)})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lk.Release() }()
			m := rec.find("took over stale writer lock")
			if m == "" || !strings.Contains(m, fmt.Sprintf("pid %d", pid)) || !strings.Contains(m, "crashed writer") {
				t.Errorf("take-over log: %q", m)
			}
			if info, _ := ReadInfo(path); info.PID != os.Getpid() || info.Context != "" {
				t.Errorf("lock after take-over: %+v", info)
			}
			if left, _ := filepath.Glob(path + ".stale-*"); len(left) != 0 {
				t.Errorf("aside files left: %v", left)
			}
		})
	}
}

func TestLockTimeoutNamesHolder(t *testing.T) {
	dir := t.TempDir()
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	cases := []struct {
		name string
		info Info
	}{
		{"live pid here", Info{PID: sleeper.Process.Pid, Hostname: lockHostname(), AcquiredAt: "2026-11-30T08:00:00.123456+00:00", Context: "memory_writer.write"}},
		{"dead pid elsewhere", Info{PID: deadPID(t), Hostname: "other-host.example", AcquiredAt: "2026-11-30T07:00:00Z", Context: "index.append"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".lock")
			writeLockFile(t, path, c.info)
			start := time.Now()
			lk, err := Acquire(context.Background(), path, Options{Timeout: 150 * time.Millisecond, Poll: 10 * time.Millisecond})
			if err == nil {
				_ = lk.Release()
				t.Fatal("acquired a held lock")
			}
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("error %v does not wrap ErrTimeout", err)
			}
			if time.Since(start) < 150*time.Millisecond {
				t.Errorf("gave up before the timeout: %v", time.Since(start))
			}
			for _, want := range []string{path, fmt.Sprintf("pid %d", c.info.PID), fmt.Sprintf("%q", c.info.Hostname), c.info.AcquiredAt, c.info.Context, "remove the file"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if info, _ := ReadInfo(path); info != c.info {
				t.Errorf("held lock changed: %+v", info)
			}
		})
	}
}

func TestLockUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".memory.lock")
	if err := os.WriteFile(path, []byte("garbage\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInfo(path); !errors.Is(err, ErrUnparseable) {
		t.Errorf("ReadInfo: %v", err)
	}
	_, err := Acquire(context.Background(), path, Options{Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "unreadable lock file") || !strings.Contains(err.Error(), `garbage\x00`) {
		t.Fatalf("young unreadable lock: %v", err)
	}
	old := time.Now().Add(-LockUnreadableStaleAfter - time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	lk, err := Acquire(context.Background(), path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("old unreadable lock not taken over: %v", err)
	}
	if err := lk.Release(); err != nil {
		t.Fatal(err)
	}
	// The injected clock ages it too.
	_ = os.WriteFile(path, nil, 0o644)
	lk, err = Acquire(context.Background(), path, Options{Timeout: time.Second, Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		t.Fatalf("empty lock aged by the clock: %v", err)
	}
	if info := lk.Info(); !strings.HasPrefix(info.AcquiredAt, time.Now().Add(time.Hour).UTC().Format("2006-01-02T15")) {
		t.Errorf("acquired_at %q does not use the clock", info.AcquiredAt)
	}
	_ = lk.Release()
}

func TestLockReentrantAndRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".memory.lock")
	a, err := Acquire(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Relative path to the same file: the same hold.
	wd, _ := os.Getwd()
	rel, _ := filepath.Rel(wd, path)
	b, err := Acquire(context.Background(), rel, Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("re-entrant acquire: %v", err)
	}
	if err := b.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("inner release removed the file: %v", err)
	}
	if err := b.Release(); !errors.Is(err, ErrReleased) {
		t.Errorf("double release: %v", err)
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file left: %v", err)
	}

	// Another writer took it over meanwhile: release leaves its file alone.
	c, err := Acquire(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	other := Info{PID: 1, Hostname: "h2", AcquiredAt: "2026-11-30T09:00:00Z", Context: "other"}
	writeLockFile(t, path, other)
	if err := c.Release(); !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "pid 1") {
		t.Errorf("release of a lost lock: %v", err)
	}
	if info, _ := ReadInfo(path); info != other {
		t.Error("release removed another writer's lock")
	}
	_ = os.Remove(path)

	// WithLock and a cancelled wait.
	if err := WithLock(context.Background(), path, Options{}, func() error {
		if _, err := os.Stat(path); err != nil {
			return err
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	writeLockFile(t, path, Info{PID: 1, Hostname: "h2", AcquiredAt: "x"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Acquire(ctx, path, Options{Timeout: 10 * time.Second}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v", err)
	}
	// A directory that does not exist is an error naming the path, not a wait.
	missing := filepath.Join(t.TempDir(), "no", ".memory.lock")
	if _, err := Acquire(context.Background(), missing, Options{Timeout: 10 * time.Second}); err == nil || errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing dir: %v", err)
	}
}

// TestLockMutualExclusionAcrossProcesses: two memd processes and two Python writers
// increment one counter under the lock; no two are ever inside at once (an O_EXCL marker
// proves it) and no increment is lost.
func TestLockMutualExclusionAcrossProcesses(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, ".memory.lock")
	counter := filepath.Join(dir, "counter")
	if err := os.WriteFile(counter, []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 15
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MEMD_LOCK_HELPER=1", "MEMD_LOCK_PATH="+path, "MEMD_LOCK_COUNTER="+counter, "MEMD_LOCK_N="+strconv.Itoa(n))
		cmds = append(cmds, cmd)
		cmd = exec.Command("python3", "testdata/lock/pylock.py", path, "count", strconv.Itoa(n), counter, "0.005")
		cmds = append(cmds, cmd)
	}
	outs := make([][]byte, len(cmds))
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		wg.Go(func() { outs[i], errs[i] = c.CombinedOutput() })
	}
	wg.Wait()
	for i := range cmds {
		if errs[i] != nil {
			t.Errorf("%v: %v\n%s", cmds[i].Args, errs[i], outs[i])
		}
	}
	got, _ := os.ReadFile(counter)
	if string(got) != strconv.Itoa(4*n) {
		t.Errorf("counter %s, want %d: an increment was lost", got, 4*n)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file left: %v", err)
	}
}

// TestLockHelperProcess is the memd side of TestLockMutualExclusionAcrossProcesses.
func TestLockHelperProcess(t *testing.T) {
	if os.Getenv("MEMD_LOCK_HELPER") != "1" {
		t.Skip("helper process only")
	}
	path, counter := os.Getenv("MEMD_LOCK_PATH"), os.Getenv("MEMD_LOCK_COUNTER")
	n, _ := strconv.Atoi(os.Getenv("MEMD_LOCK_N"))
	for range n {
		lk, err := Acquire(context.Background(), path, Options{Timeout: 30 * time.Second, Poll: 5 * time.Millisecond, Context: "helper"})
		if err != nil {
			t.Fatal(err)
		}
		marker, err := os.OpenFile(counter+".inside", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatalf("overlap: another writer is inside: %v", err)
		}
		_ = marker.Close()
		data, err := os.ReadFile(counter)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		if err := os.WriteFile(counter, []byte(strconv.Itoa(v+1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(counter + ".inside"); err != nil {
			t.Fatal(err)
		}
		if err := lk.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkLockAcquireRelease: one uncontended take and give back of the writer lock (a
// create, a write, a read-back and a remove), the cost every owner job pays.
func BenchmarkLockAcquireRelease(b *testing.B) {
	path := filepath.Join(b.TempDir(), ".memory.lock")
	ctx := context.Background()
	for b.Loop() {
		lk, err := Acquire(ctx, path, Options{Context: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

// An empty lock is a writer killed between create and write: held while it is young (the
// writer may be about to write), taken over after LockEmptyStaleAfter, long before the
// ten minutes an unreadable one waits. memd's own locks are never empty (created by link).
func TestLockEmptyFileStaleSooner(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".memory.lock")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Acquire(context.Background(), path, Options{Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("young empty lock: %v", err)
	}
	later := func() time.Time { return time.Now().Add(LockEmptyStaleAfter + time.Second) }
	lk, err := Acquire(context.Background(), path, Options{Timeout: time.Second, Now: later})
	if err != nil {
		t.Fatalf("empty lock older than %s not taken over: %v", LockEmptyStaleAfter, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), fmt.Sprintf("pid: %d", os.Getpid())) {
		t.Fatalf("lock content %q", data)
	}
	if err := lk.Release(); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(path + ".*.tmp"); len(m) != 0 {
		t.Fatalf("temp files left: %v", m)
	}
	// A temp file of a killed acquirer (its pid is gone) is swept by the next acquire; one
	// of a live process is left alone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadTmp := fmt.Sprintf("%s.%d.tmp", path, dead.Process.Pid)
	liveTmp := fmt.Sprintf("%s.%d.tmp", path, os.Getppid())
	for _, p := range []string{deadTmp, liveTmp} {
		if err := os.WriteFile(p, []byte("pid: 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lk, err = Acquire(context.Background(), path, Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = lk.Release()
	if _, err := os.Stat(deadTmp); !os.IsNotExist(err) {
		t.Errorf("dead acquirer's temp file not swept: %v", err)
	}
	if _, err := os.Stat(liveTmp); err != nil {
		t.Errorf("live process's temp file removed: %v", err)
	}
}

// A holder in another PID namespace with our hostname (a container, `unshare --pid`) is
// never taken over by a pid probe: its pid names another process here, or none. A lock
// without a pid_ns line (the Python writer's) is probed as before.
func TestLockOtherPIDNamespaceNotStale(t *testing.T) {
	if lockPIDNamespace() == "" {
		t.Skip("no /proc/self/ns/pid here")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, ".memory.lock")
	other := Info{PID: deadPID(t), Hostname: lockHostname(), AcquiredAt: "2026-11-29T03:00:00Z", Context: "container writer", PIDNamespace: "4026500001"}
	writeLockFile(t, path, other)
	if got, err := ReadInfo(path); err != nil || got.PIDNamespace != other.PIDNamespace {
		t.Fatalf("pid_ns line not read back: %+v %v", got, err)
	}
	if IsStale(other) {
		t.Fatal("a holder in another PID namespace judged stale by a pid probe")
	}
	_, err := Acquire(context.Background(), path, Options{Timeout: 150 * time.Millisecond, Poll: 10 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "PID namespace 4026500001") {
		t.Fatalf("lock of another PID namespace: %v", err)
	}
	// Our own pid in another namespace is another process, not a leftover of ours.
	other.PID = os.Getpid()
	writeLockFile(t, path, other)
	if _, err := Acquire(context.Background(), path, Options{Timeout: 100 * time.Millisecond, Poll: 10 * time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("our pid in another namespace taken over: %v", err)
	}
	// Same namespace, or none named: the dead pid is stale.
	for _, ns := range []string{lockPIDNamespace(), ""} {
		other.PID, other.PIDNamespace = deadPID(t), ns
		if !IsStale(other) {
			t.Errorf("dead pid with pid_ns %q not stale", ns)
		}
	}
	lk, err := Acquire(context.Background(), filepath.Join(dir, "own.lock"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(lk.Path())
	if !strings.Contains(string(data), "pid_ns: "+lockPIDNamespace()+"\n") {
		t.Errorf("memd's lock lacks its pid_ns line: %q", data)
	}
	_ = lk.Release()
}

// The real thing: a memd lock holder started with `unshare --pid --fork` (a small pid in its
// namespace, a pid that is dead or someone else here) keeps its lock.
func TestLockUnsharePIDNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs unshare and root")
	}
	path := filepath.Join(t.TempDir(), ".memory.lock")
	// Throwaway processes first, so the holder's pid inside (sh is 1, the trues 2..n+1) is
	// one that no process has here: without the namespace check it would be taken over.
	want := 20
	for ; want < 30000 && !errors.Is(syscall.Kill(want, 0), syscall.ESRCH); want++ {
	}
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "sh", "-c",
		`i=0; while [ $i -lt `+strconv.Itoa(want-2)+` ]; do /bin/true; i=$((i+1)); done; "$0" -test.run='^TestLockHoldHelper$' -test.count=1`, os.Args[0])
	cmd.Env = append(os.Environ(), "MEMD_LOCK_HOLD="+path)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "held") {
		t.Skipf("holder in a new PID namespace did not start (%q): unshare not permitted here?", sc.Text())
	}
	info, err := ReadInfo(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.PIDNamespace == "" || info.PIDNamespace == lockPIDNamespace() {
		t.Fatalf("holder's pid_ns %q, ours %q: not another namespace", info.PIDNamespace, lockPIDNamespace())
	}
	if info.PID != want {
		t.Logf("holder has pid %d in its namespace, not %d", info.PID, want)
	}
	t.Logf("holder: %s; its pid probed here: %v", info, syscall.Kill(info.PID, 0))
	if _, err := Acquire(context.Background(), path, Options{Timeout: 200 * time.Millisecond, Poll: 10 * time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("the lock of a live holder in another PID namespace was taken: %v", err)
	}
	if got, _ := ReadInfo(path); got != info {
		t.Fatalf("lock changed: %+v, was %+v", got, info)
	}
}

// TestLockHoldHelper holds the lock at $MEMD_LOCK_HOLD until stdin closes.
func TestLockHoldHelper(t *testing.T) {
	path := os.Getenv("MEMD_LOCK_HOLD")
	if path == "" {
		t.Skip("helper process only")
	}
	lk, err := Acquire(context.Background(), path, Options{Context: "namespaced holder"})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = lk.Release()
}

// A remote can commit symlinks under the lock's names (`*.tmp` is ignored, so nobody sees
// them): the lock, its temp file and the take-over aside never write or read through one.
func TestLockNeverFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(repo, ".memory.lock")
	// The old predictable temp name, for this pid and a few around it.
	for pid := os.Getpid() - 3; pid <= os.Getpid()+3; pid++ {
		if err := os.Symlink(victim, fmt.Sprintf("%s.%d.tmp", path, pid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(victim, path); err != nil { // the lock itself: nobody's lock
		t.Fatal(err)
	}
	rec := &logRecorder{}
	lk, err := Acquire(context.Background(), path, Options{Timeout: 2 * time.Second, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("lock is not a regular file of ours: %v %v", fi, err)
	}
	if rec.find("no writer made") == "" {
		t.Error("removing the symlinked lock was not logged")
	}
	if err := lk.Release(); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Fatalf("victim changed: %q %v", b, err)
	}
	if fi, _ := os.Stat(victim); fi.Mode().Perm() != 0o600 {
		t.Fatalf("victim mode changed: %v", fi.Mode())
	}
	// ReadInfo of a symlinked lock reads nothing through it.
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadInfo(path); err == nil {
		t.Fatal("ReadInfo followed a symlinked lock")
	}
}
