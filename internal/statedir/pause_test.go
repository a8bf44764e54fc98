package statedir

import (
	"testing"
	"time"

	"github.com/memd-dev/memd"
)

func TestPauseRoundTrip(t *testing.T) {
	repo := t.TempDir()
	d, err := Create(memd.StateDir(repo))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if p, err := d.ReadPause(); p != nil || err != nil {
		t.Fatalf("no pause yet: %v %v", p, err)
	}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	want := Pause{Reason: "travelling", Until: now.Add(time.Hour), CommitOnly: true, At: now}
	if err := d.WritePause(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadPause()
	if err != nil || got == nil || *got != want {
		t.Fatalf("read %+v %v, want %+v", got, err, want)
	}
	if !got.Active(now) || got.Active(now.Add(2*time.Hour)) {
		t.Error("Active misjudges the end")
	}
	if err := d.ClearPause(); err != nil {
		t.Fatal(err)
	}
	if err := d.ClearPause(); err != nil {
		t.Fatal("a second clear:", err)
	}
	if d.DeletesAllowed() {
		t.Fatal("allowed before asked")
	}
	if err := d.AllowDeletes(now); err != nil || !d.DeletesAllowed() {
		t.Fatal("AllowDeletes", err)
	}
	if err := d.TakeAllowDeletes(); err != nil || d.DeletesAllowed() {
		t.Fatal("TakeAllowDeletes", err)
	}
	if err := d.WriteFile(PauseFile, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadPause(); err == nil {
		t.Fatal("a broken pause file read as none")
	}
}
