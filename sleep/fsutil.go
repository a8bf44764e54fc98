package sleep

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// writeStreamRename writes path through a temp file renamed into place (not fsynced: the
// state files are caches), streaming what write puts out instead of building it whole.
func writeStreamRename(path string, perm os.FileMode, write func(w *bufio.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".memd-*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	w := bufio.NewWriterSize(f, 1<<20)
	err = write(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// writeFileAtomic writes data to path through a temp file in the same directory, fsynced and
// renamed, so a reader or a crash sees the old bytes or the new ones, never a mix.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	return writeFileRename(path, data, perm, true)
}

// writeFileRename is writeFileAtomic with the fsyncs optional: an apply writes many files and
// makes them durable with one flushFS before its commit.
func writeFileRename(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".memd-*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("write %s: fsync: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	if durable {
		syncDir(dir)
	}
	return nil
}

// syncDir fsyncs a directory so a rename in it is durable; best effort (not all
// filesystems allow it).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
