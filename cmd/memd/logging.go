package main

import (
	"io"
	"log/slog"

	"github.com/memd-dev/memd"
)

// newLogger is the default logger for one-shot commands; `memd run` replaces it with the
// service-aware one (journald prefixes) from the service package.
func newLogger(w io.Writer, c memd.LogConfig) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: lvl}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
