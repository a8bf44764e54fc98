package memd

// The writer lock (docs/FORMATS.md §5): every writer of the memory repo serialises on
// `<repo>/.memory.lock`, a file created with O_CREAT|O_EXCL (0644) holding `pid:`,
// `hostname:`, `acquired_at:` and an optional `context:` line, polled every 50 ms, removed on
// release. It is the same protocol as the Python memory writer's lock (c-daly/memory
// lib/lock.py), so memd and that writer exclude each other.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of LockOptions.
const (
	DefaultLockTimeout = 10 * time.Second
	DefaultLockPoll    = 50 * time.Millisecond
	// LockUnreadableStaleAfter: a lock file that cannot be parsed (empty, truncated,
	// foreign) is treated as held until its mtime is this old, then taken over. A writer
	// creates the file and writes its few lines at once, so a young unreadable file is most
	// likely being written right now; ten minutes is far longer than any write holds the
	// lock, and short enough that a crashed writer does not block memd for long.
	LockUnreadableStaleAfter = 10 * time.Minute
	// LockEmptyStaleAfter: an empty lock file (its writer died between create and write).
	LockEmptyStaleAfter = 30 * time.Second
)

// ErrLockTimeout is wrapped by AcquireLock's error when the lock stayed held for the timeout.
var ErrLockTimeout = errors.New("writer lock timeout")

// ErrLockLost is wrapped by Release when the lock file is gone or belongs to another
// writer (someone removed it or took it over while it was held). Release leaves such a
// file alone.
var ErrLockLost = errors.New("writer lock lost")

// ErrLockReleased is wrapped by a second Release of the same Lock.
var ErrLockReleased = errors.New("writer lock already released")

// ErrLockUnparseable is wrapped by ReadLockInfo when the file lacks a pid or hostname line.
var ErrLockUnparseable = errors.New("unparseable lock file")

// LockInfo is the metadata a lock file holds.
type LockInfo struct {
	PID                           int
	Hostname, AcquiredAt, Context string
}

func (i LockInfo) String() string {
	s := fmt.Sprintf("pid %d on host %q since %s", i.PID, i.Hostname, i.AcquiredAt)
	if i.Context != "" {
		s += fmt.Sprintf(" (context: %s)", i.Context)
	}
	return s
}

// LockOptions tunes AcquireLock. Zero values take the defaults.
type LockOptions struct {
	Timeout time.Duration // how long to wait for a held lock; default 10s
	Poll    time.Duration // how often to look again; default 50ms
	Context string        // written as the `context:` line, says who holds the lock
	Logger  *slog.Logger  // nil: discard
	// Now stamps acquired_at and ages unreadable lock files; default time.Now. The timeout
	// runs on the real (monotonic) clock, so a fixed test clock cannot make it wait forever.
	Now func() time.Time
}

// Lock is a held writer lock. Release it exactly once.
type Lock struct {
	path string
	held *heldLock

	mu       sync.Mutex
	released bool
}

// heldLock is this process's hold on one lock file: the lock is re-entrant inside the
// process, so nested or concurrent acquires in one process share it and count.
type heldLock struct {
	count   int
	content []byte // what we wrote, to recognise our own file on release
	info    LockInfo
}

// lockRegistry is process-wide, keyed by absolute path. Its mutex is also held around
// every create, judge and take-over of a lock file, so a goroutine never mistakes a lock
// this process holds, or is just releasing, for a stale one.
var lockRegistry = struct {
	sync.Mutex
	held map[string]*heldLock
}{held: map[string]*heldLock{}}

var (
	hostnameOnce sync.Once
	hostnameVal  string
)

func lockHostname() string {
	hostnameOnce.Do(func() {
		h, err := os.Hostname()
		if err != nil {
			h = "unknown"
		}
		hostnameVal = h
	})
	return hostnameVal
}

// AcquireLock takes the writer lock at path, waiting while another writer holds it.
//
//   - Re-entrant: if this process holds it already, the count goes up and it returns at once.
//   - A stale lock (this host, its pid not running; or this process's own pid left over from
//     an earlier run) is taken over, with a log line naming the old holder.
//   - A lock file that does not parse is held until it is LockUnreadableStaleAfter old.
//   - A lock held by a live process (or another host: memd cannot see its processes) is
//     waited for; after opts.Timeout the error wraps ErrLockTimeout and quotes the holder's
//     metadata. ctx ends the wait early with ctx's error.
func AcquireLock(ctx context.Context, path string, opts LockOptions) (*Lock, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("writer lock %s: %w", path, err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultLockTimeout
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultLockPoll
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	deadline := time.NewTimer(opts.Timeout)
	defer deadline.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	waitingLogged := false
	for {
		lk, holder, err := tryLock(abs, opts, log)
		if err != nil || lk != nil {
			return lk, err
		}
		if !waitingLogged {
			log.Debug("writer lock held, waiting", "path", abs, "holder", holder)
			waitingLogged = true
		}
		poll.Reset(opts.Poll)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("writer lock %s: waiting for %s: %w", abs, holder, ctx.Err())
		case <-deadline.C:
			// One last look: it may have been freed just now.
			if lk, holder2, err := tryLock(abs, opts, log); err != nil || lk != nil {
				return lk, err
			} else if holder2 != "" {
				holder = holder2
			}
			return nil, fmt.Errorf("%w: %s still held after %s by %s; if no writer is running, remove the file",
				ErrLockTimeout, abs, time.Since(start).Round(time.Millisecond), holder)
		case <-poll.C:
		}
	}
}

