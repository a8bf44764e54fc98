package sleep

import (
	"fmt"
	"os"
	"path/filepath"
)

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
