package service

import (
	"io"
	"log/slog"
	"testing"
)

// The journal handler formats through slog's text handler plus one copy; these measure
// what that costs per line against slog's text handler writing straight out.
//
//	go test -run '^$' -bench . -benchmem ./service/
func BenchmarkJournalLine(b *testing.B) {
	b.Setenv("JOURNAL_STREAM", "1:1")
	benchLog(b, NewLogger(io.Discard, slog.LevelInfo, "text"))
}

func BenchmarkTextLine(b *testing.B) {
	b.Setenv("JOURNAL_STREAM", "")
	benchLog(b, NewLogger(io.Discard, slog.LevelInfo, "text"))
}

func benchLog(b *testing.B, log *slog.Logger) {
	log = log.With("repo", "/home/u/memory")
	b.ReportAllocs()
	for b.Loop() {
		log.Info("committed", "added", 2, "modified", 1, "paths", "areas/inbox/20261130-x.html")
	}
}