// tryLock makes one attempt. It returns the lock, or a description of the holder when the
// lock is held, or an error when the file cannot be created for another reason.
func tryLock(abs string, opts LockOptions, log *slog.Logger) (*Lock, string, error) {
	lockRegistry.Lock()
	defer lockRegistry.Unlock()
	if h := lockRegistry.held[abs]; h != nil {
		h.count++
		return &Lock{path: abs, held: h}, "", nil
	}
	for attempt := 0; ; attempt++ {
		info := LockInfo{PID: os.Getpid(), Hostname: lockHostname(),
			AcquiredAt: opts.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"), Context: oneLine(opts.Context)}
		content := formatLockInfo(info)
		err := createLockFile(abs, content)
		if err == nil {
			h := &heldLock{count: 1, content: content, info: info}
			lockRegistry.held[abs] = h
			return &Lock{path: abs, held: h}, "", nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", fmt.Errorf("writer lock %s: %w", abs, err)
		}
		data, mtime, rerr := readLockFile(abs)
		if errors.Is(rerr, os.ErrNotExist) {
			continue // released between our create and our read: try again
		}
		if rerr != nil {
			return nil, "", fmt.Errorf("writer lock %s: %w", abs, rerr)
		}
		stale, holder := judgeLock(data, mtime, opts.Now())
		if !stale || attempt >= 3 {
			return nil, holder, nil
		}
		if takeOver(abs, data, log) {
			log.Info("took over stale writer lock", "path", abs, "holder", holder)
		}
	}
}

// createLockFile creates the lock with its metadata already in it: the content goes to a
// temp file that is then hard-linked to the lock path, which fails like O_EXCL when the lock
// exists. So a memd killed at any moment never leaves an empty lock behind (an empty lock
// reads as held for LockEmptyStaleAfter). Where hard links are not supported it falls back
// to the writers' own O_CREAT|O_EXCL then write.
func createLockFile(abs string, content []byte) error {
	sweepLockTemps(abs)
	tmp := fmt.Sprintf("%s.%d.tmp", abs, os.Getpid())
	if err := os.WriteFile(tmp, content, 0o644); err == nil {
		lerr := os.Link(tmp, abs)
		_ = os.Remove(tmp)
		if lerr == nil || errors.Is(lerr, os.ErrExist) {
			return lerr
		}
	}
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = os.Remove(abs)
		return fmt.Errorf("write: %w", werr)
	}
	return nil
}

func readLockFile(path string) ([]byte, time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil {
		return nil, time.Time{}, err
	}
	return buf.Bytes(), st.ModTime(), nil
}

// judgeLock decides whether a lock file found on disk is stale and describes its holder.
// Called with lockRegistry held, so a lock with this process's pid is not ours.
func judgeLock(data []byte, mtime, now time.Time) (stale bool, holder string) {
	info, err := parseLockInfo(data)
	if err != nil {
		age := now.Sub(mtime)
		holder = fmt.Sprintf("an unreadable lock file (content %q, modified %s, %s ago)",
			mdClip(string(data), 200), mtime.UTC().Format(time.RFC3339), age.Round(time.Second))
		if len(bytes.TrimSpace(data)) == 0 {
			// Writers write their metadata right after creating the file: an empty lock
			// this old was left by a writer killed in between.
			return age >= LockEmptyStaleAfter, holder
		}
		return age >= LockUnreadableStaleAfter, holder
	}
	holder = info.String()
	if info.Hostname == lockHostname() && info.PID == os.Getpid() {
		return true, holder + " (this process's pid, not held by it: left from an earlier run)"
	}
	return LockIsStale(info), holder
}

