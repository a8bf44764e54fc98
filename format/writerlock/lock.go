package writerlock

// The writer lock (docs/FORMATS.md §5): every writer of the memory repo serialises on
// `<repo>/.memory.lock`, a file created with O_CREAT|O_EXCL (0644) holding `pid:`,
// `hostname:`, `acquired_at:` and an optional `context:` line, polled every 50 ms, removed on
// release. It is the same protocol as the Python memory writer's lock (c-daly/memory
// lib/lock.py), so memd and that writer exclude each other. memd adds a `pid_ns:` line (the
// inode of /proc/self/ns/pid) that the Python writer ignores: a pid means nothing outside its
// PID namespace, so a holder in another namespace is never called dead by a pid probe.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/internal/textsafe"
)

// Defaults of Options.
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

// ErrTimeout is wrapped by Acquire's error when the lock stayed held for the timeout.
var ErrTimeout = errors.New("writer lock timeout")

// ErrLost is wrapped by Release when the lock file is gone or belongs to another
// writer (someone removed it or took it over while it was held). Release leaves such a
// file alone.
var ErrLost = errors.New("writer lock lost")

// ErrReleased is wrapped by a second Release of the same Lock.
var ErrReleased = errors.New("writer lock already released")

// ErrUnparseable is wrapped by ReadInfo when the file lacks a pid or hostname line.
var ErrUnparseable = errors.New("unparseable lock file")

// Info is the metadata a lock file holds.
type Info struct {
	PID                           int
	Hostname, AcquiredAt, Context string
	// PIDNamespace is the holder's PID namespace (the inode of /proc/self/ns/pid); empty
	// when the writer did not say (the Python writer) or the OS has none.
	PIDNamespace string
}

func (i Info) String() string {
	s := fmt.Sprintf("pid %d on host %q since %s", i.PID, i.Hostname, i.AcquiredAt)
	if i.Context != "" {
		s += fmt.Sprintf(" (context: %s)", i.Context)
	}
	return s
}

// Options tunes Acquire. Zero values take the defaults.
type Options struct {
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
	info    Info
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
	pidNSOnce    sync.Once
	pidNSVal     string
)

// lockPIDNamespace is this process's PID namespace: the inode of /proc/self/ns/pid, "" where
// there is none (not Linux, /proc not mounted).
func lockPIDNamespace() string {
	pidNSOnce.Do(func() {
		var st syscall.Stat_t
		if err := syscall.Stat("/proc/self/ns/pid", &st); err == nil {
			pidNSVal = strconv.FormatUint(uint64(st.Ino), 10)
		}
	})
	return pidNSVal
}

// samePIDNamespace: whether a holder's pid can be probed from here. A lock that names no
// namespace (the Python writer's) is taken as ours, as before namespaces were recorded.
func samePIDNamespace(info Info) bool {
	return info.PIDNamespace == "" || lockPIDNamespace() == "" || info.PIDNamespace == lockPIDNamespace()
}

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

// Acquire takes the writer lock at path, waiting while another writer holds it.
//
//   - Re-entrant: if this process holds it already, the count goes up and it returns at once.
//   - A stale lock (this host, its pid not running; or this process's own pid left over from
//     an earlier run) is taken over, with a log line naming the old holder.
//   - A lock file that does not parse is held until it is LockUnreadableStaleAfter old.
//   - A lock held by a live process (or another host: memd cannot see its processes) is
//     waited for; after opts.Timeout the error wraps ErrTimeout and quotes the holder's
//     metadata. ctx ends the wait early with ctx's error.
func Acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
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
				ErrTimeout, abs, time.Since(start).Round(time.Millisecond), holder)
		case <-poll.C:
		}
	}
}

