package sleep

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

func TestValidateSchedule(t *testing.T) {
	for _, ok := range []string{"0 3 * * *", "@daily", "@every 1h", "CRON_TZ=Europe/Berlin 0 3 * * *", "*/5 * * * 1-5"} {
		if err := ValidateSchedule(ok); err != nil {
			t.Errorf("ValidateSchedule(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "0 3 * *", "61 * * * *", "@sometimes", "0 3 * * * *", "CRON_TZ=Nowhere/Land 0 3 * * *"} {
		err := ValidateSchedule(bad)
		if err == nil {
			t.Errorf("ValidateSchedule(%q) = nil, want an error", bad)
			continue
		}
		if !strings.Contains(err.Error(), "schedule \""+bad+"\"") && !strings.Contains(err.Error(), bad) {
			t.Errorf("error %q does not name the spec %q", err, bad)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPrevSlot(t *testing.T) {
	s, err := NewScheduler("0 3 * * *", t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"2026-11-30T03:00:00Z": "2026-11-30T03:00:00Z", // exactly at the slot
		"2026-11-30T02:59:59Z": "2026-11-29T03:00:00Z",
		"2026-11-30T14:00:00Z": "2026-11-30T03:00:00Z",
	}
	for now, want := range cases {
		if got := s.Prev(mustTime(t, now)); !got.Equal(mustTime(t, want)) {
			t.Errorf("Prev(%s) = %s, want %s", now, got, want)
		}
	}
	y, _ := NewScheduler("@yearly", t.TempDir(), nil, nil)
	if got := y.Prev(mustTime(t, "2026-11-30T14:00:00Z")); !got.Equal(mustTime(t, "2026-01-01T00:00:00Z")) {
		t.Errorf("yearly Prev = %s", got)
	}
	m, _ := NewScheduler("* * * * *", t.TempDir(), nil, nil)
	if got := m.Prev(mustTime(t, "2026-11-30T14:00:30Z")); !got.Equal(mustTime(t, "2026-11-30T14:00:00Z")) {
		t.Errorf("minutely Prev = %s", got)
	}
}

// Three nights missed (machine off) make exactly one catch-up run, for the latest slot.
func TestCatchUpAfterThreeMissedNightsRunsOnce(t *testing.T) {
	dir := t.TempDir()
	if err := MarkDone(dir, "expire", "20261126T030000Z", mustTime(t, "2026-11-26T03:00:05Z")); err != nil {
		t.Fatal(err)
	}
	for _, ph := range []memd.Phase{"arcs", "archive", "tidy"} {
		if err := MarkDone(dir, ph, "20261126T030000Z", mustTime(t, "2026-11-26T03:00:09Z")); err != nil {
			t.Fatal(err)
		}
	}
	now := mustTime(t, "2026-11-30T09:15:00Z") // missed 27th, 28th, 29th and 30th 03:00
	var mu sync.Mutex
	var slots []time.Time
	s, err := NewScheduler("0 3 * * *", dir, func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}, func(slot time.Time) {
		mu.Lock()
		slots = append(slots, slot)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	slot, ok := s.Due(now)
	if !ok || !slot.Equal(mustTime(t, "2026-11-30T03:00:00Z")) {
		t.Fatalf("Due = %s, %v; want the 30th 03:00 slot", slot, ok)
	}
	// The minute checks keep seeing it due until the run is recorded, but fire it once.
	s.Check()
	s.Check()
	s.Check()
	mu.Lock()
	if len(slots) != 1 {
		t.Fatalf("triggered %d times (%v), want once", len(slots), slots)
	}
	mu.Unlock()
	// The owner runs it and records success; then nothing is due until tomorrow 03:00.
	for _, ph := range []memd.Phase{"expire", "arcs", "archive", "tidy"} {
		if err := s.MarkDone(ph, now); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.Due(now.Add(time.Hour)); ok {
		t.Fatal("still due after the catch-up run was recorded")
	}
	if _, ok := s.Due(mustTime(t, "2026-12-01T02:59:00Z")); ok {
		t.Fatal("due before the next slot")
	}
	if slot, ok := s.Due(mustTime(t, "2026-12-01T03:00:00Z")); !ok || !slot.Equal(mustTime(t, "2026-12-01T03:00:00Z")) {
		t.Fatalf("next night: Due = %s, %v", slot, ok)
	}
	st, err := ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Phases["tidy"].Run != "20261130T030000Z" {
		t.Errorf("tidy run id = %q", st.Phases["tidy"].Run)
	}
	fi, err := os.Stat(filepath.Join(dir, StateFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("sleep.json mode %v, want 0600", fi.Mode().Perm())
	}
}

// One phase that failed last night (no success recorded) makes the run due even if the
// others succeeded.
func TestDueWhenOnePhaseMissing(t *testing.T) {
	dir := t.TempDir()
	at := mustTime(t, "2026-11-30T03:00:10Z")
	for _, ph := range []memd.Phase{"expire", "arcs", "tidy"} {
		if err := MarkDone(dir, ph, "x", at); err != nil {
			t.Fatal(err)
		}
	}
	if err := MarkDone(dir, "archive", "x", at.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	s, _ := NewScheduler("0 3 * * *", dir, nil, nil)
	if _, ok := s.Due(at.Add(time.Hour)); !ok {
		t.Fatal("archive last ran yesterday before 03:00 today: want due")
	}
}

// A repo that never slept gets a baseline and is caught up once the next slot has passed.
func TestFirstStartBaseline(t *testing.T) {
	dir := t.TempDir()
	s, _ := NewScheduler("0 3 * * *", dir, nil, nil)
	start := mustTime(t, "2026-11-30T10:00:00Z")
	if _, ok := s.Due(start); ok {
		t.Fatal("a fresh repo must not be due at once")
	}
	if _, ok := s.Due(start.Add(10 * time.Hour)); ok {
		t.Fatal("due before 03:00")
	}
	if slot, ok := s.Due(mustTime(t, "2026-12-02T08:00:00Z")); !ok || !slot.Equal(mustTime(t, "2026-12-02T03:00:00Z")) {
		t.Fatalf("Due after two missed nights = %s, %v", slot, ok)
	}
}

func TestCatchUpOff(t *testing.T) {
	dir := t.TempDir()
	if err := MarkDone(dir, "expire", "x", mustTime(t, "2026-11-20T03:00:00Z")); err != nil {
		t.Fatal(err)
	}
	fired := 0
	s, _ := NewScheduler("0 3 * * *", dir, func() time.Time { return mustTime(t, "2026-11-30T12:00:00Z") }, func(time.Time) { fired++ })
	s.CatchUp = false
	s.Check()
	if fired != 0 {
		t.Fatal("catch-up fired with catch_up off")
	}
}

// Start runs the catch-up check at once and Stop ends the loops.
func TestStartStop(t *testing.T) {
	dir := t.TempDir()
	if err := MarkDone(dir, "expire", "x", mustTime(t, "2026-11-20T03:00:00Z")); err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 4)
	s, _ := NewScheduler("0 3 * * *", dir, func() time.Time { return mustTime(t, "2026-11-30T12:00:00Z") }, func(slot time.Time) { got <- slot })
	s.CheckEvery = 10 * time.Millisecond
	s.Start()
	defer s.Stop()
	select {
	case slot := <-got:
		if !slot.Equal(mustTime(t, "2026-11-30T03:00:00Z")) {
			t.Errorf("slot %s", slot)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no catch-up trigger after Start")
	}
	s.Stop()
	// Several further checks ran (10ms apart) but the same slot never fired twice.
	if len(got) != 0 {
		t.Fatalf("slot fired again: %d more", len(got))
	}
}

func TestRunID(t *testing.T) {
	if got := RunID(mustTime(t, "2026-11-30T03:00:00+01:00")); got != "20261130T020000Z" {
		t.Errorf("RunID = %s", got)
	}
}

func TestCorruptStateIsReplaced(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, StateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(dir); err == nil || !strings.Contains(err.Error(), StateFile) {
		t.Fatalf("ReadState on junk: %v, want an error naming the file", err)
	}
	if err := MarkDone(dir, "arcs", "r", mustTime(t, "2026-11-30T03:00:00Z")); err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(dir)
	if err != nil || st.Phases["arcs"].Run != "r" {
		t.Fatalf("after MarkDone: %+v %v", st, err)
	}
}

func TestSetSpec(t *testing.T) {
	s, err := NewScheduler("0 3 * * *", t.TempDir(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer s.Stop()
	if err := s.SetSpec("every night"); err == nil {
		t.Fatal("bad spec accepted")
	}
	if s.Spec() != "0 3 * * *" {
		t.Fatal("bad spec replaced the old one")
	}
	if err := s.SetSpec("30 4 * * *"); err != nil {
		t.Fatal(err)
	}
	if got := s.Next(mustTime(t, "2026-11-30T04:00:00Z")); !got.Equal(mustTime(t, "2026-11-30T04:30:00Z")) {
		t.Fatalf("Next after SetSpec = %s", got)
	}
}
