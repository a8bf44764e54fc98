// Package boundedfile reads a small file memd itself wrote (status.json, a status line)
// without trusting what is at its name: a FIFO must not hang the reader, a symlink (to
// /dev/zero, to anywhere) is not followed, and no more than a limit is read.
//
// It imports only what os already imports, so internal/fastpath can use it and still run
// its init before the heavy packages (see that package's comment); its path sorts before
// internal/fastpath for the same reason.
package boundedfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular: the name is a symlink, a FIFO, a device, a directory or a socket.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge: the file is over the limit.
var ErrTooLarge = errors.New("larger than the limit")

// Error says what is wrong with the file at Path, naming it (as an *fs.PathError would).
type Error struct {
	Path   string
	What   string // "a named pipe", "over 1 MiB", ...
	Reason error  // ErrNotRegular or ErrTooLarge
}

func (e *Error) Error() string { return e.Path + ": " + e.Reason.Error() + " (" + e.What + ")" }
func (e *Error) Unwrap() error { return e.Reason }

// Read returns the content of the regular file at name, at most limit bytes, and its
// FileInfo (from the open file). It opens with O_NONBLOCK|O_NOFOLLOW, so it returns at
// once whatever is there; a missing file is an error wrapping fs.ErrNotExist. limitText
// names the limit in messages ("1 MiB").
func Read(name string, limit int64, limitText string) ([]byte, fs.FileInfo, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, nil, &Error{Path: name, What: "a symbolic link", Reason: ErrNotRegular}
		}
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, &Error{Path: name, What: kind(fi.Mode()), Reason: ErrNotRegular}
	}
	if fi.Size() > limit {
		return nil, fi, &Error{Path: name, What: "over " + limitText, Reason: ErrTooLarge}
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fi, err
	}
	if int64(len(b)) > limit {
		return nil, fi, &Error{Path: name, What: "grew over " + limitText + " while read", Reason: ErrTooLarge}
	}
	return b, fi, nil
}

func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "mode " + m.String()
}
