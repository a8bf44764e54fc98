//go:build unix

package service

import (
	"os"
	"syscall"
)

// fileDevIno returns the device and inode of an open file, as JOURNAL_STREAM names them.
func fileDevIno(f *os.File) (dev, ino uint64, ok bool) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true //nolint:unconvert // Dev is int32 on darwin
}