// takeOver removes a stale lock file, but only the one judged stale: it is renamed aside
// first (atomic, one winner) and compared; a file that changed meanwhile (another writer
// took over and locked) is linked back. The aside name ends in .tmp so watchers ignore it.
func takeOver(abs string, judged []byte, log *slog.Logger) bool {
	aside := fmt.Sprintf("%s.stale-%d-%d.tmp", abs, os.Getpid(), time.Now().UnixNano())
	if err := os.Rename(abs, aside); err != nil {
		return false // gone already, or not ours to move: the next attempt looks again
	}
	defer func() { _ = os.Remove(aside) }()
	got, err := os.ReadFile(aside)
	if err == nil && bytes.Equal(got, judged) {
		return true
	}
	if err := os.Link(aside, abs); err != nil {
		log.Warn("writer lock changed during stale take-over and could not be put back", "path", abs, "err", err)
	}
	return false
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func formatLockInfo(i LockInfo) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pid: %d\nhostname: %s\nacquired_at: %s\n", i.PID, i.Hostname, i.AcquiredAt)
	if i.Context != "" {
		fmt.Fprintf(&b, "context: %s\n", i.Context)
	}
	return b.Bytes()
}

// parseLockInfo reads `key: value` lines; unknown keys are ignored; pid and hostname are
// required.
func parseLockInfo(data []byte) (LockInfo, error) {
	var info LockInfo
	hasPID, hasHost := false, false
	for _, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		switch strings.TrimSpace(key) {
		case "pid":
			n, err := strconv.Atoi(value)
			if err != nil || n <= 0 {
				return LockInfo{}, fmt.Errorf("%w: pid %q", ErrLockUnparseable, value)
			}
			info.PID, hasPID = n, true
		case "hostname":
			info.Hostname, hasHost = value, value != ""
		case "acquired_at":
			info.AcquiredAt = value
		case "context":
			info.Context = value
		}
	}
	if !hasPID {
		return LockInfo{}, fmt.Errorf("%w: no pid line", ErrLockUnparseable)
	}
	if !hasHost {
		return LockInfo{}, fmt.Errorf("%w: no hostname line", ErrLockUnparseable)
	}
	return info, nil
}

// ReadLockInfo reads the metadata of the lock file at path.
func ReadLockInfo(path string) (LockInfo, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return LockInfo{}, fmt.Errorf("writer lock %s: %w", path, err)
	}
	info, err := parseLockInfo(data)
	if err != nil {
		return LockInfo{}, fmt.Errorf("writer lock %s: %w", path, err)
	}
	return info, nil
}

// LockIsStale reports whether a lock's holder is certainly gone: it ran on this host and
// its pid is not running. A lock from another host is never stale (memd cannot see there).
func LockIsStale(info LockInfo) bool {
	if info.PID <= 0 || info.Hostname != lockHostname() {
		return false
	}
	return errors.Is(syscall.Kill(info.PID, 0), syscall.ESRCH)
}

// Path returns the lock file's absolute path.
func (l *Lock) Path() string { return l.path }

// Info returns the metadata this process wrote into the lock file.
func (l *Lock) Info() LockInfo { return l.held.info }

// Release gives the lock back. The file is removed when the process's last hold ends, and
// only if it is still the file this process wrote (else ErrLockLost, file left alone).
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("writer lock %s: %w", l.path, ErrLockReleased)
	}
	l.released = true
	lockRegistry.Lock()
	defer lockRegistry.Unlock()
	l.held.count--
	if l.held.count > 0 {
		return nil
	}
	if lockRegistry.held[l.path] == l.held {
		delete(lockRegistry.held, l.path)
	}
	data, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s was removed while held", ErrLockLost, l.path)
	}
	if err != nil {
		return fmt.Errorf("writer lock %s: release: %w", l.path, err)
	}
	if !bytes.Equal(data, l.held.content) {
		holder := fmt.Sprintf("%q", mdClip(string(data), 200))
		if info, err := parseLockInfo(data); err == nil {
			holder = info.String()
		}
		return fmt.Errorf("%w: %s now belongs to %s; left in place", ErrLockLost, l.path, holder)
	}
	if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("writer lock %s: release: %w", l.path, err)
	}
	return nil
}

// WithLock runs fn while holding the writer lock at path.
func WithLock(ctx context.Context, path string, opts LockOptions, fn func() error) (err error) {
	lk, err := AcquireLock(ctx, path, opts)
	if err != nil {
		return err
	}
	defer func() {
		if rerr := lk.Release(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	return fn()
}

// sweepLockTemps removes the temp files of createLockFile that a killed process left
// (".memory.lock.<pid>.tmp" whose pid is gone), so they do not linger in `git status`.
func sweepLockTemps(abs string) {
	tmps, _ := filepath.Glob(abs + ".*.tmp")
	for _, t := range tmps {
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(t, abs+"."), ".tmp"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.Remove(t)
		}
	}
}
