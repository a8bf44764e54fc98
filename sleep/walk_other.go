//go:build !linux

package sleep

import (
	"os"
	"path/filepath"
	"syscall"
)

// dirHandle is an open directory; outside Linux its entries are lstat'ed by path.
type dirHandle struct {
	f   *os.File
	abs string
}

func openDir(abs string) (dirHandle, error) {
	f, err := os.Open(abs)
	return dirHandle{f, abs}, err
}

func (d dirHandle) close() { d.f.Close() }

func (d dirHandle) lstat(name string) (fileStat, bool) {
	return lstatFile(filepath.Join(d.abs, name))
}

// lstatFile is the stat of one file by path. The inode is kept where the platform has
// one; ctime is left out (mtime, size and inode still decide).
func lstatFile(abs string) (fileStat, bool) {
	fi, err := os.Lstat(abs)
	if err != nil || !fi.Mode().IsRegular() {
		return fileStat{}, false
	}
	st := fileStat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.Ino = uint64(sys.Ino)
	}
	return st, true
}

// openRegular opens a regular file for reading, never through a symlink, and returns its
// size (lstat, open, then a check that the open file is the one lstat saw).
func openRegular(abs string) (*os.File, int64, bool) {
	li, err := os.Lstat(abs)
	if err != nil || !li.Mode().IsRegular() {
		return nil, 0, false
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, 0, false
	}
	if fi, err := f.Stat(); err != nil || !os.SameFile(li, fi) {
		f.Close()
		return nil, 0, false
	}
	return f, li.Size(), true
}
