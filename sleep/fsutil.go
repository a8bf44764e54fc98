package sleep

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/statedir"
)

// readFileString reads a whole file into a string without the copy that
// string(os.ReadFile(...)) makes: the state files run to tens of MB at 100k files, and a
// second copy of each was garbage for the collector to chase during the run.
func readFileString(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var b strings.Builder
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		b.Grow(int(fi.Size()) + 1)
	}
	if _, err := io.Copy(&b, f); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return b.String(), nil
}

// openState opens sleep's state dir (sleep.json, the caches, the journal) through
// internal/statedir, created 0700 if missing: nothing in it is written through a symlink.
func openState(stateDir string) (*statedir.Dir, error) {
	sd, err := statedir.Open(stateDir)
	if err != nil {
		return nil, err
	}
	if err := sd.Ensure(); err != nil {
		sd.Close()
		return nil, err
	}
	return sd, nil
}

// writeStateStream writes name in the state dir through a temp file renamed into place (not
// fsynced: the state files it writes are caches), streaming what write puts out instead of
// building it whole (the caches run to tens of MB).
func writeStateStream(stateDir, name string, perm os.FileMode, write func(w *bufio.Writer) error) error {
	sd, err := openState(stateDir)
	if err != nil {
		return err
	}
	defer sd.Close()
	return sd.WriteCache(name, perm, time.Time{}, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
}

// writeStateFile writes name in the state dir atomically and durably (temp file, fsync,
// rename), so a reader or a crash sees the old bytes or the new ones, never a mix.
func writeStateFile(stateDir, name string, data []byte, perm os.FileMode) error {
	sd, err := openState(stateDir)
	if err != nil {
		return err
	}
	defer sd.Close()
	return sd.WriteFile(name, data, perm)
}

// removeStateFiles removes names from the state dir (missing ones are no error).
func removeStateFiles(stateDir string, names ...string) error {
	sd, err := statedir.Open(stateDir)
	if err != nil {
		return err
	}
	defer sd.Close()
	for _, n := range names {
		if err := sd.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
