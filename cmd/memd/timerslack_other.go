//go:build !linux

package main

// relaxTimers: only Linux has a timer slack to widen (timerslack_linux.go).
func relaxTimers() {}
