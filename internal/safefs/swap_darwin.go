package safefs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameIn renames from to to inside the directory dirfd: exchange swaps the
// two names atomically (both must exist), otherwise the rename fails with
// EEXIST when to exists. errNoSwap: the file system has neither.
func renameIn(dirfd int, from, to string, exchange bool) error {
	flags := uint32(unix.RENAME_EXCL)
	if exchange {
		flags = unix.RENAME_SWAP
	}
	err := unix.RenameatxNp(dirfd, from, dirfd, to, flags)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return errNoSwap
	}
	return err
}
