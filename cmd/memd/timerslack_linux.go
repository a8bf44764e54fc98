package main

import (
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// runTimerSlack is the kernel timer slack `memd run` asks for all its threads (prctl
// PR_SET_TIMERSLACK; systemd's TimerSlackNSec= is the same setting): the Go runtime's
// sysmon thread sleeps in 20 µs steps while any goroutine runs, and with Linux's default
// slack of 50 µs each step is a wakeup, ~50 for one look at the remote on a loaded machine
// (issue 29: an idle daemon at most 1 a second; measured with bench/liveremote, sysmon's
// switches fell from 163 to 35 a minute at 5 ms). memd's timers are seconds long: 5 ms late
// is nothing to them.
const runTimerSlack = 5_000_000 // ns

// relaxTimers re-executes memd with runTimerSlack when the process runs with a smaller one:
// a thread's slack is set only for itself and inherited by the threads it creates, and the
// runtime made sysmon before main, so only a fresh exec (which keeps the caller's slack)
// reaches every thread. It returns (doing nothing) when the slack is already as large, or
// when either call fails.
func relaxTimers() {
	cur, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil || cur >= runTimerSlack {
		return
	}
	runtime.LockOSThread() // the prctl and the exec on one thread
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, runTimerSlack, 0, 0, 0); err != nil {
		return
	}
	_ = syscall.Exec("/proc/self/exe", os.Args, os.Environ()) // returns only on failure
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(cur), 0, 0, 0)
}