// tryLock makes one attempt. It returns the lock, or a description of the holder when the
// lock is held, or an error when the file cannot be created for another reason.
func tryLock(abs string, opts Options, log *slog.Logger) (*Lock, string, error) {
	lockRegistry.Lock()
	defer lockRegistry.Unlock()
	if h := lockRegistry.held[abs]; h != nil {
		h.count++
		return &Lock{path: abs, held: h}, "", nil
	}
	for attempt := 0; ; attempt++ {
		info := Info{PID: os.Getpid(), Hostname: lockHostname(),
			AcquiredAt: opts.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"), Context: oneLine(opts.Context),
			PIDNamespace: lockPIDNamespace()}
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
		if errors.Is(rerr, errLockNotFile) && attempt < 3 {
			removeForeignLock(abs, log, rerr)
			continue
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

// lockTree opens the lock's directory (the repo root) through safefs: the lock, its temp
// file and the take-over aside are all names in that directory, never followed if a
// symlink (a remote can commit one under any name).
func lockTree(abs string) (*safefs.Tree, string, error) {
	t, err := safefs.Open(filepath.Dir(abs))
	if err != nil {
		return nil, "", err
	}
	return t, filepath.Base(abs), nil
}

// createLockFile creates the lock with its metadata already in it: the content goes to a
// temp file (safefs: O_CREAT|O_EXCL|O_NOFOLLOW, an unpredictable name) that is then
// hard-linked to the lock path, which fails like O_EXCL when the lock exists (a symlink
// there included: link(2) never follows the new name). So a memd killed at any moment never
// leaves an empty lock behind (an empty lock reads as held for LockEmptyStaleAfter). Where
// hard links are not supported it falls back to the writers' own O_CREAT|O_EXCL then write.
func createLockFile(abs string, content []byte) error {
	t, base, err := lockTree(abs)
	if err != nil {
		return err
	}
	defer t.Close()
	sweepLockTemps(t, abs)
	if tmp, err := t.CreateTemp(base, 0o644); err == nil {
		_, werr := tmp.Write(content)
		lerr := werr
		if werr == nil {
			lerr = t.Link(tmp.Path(), base)
		}
		tmp.Abort() // removes the temp name; the lock keeps the inode
		if lerr == nil || errors.Is(lerr, os.ErrExist) {
			return lerr
		}
	}
	// O_EXCL with O_CREAT never follows a symlink at the name; safefs adds O_NOFOLLOW too.
	f, err := t.OpenFile(base, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(content)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = t.Remove(base)
		return fmt.Errorf("write: %w", werr)
	}
	return nil
}

// errLockNotFile: the lock path is a symlink, FIFO, directory...: no writer made it (they
// all create a regular file), so it is nobody's lock.
var errLockNotFile = errors.New("not a regular file")

// readLockFile reads the lock without following a symlink or blocking on a FIFO.
func readLockFile(path string) ([]byte, time.Time, error) {
	t, base, err := lockTree(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer t.Close()
	return readLockIn(t, base)
}

func readLockIn(t *safefs.Tree, base string) ([]byte, time.Time, error) {
	if fi, err := t.Lstat(base); err == nil && !fi.Mode().IsRegular() {
		return nil, fi.ModTime(), fmt.Errorf("%w (%s)", errLockNotFile, fi.Mode().Type())
	}
	f, err := t.OpenRead(base)
	if err != nil {
		if errors.Is(err, safefs.ErrSymlink) {
			return nil, time.Time{}, fmt.Errorf("%w: %w", errLockNotFile, err)
		}
		return nil, time.Time{}, err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, 64<<10)); err != nil {
		return nil, time.Time{}, err
	}
	return buf.Bytes(), st.ModTime(), nil
}

// removeForeignLock removes a lock path that is not a regular file (a committed symlink, a
// FIFO): the name only, never what a link points at.
func removeForeignLock(abs string, log *slog.Logger, why error) {
	t, base, err := lockTree(abs)
	if err != nil {
		return
	}
	defer t.Close()
	if err := t.Remove(base); err == nil {
		log.Warn("removed a writer lock path that no writer made", "path", abs, "was", why)
	}
}

// judgeLock decides whether a lock file found on disk is stale and describes its holder.
// Called with lockRegistry held, so a lock with this process's pid is not ours.
func judgeLock(data []byte, mtime, now time.Time) (stale bool, holder string) {
	info, err := parseLockInfo(data)
	if err != nil {
		age := now.Sub(mtime)
		holder = fmt.Sprintf("an unreadable lock file (content %q, modified %s, %s ago)",
			textsafe.Clip(string(data), 200), mtime.UTC().Format(time.RFC3339), age.Round(time.Second))
		if len(bytes.TrimSpace(data)) == 0 {
			// Writers write their metadata right after creating the file: an empty lock
			// this old was left by a writer killed in between.
			return age >= LockEmptyStaleAfter, holder
		}
		return age >= LockUnreadableStaleAfter, holder
	}
	holder = info.String()
	if info.Hostname == lockHostname() && info.PID == os.Getpid() && samePIDNamespace(info) {
		return true, holder + " (this process's pid, not held by it: left from an earlier run)"
	}
	if !samePIDNamespace(info) {
		holder += fmt.Sprintf(" (PID namespace %s, not ours %s: its pid cannot be probed from here)", info.PIDNamespace, lockPIDNamespace())
	}
	return IsStale(info), holder
}

// takeOver removes a stale lock file, but only the one judged stale: it is renamed aside
// first (atomic, one winner) and compared; a file that changed meanwhile (another writer
// took over and locked) is linked back. The aside name ends in .tmp so watchers ignore it.
func takeOver(abs string, judged []byte, log *slog.Logger) bool {
	t, base, err := lockTree(abs)
	if err != nil {
		return false
	}
	defer t.Close()
	aside := fmt.Sprintf("%s.stale-%d-%d.tmp", base, os.Getpid(), time.Now().UnixNano())
	if err := t.Rename(base, aside); err != nil {
		return false // gone already, or not ours to move: the next attempt looks again
	}
	defer func() { _ = t.Remove(aside) }()
	got, err := t.ReadFile(aside)
	if err == nil && bytes.Equal(got, judged) {
		return true
	}
	if err := t.Link(aside, base); err != nil {
		log.Warn("writer lock changed during stale take-over and could not be put back", "path", abs, "err", err)
	}
	return false
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func formatLockInfo(i Info) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pid: %d\nhostname: %s\nacquired_at: %s\n", i.PID, i.Hostname, i.AcquiredAt)
	if i.Context != "" {
		fmt.Fprintf(&b, "context: %s\n", i.Context)
	}
	if i.PIDNamespace != "" {
		fmt.Fprintf(&b, "pid_ns: %s\n", i.PIDNamespace)
	}
	return b.Bytes()
}

// parseLockInfo reads `key: value` lines; unknown keys are ignored; pid and hostname are
// required.
func parseLockInfo(data []byte) (Info, error) {
	var info Info
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
				return Info{}, fmt.Errorf("%w: pid %q", ErrUnparseable, value)
			}
			info.PID, hasPID = n, true
		case "hostname":
			info.Hostname, hasHost = value, value != ""
		case "acquired_at":
			info.AcquiredAt = value
		case "context":
			info.Context = value
		case "pid_ns":
			info.PIDNamespace = value
		}
	}
	if !hasPID {
		return Info{}, fmt.Errorf("%w: no pid line", ErrUnparseable)
	}
	if !hasHost {
		return Info{}, fmt.Errorf("%w: no hostname line", ErrUnparseable)
	}
	return info, nil
}

