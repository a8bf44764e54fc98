package reliability

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// helperEnv selects a helper mode when the test binary is re-executed as a child process
// (writers must be processes, not goroutines: the lock protocol is between processes).
const helperEnv = "MEMD_RELIABILITY_HELPER"

func helperMain(mode string) int {
	switch mode {
	case "writer":
		if err := writerMain(); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			return 1
		}
		return 0
	case "summarizer":
		return summarizerMain()
	}
	fmt.Fprintf(os.Stderr, "%s=%q: unknown helper mode\n", helperEnv, mode)
	return 2
}

// Writer modes.
const (
	modeLock     = "lock"     // the writer lock held around a two-step write
	modeRename   = "rename"   // write a temp file, rename over the target (atomic)
	modeTruncate = "truncate" // plain truncate-and-write in two steps, no lock
)

// writerSpec is what a writer process does; the parent computes the same expected contents.
type writerSpec struct {
	Repo  string
	ID    int
	Mode  string
	Count int // writes
	Files int // distinct files (each written Count/Files times)
	Seed  uint64
	Pause time.Duration // max pause inside a write and between writes
}

func (s writerSpec) env() []string {
	return []string{helperEnv + "=writer", "MEMD_W_REPO=" + s.Repo, "MEMD_W_ID=" + strconv.Itoa(s.ID),
		"MEMD_W_MODE=" + s.Mode, "MEMD_W_COUNT=" + strconv.Itoa(s.Count), "MEMD_W_FILES=" + strconv.Itoa(s.Files),
		"MEMD_W_SEED=" + strconv.FormatUint(s.Seed, 10), "MEMD_W_PAUSE=" + s.Pause.String()}
}

func (s writerSpec) rel(k int) string {
	return fmt.Sprintf("resources/w%d-%s/m%04d.html", s.ID, s.Mode, k%s.Files)
}

// endMark closes every complete version; a version without it is a half write.
func endMark(id, k int) string { return fmt.Sprintf("<!-- END w%d k%d -->\n", id, k) }

// parts are the two halves of write k (written with a pause between them).
func (s writerSpec) parts(k int) (string, string) {
	head := fmt.Sprintf("<!doctype html><title>w%d m%d</title><article><p><mark>writer %d (%s) write %d</mark> ",
		s.ID, k%s.Files, s.ID, s.Mode, k)
	pad := strings.Repeat(fmt.Sprintf("%d-%d ", s.ID, k), 20)
	return head + pad + "\n", "second half of write " + strconv.Itoa(k) + "</p></article>\n" + endMark(s.ID, k)
}

// finals is each file's last content.
func (s writerSpec) finals() map[string]string {
	out := map[string]string{}
	for k := 0; k < s.Count; k++ {
		a, b := s.parts(k)
		out[s.rel(k)] = a + b
	}
	return out
}

func writerMain() error {
	var s writerSpec
	var err error
	s.Repo = os.Getenv("MEMD_W_REPO")
	s.Mode = os.Getenv("MEMD_W_MODE")
	atoi := func(k string) int {
		n, e := strconv.Atoi(os.Getenv(k))
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", k, e)
		}
		return n
	}
	s.ID, s.Count, s.Files = atoi("MEMD_W_ID"), atoi("MEMD_W_COUNT"), atoi("MEMD_W_FILES")
	if s.Seed, err = strconv.ParseUint(os.Getenv("MEMD_W_SEED"), 10, 64); err != nil {
		return fmt.Errorf("MEMD_W_SEED: %w", err)
	}
	if s.Pause, err = time.ParseDuration(os.Getenv("MEMD_W_PAUSE")); err != nil {
		return fmt.Errorf("MEMD_W_PAUSE: %w", err)
	}
	// MEMD_W_UNTIL (unix ns, optional): stop at the first write boundary after it and say
	// how many writes were made ("done N"), so the parent knows the final contents.
	var until time.Time
	if v := os.Getenv("MEMD_W_UNTIL"); v != "" {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("MEMD_W_UNTIL: %w", err)
		}
		until = time.Unix(0, ns)
	}
	rng := rand.New(rand.NewPCG(s.Seed, uint64(s.ID)))
	pause := func() {
		if s.Pause > 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(s.Pause))))
		}
	}
	lock := filepath.Join(s.Repo, ".memory.lock")
	for k := 0; k < s.Count; k++ {
		if !until.IsZero() && time.Now().After(until) {
			fmt.Printf("done %d\n", k)
			return nil
		}
		p := filepath.Join(s.Repo, filepath.FromSlash(s.rel(k)))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		a, b := s.parts(k)
		switch s.Mode {
		case modeLock:
			if err := acquireWriterLock(lock, 60*time.Second); err != nil {
				return err
			}
			err := twoStepWrite(p, a, b, pause)
			if rerr := os.Remove(lock); err == nil && rerr != nil {
				err = fmt.Errorf("release lock: %w", rerr)
			}
			if err != nil {
				return err
			}
		case modeRename:
			tmp := filepath.Join(filepath.Dir(p), fmt.Sprintf(".%s.%d.tmp", filepath.Base(p), os.Getpid()))
			if err := twoStepWrite(tmp, a, b, func() {}); err != nil {
				return err
			}
			if err := os.Rename(tmp, p); err != nil {
				return err
			}
		case modeTruncate:
			if err := twoStepWrite(p, a, b, pause); err != nil {
				return err
			}
		default:
			return fmt.Errorf("mode %q", s.Mode)
		}
		pause()
	}
	fmt.Printf("done %d\n", s.Count)
	return nil
}

// acquireWriterLock polls like the Python writer (O_EXCL create, retry while it exists).
func acquireWriterLock(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := writeLockFile(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(path)
			return fmt.Errorf("writer lock %s held for %s: %q", path, timeout, b)
		}
		time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
	}
}

// twoStepWrite truncates p, writes a, fsyncs, pauses, writes b: a reader in the pause sees
// the half state.
func twoStepWrite(p, a, b string, pause func()) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, a); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	pause()
	if _, err := io.WriteString(f, b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// summarizerMain is the arc summarizer used by the exposure test: it records its argv (one
// per line, as received) and prints a summary.
func summarizerMain() int {
	out := os.Getenv("MEMD_SUMMARIZER_ARGV")
	if out != "" {
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err == nil {
			fmt.Fprintf(f, "%q\n", os.Args[1:])
			f.Close()
		}
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Println("summary from the test summarizer")
	return 0
}
