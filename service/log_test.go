package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJournalLines(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "8:12345")
	var buf bytes.Buffer
	lv := NewLevelVar("debug")
	log := NewLogger(&buf, lv, "json") // the journal wins over the format
	log.Debug("scan", "dirs", 3)
	log.Info("committed", "files", 2, "msg2", "two words")
	log.Warn("offline", slog.Group("remote", "name", "origin"))
	log.With("job", "sync").Error("push failed", "err", errors.New("no route"))
	log.Info("line one\nline two")
	want := []string{
		"<7>scan dirs=3",
		`<6>committed files=2 msg2="two words"`,
		"<4>offline remote.name=origin",
		`<3>push failed job=sync err="no route"`,
		`<6>line one\nline two`,
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("journal lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The level var filters from then on (SIGHUP reload).
	buf.Reset()
	lv.Set(ParseLevel("warn"))
	log.Info("hidden")
	log.Warn("shown")
	if buf.String() != "<4>shown\n" {
		t.Fatalf("after level warn: %q", buf.String())
	}
}

func TestTextAndJSONOutsideJournal(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "")
	var buf bytes.Buffer
	NewLogger(&buf, NewLevelVar("info"), "text").Info("hello", "k", "v")
	if s := buf.String(); !strings.HasPrefix(s, "time=") || !strings.Contains(s, "level=INFO msg=hello k=v") {
		t.Fatalf("text: %q", s)
	}
	buf.Reset()
	NewLogger(&buf, NewLevelVar("info"), "json").Debug("not shown")
	NewLogger(&buf, nil, "json").Warn("hello", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("json: %q: %v", buf.String(), err)
	}
	if rec["msg"] != "hello" || rec["level"] != "WARN" || rec["k"] != float64(1) {
		t.Fatalf("json record %v", rec)
	}
}

// JOURNAL_STREAM names the journal's socket by device and inode; a file that is not it
// (a terminal in a shell started from a service) gets plain slog output.
func TestUnderJournaldChecksTheFile(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dev, ino, ok := fileDevIno(f)
	if !ok {
		t.Skip("no dev/ino on this platform")
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", dev, ino))
	if !UnderJournald(f) {
		t.Error("matching dev:ino not recognised")
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", dev, ino+1))
	if UnderJournald(f) {
		t.Error("another inode taken for the journal")
	}
	t.Setenv("JOURNAL_STREAM", "garbage")
	if UnderJournald(f) {
		t.Error("garbage JOURNAL_STREAM taken for the journal")
	}
	if !UnderJournald(&bytes.Buffer{}) {
		t.Error("a non-file writer should trust JOURNAL_STREAM being set")
	}
	t.Setenv("JOURNAL_STREAM", "")
	if UnderJournald(&bytes.Buffer{}) {
		t.Error("journal without JOURNAL_STREAM")
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn,
		"error": slog.LevelError, "ERROR": slog.LevelError, "": slog.LevelInfo, "loud": slog.LevelInfo,
	} {
		if got := ParseLevel(in); got != want {
			t.Errorf("ParseLevel(%q) = %v, want %v", in, got, want)
		}
	}
	for l, want := range map[slog.Level]int{slog.LevelDebug: 7, slog.LevelInfo: 6, slog.LevelWarn: 4, slog.LevelError: 3, slog.LevelError + 4: 3} {
		if got := JournalPriority(l); got != want {
			t.Errorf("JournalPriority(%v) = %d, want %d", l, got, want)
		}
	}
}
