package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// DeletesFile is the mass deletion brake's window (sync/gitrepo massdelete.go): the memory
// files memd's commits and merges deleted lately, by side, and since when a deletion is
// held. It lives here so a restart in the middle of an `rm -r` does not start the count
// over.
const DeletesFile = "deletes.json"

// DeleteWindow is what DeletesFile holds.
type DeleteWindow struct {
	Local  DeleteSide `json:"local"`
	Remote DeleteSide `json:"remote"`
}

// DeleteSide is one side's recent deletions and its hold.
type DeleteSide struct {
	Marks []DeleteMark `json:"marks,omitempty"`
	// HeldAt is when the brake began holding this side's deletion (zero: none held).
	HeldAt time.Time `json:"held_at,omitzero"`
}

// DeleteMark is one commit or merge that deleted N memory files (renames not counted).
type DeleteMark struct {
	At time.Time `json:"at"`
	N  int       `json:"n"`
}

// ReadDeletes returns the brake's window; none recorded is the zero window. A file that is
// not a window is an error naming it.
func (d *Dir) ReadDeletes() (DeleteWindow, error) {
	var w DeleteWindow
	b, err := d.ReadFile(DeletesFile)
	if errors.Is(err, fs.ErrNotExist) {
		return w, nil
	}
	if err != nil {
		return w, err
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return DeleteWindow{}, fmt.Errorf("%s: %w", d.Rel(DeletesFile), err)
	}
	return w, nil
}

// WriteDeletes records the brake's window atomically. Not fsynced: it is written on the
// commit path, and what it must survive is a restart of memd, not a power cut (then the
// window starts over, as it did before there was one).
func (d *Dir) WriteDeletes(w DeleteWindow) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return d.WriteCache(DeletesFile, 0o600, time.Time{}, func(wr io.Writer) error {
		_, err := wr.Write(append(b, '\n'))
		return err
	})
}
