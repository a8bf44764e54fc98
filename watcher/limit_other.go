//go:build !(darwin || freebsd || netbsd || openbsd || dragonfly)

package watcher

import "log/slog"

// raiseOpenFileLimit: inotify watches cost no file descriptors, so nothing to do here.
func raiseOpenFileLimit(*slog.Logger) {}
