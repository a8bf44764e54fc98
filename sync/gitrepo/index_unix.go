//go:build linux || darwin

package gitrepo

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat copies lstat data into an index entry the way git records it.
func fillStat(e *index.Entry, fi fs.FileInfo) {
	e.ModifiedAt = fi.ModTime()
	e.Size = uint32(fi.Size())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = ctime(st)
		e.Dev = uint32(st.Dev)
		e.Inode = uint32(st.Ino)
		e.UID = st.Uid
		e.GID = st.Gid
	}
}

func inodeOf(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// openNoFollow opens a regular file for reading without following a
// symlink that replaced it since lstat.
func openNoFollow(p string) (*os.File, error) {
	return os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}
