package statedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"time"
)

// DeletesFile is the mass deletion brake's window (sync/gitrepo massdelete.go): the memory
// files memd's commits and merges deleted lately, by side, and since when a deletion is
// held. It lives here so a restart in the middle of an `rm -r` does not start the count
// over.
const DeletesFile = "deletes.json"

// DeletesLockFile serialises DeletesFile's read-modify-write between processes (UpdateDeletes):
// a flock on a file of its own, since DeletesFile is replaced by a rename on every write.
const DeletesLockFile = "deletes.lock"

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

// UpdateDeletes is the brake's read-modify-write of its window, whole under an exclusive
// flock on DeletesLockFile, so that `memd run` and a one-shot `memd sync` on the same repo
// never lose each other's marks (each reading the window, then the later write dropping
// what the other added). update gets the window read (the zero window and the error when
// the file is not one) and says whether to write it back. The kernel drops the flock with
// its process: a SIGKILL leaves no lock behind.
func (d *Dir) UpdateDeletes(update func(w *DeleteWindow, readErr error) (write bool)) error {
	if err := d.Ensure(); err != nil {
		return err
	}
	f, err := d.OpenInPlace(DeletesLockFile, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", d.Rel(DeletesLockFile), err)
	}
	defer func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }()
	w, rerr := d.ReadDeletes()
	if !update(&w, rerr) {
		return nil
	}
	return d.WriteDeletes(w)
}