// ReadInfo reads the metadata of the lock file at path.
func ReadInfo(path string) (Info, error) {
	data, _, err := readLockFile(path)
	if err != nil {
		return Info{}, fmt.Errorf("writer lock %s: %w", path, err)
	}
	info, err := parseLockInfo(data)
	if err != nil {
		return Info{}, fmt.Errorf("writer lock %s: %w", path, err)
	}
	return info, nil
}

// IsStale reports whether a lock's holder is certainly gone: it ran on this host, in
// this PID namespace, and its pid is not running. A lock from another host or another PID
// namespace (a container sharing the hostname) is never stale: memd cannot see its processes.
func IsStale(info Info) bool {
	if info.PID <= 0 || info.Hostname != lockHostname() || !samePIDNamespace(info) {
		return false
	}
	return errors.Is(syscall.Kill(info.PID, 0), syscall.ESRCH)
}

// Path returns the lock file's absolute path.
func (l *Lock) Path() string { return l.path }

// Info returns the metadata this process wrote into the lock file.
func (l *Lock) Info() Info { return l.held.info }

// Release gives the lock back. The file is removed when the process's last hold ends, and
// only if it is still the file this process wrote (else ErrLost, file left alone).
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return fmt.Errorf("writer lock %s: %w", l.path, ErrReleased)
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
	t, base, err := lockTree(l.path)
	if err != nil {
		return fmt.Errorf("writer lock %s: release: %w", l.path, err)
	}
	defer t.Close()
	data, _, err := readLockIn(t, base)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s was removed while held", ErrLost, l.path)
	}
	if err != nil {
		return fmt.Errorf("writer lock %s: release: %w", l.path, err)
	}
	if !bytes.Equal(data, l.held.content) {
		holder := fmt.Sprintf("%q", textsafe.Clip(string(data), 200))
		if info, err := parseLockInfo(data); err == nil {
			holder = info.String()
		}
		return fmt.Errorf("%w: %s now belongs to %s; left in place", ErrLost, l.path, holder)
	}
	if err := t.Remove(base); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("writer lock %s: release: %w", l.path, err)
	}
	return nil
}

// WithLock runs fn while holding the writer lock at path.
func WithLock(ctx context.Context, path string, opts Options, fn func() error) (err error) {
	lk, err := Acquire(ctx, path, opts)
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

// sweepLockTemps removes the temp files that a killed process of an earlier memd left
// (".memory.lock.<pid>.tmp" whose pid is gone), so they do not linger in `git status`. Only
// regular files: a symlink under that name was committed by someone (a remote), and memd
// neither follows nor deletes it. (Today's temps are safefs's random names, removed at once
// after the link.)
func sweepLockTemps(t *safefs.Tree, abs string) {
	tmps, _ := filepath.Glob(abs + ".*.tmp")
	for _, p := range tmps {
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, abs+"."), ".tmp"))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if fi, err := t.Lstat(filepath.Base(p)); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = t.Remove(filepath.Base(p))
		}
	}
}
