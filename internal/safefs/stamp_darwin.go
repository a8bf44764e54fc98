package safefs

import "syscall"

func stampSys(st *syscall.Stat_t) (dev, ino uint64, ctime int64) {
	return uint64(st.Dev), st.Ino, st.Ctimespec.Nano()
}
