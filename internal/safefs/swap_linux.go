package safefs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// renameIn renames from to to inside the directory dirfd: exchange swaps the
// two names atomically (both must exist), otherwise the rename fails with
// EEXIST when to exists. errNoSwap: the file system (or kernel) has neither.
func renameIn(dirfd int, from, to string, exchange bool) error {
	flags := uint(unix.RENAME_NOREPLACE)
	if exchange {
		flags = unix.RENAME_EXCHANGE
	}
	err := unix.Renameat2(dirfd, from, dirfd, to, flags)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return errNoSwap
	}
	return err
}
