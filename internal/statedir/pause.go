package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"
)

// Files in the state directory that one-shot commands (memd pause, resume, sleep, sync) and
// the page write for the running daemon (docs/ARCHITECTURE.md §11).
const (
	// PauseFile holds the pause `memd pause` asked for; it survives restarts.
	PauseFile = "pause.json"
	// AllowDeletesFile is `memd resume --allow-deletes`: the held mass deletion may go
	// through once; the daemon removes it when it has.
	AllowDeletesFile = "allow-deletes"
	// KickFile is touched after a one-shot command changed something the daemon shows, so the
	// running daemon (which watches the state directory) re-reads it within a second.
	KickFile = "kick"
)

// Pause is a pause asked for by a person. Until zero: until `memd resume`. CommitOnly: keep
// committing, stop syncing.
type Pause struct {
	Reason     string    `json:"reason"`
	Until      time.Time `json:"until,omitzero"`
	CommitOnly bool      `json:"commit_only"`
	At         time.Time `json:"at"`
}

// Active reports whether the pause still holds at now.
func (p *Pause) Active(now time.Time) bool {
	return p != nil && (p.Until.IsZero() || now.Before(p.Until))
}

// ReadPause returns the pause asked for, or nil when there is none. A file that cannot be
// read as a pause is an error naming it (and is left for the user to see).
func (d *Dir) ReadPause() (*Pause, error) {
	b, err := d.ReadFile(PauseFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Pause
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Rel(PauseFile), err)
	}
	return &p, nil
}

// WritePause records p atomically and durably.
func (d *Dir) WritePause(p Pause) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return d.WriteFile(PauseFile, append(b, '\n'), 0o600)
}

// ClearPause ends a pause; none is no error.
func (d *Dir) ClearPause() error { return d.removeIfThere(PauseFile) }

// AllowDeletes records that the held mass deletion may go through once.
func (d *Dir) AllowDeletes(now time.Time) error {
	return d.WriteFile(AllowDeletesFile, []byte(now.UTC().Format(time.RFC3339)+"\n"), 0o600)
}

// DeletesAllowed reports whether AllowDeletes was asked for (and not yet taken).
func (d *Dir) DeletesAllowed() bool {
	_, err := d.ReadFile(AllowDeletesFile)
	return err == nil
}

// TakeAllowDeletes removes the permission once the deletion went through.
func (d *Dir) TakeAllowDeletes() error { return d.removeIfThere(AllowDeletesFile) }

// Kick tells a running daemon to re-read what one-shot commands wrote.
func (d *Dir) Kick(now time.Time) error {
	return d.WriteFile(KickFile, []byte(strconv.FormatInt(now.UnixNano(), 10)+"\n"), 0o600)
}

func (d *Dir) removeIfThere(name string) error {
	if err := d.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
