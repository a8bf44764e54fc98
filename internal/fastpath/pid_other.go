//go:build !unix

package fastpath

func pidAlive(pid int) bool { return pid > 0 }
