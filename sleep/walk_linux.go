package sleep

import (
	"os"

	"golang.org/x/sys/unix"
)

// dirHandle is an open directory: its entries are lstat'ed relative to its descriptor
// (fstatat), so the kernel does not resolve the whole path again for every file.
type dirHandle struct {
	f  *os.File
	fd int
}

func openDir(abs string) (dirHandle, error) {
	f, err := os.Open(abs)
	if err != nil {
		return dirHandle{}, err
	}
	return dirHandle{f, int(f.Fd())}, nil
}

func (d dirHandle) close() { d.f.Close() }

func (d dirHandle) lstat(name string) (fileStat, bool) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fileStat{}, false
		}
		return fileStat{Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino}, true
	}
}

// lstatFile is the stat of one file by path (after an apply wrote or moved it).
func lstatFile(abs string) (fileStat, bool) {
	var st unix.Stat_t
	if err := unix.Lstat(abs, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fileStat{}, false
	}
	return fileStat{Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino}, true
}

// openRegular opens a regular file for reading, never through a symlink (O_NOFOLLOW) and
// without blocking on a FIFO (O_NONBLOCK), and returns its size: one open and one fstat
// instead of ParseMemoryFile's lstat, open and fstat.
func openRegular(abs string) (*os.File, int64, bool) {
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	for err == unix.EINTR {
		fd, err = unix.Open(abs, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, 0, false
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, 0, false
	}
	return os.NewFile(uintptr(fd), abs), st.Size, true
}
