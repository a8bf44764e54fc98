package statusline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"time"
)

// FileName is the document's name inside the state directory (<repo>/.git/memd/).
const FileName = "status.json"

// Dir is the state directory of a repo (docs/ARCHITECTURE.md §6). Paths here use package path, not
// path/filepath: memd runs on Unix only, and path/filepath would make the fast path of
// `memd status` wait for many other packages' inits (see internal/fastpath).
func Dir(repo string) string { return path.Join(repo, ".git", "memd") }

// Write publishes the document: status.<format> for every line format, then status.json,
// each written atomically (temp file, fsync, rename), mode 0600, in a 0700 directory. A
// reader sees the old file or the new one, never a torn one.
//
// Every file's modification time is set to the document's updated_at before it is renamed
// into place. That ties the line files to the status.json of the same publish: a reader that
// finds status.<format>, status.json and updated_at all agreeing knows the line is what
// rendering that document gives (the fast path of `memd status`, internal/fastpath, relies
// on it), while a status.json written by anything else will not carry its own time.
func Write(stateDir string, d Document) error {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("status dir %s: %w", stateDir, err)
	}
	// MkdirAll leaves an existing directory's mode alone; the state is private either way.
	if err := os.Chmod(stateDir, 0o700); err != nil {
		return fmt.Errorf("status dir %s: %w", stateDir, err)
	}
	// The line files are rendered as of the document's own time: a reader that cats them
	// gets what the daemon said then.
	alive := func(int) bool { return true }
	for _, f := range LineFormats {
		s, err := Render(&d, f, d.UpdatedAt, alive)
		if err != nil {
			return fmt.Errorf("render status.%s: %w", f, err)
		}
		if s != "" && s[len(s)-1] != '\n' {
			s += "\n"
		}
		// Renamed into place but not fsynced: a line file is a cache of status.json, and
		// eight fsyncs per publish would cost the owner tens of milliseconds on a slow disk.
		if err := writeAtomic(path.Join(stateDir, "status."+f), []byte(s), false, d.UpdatedAt); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	return writeAtomic(path.Join(stateDir, FileName), append(b, '\n'), true, d.UpdatedAt)
}

// Read loads status.json from the state directory. A missing file is ErrNoDocument; one that
// does not parse or has another version is ErrBadDocument, naming the file.
func Read(stateDir string) (*Document, error) {
	p := path.Join(stateDir, FileName)
	b, err := os.ReadFile(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", p, ErrNoDocument)
		}
		return nil, err // an *fs.PathError: it names the operation and the file already
	}
	return Parse(p, b)
}

// Parse decodes a status document; name is used in errors.
func Parse(name string, b []byte) (*Document, error) {
	var d Document
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", name, ErrBadDocument, err)
	}
	if d.Version != Version {
		return nil, fmt.Errorf("%s: %w: version %d (this memd reads version %d)", name, ErrBadDocument, d.Version, Version)
	}
	return &d, nil
}

// WriteFileAtomic writes data to path via a temp file in the same directory: write, fsync,
// chmod 0600, rename, then fsync the directory so the rename survives a crash.
func WriteFileAtomic(file string, data []byte) error {
	return writeAtomic(file, data, true, time.Time{})
}

// writeAtomic is WriteFileAtomic; durable false skips both fsyncs (still atomic for readers),
// and a non-zero mtime is set on the file before it appears under its name.
func writeAtomic(file string, data []byte, durable bool, mtime time.Time) (err error) {
	dir := path.Dir(file)
	tmp, err := os.CreateTemp(dir, "."+path.Base(file)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err = tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if durable {
		if err = tmp.Sync(); err != nil {
			return fmt.Errorf("write %s: fsync: %w", file, err)
		}
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if !mtime.IsZero() {
		if err = os.Chtimes(tmp.Name(), mtime, mtime); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	if err = os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if !durable {
		return nil
	}
	if df, derr := os.Open(dir); derr == nil {
		_ = df.Sync() // best effort: not every filesystem can sync a directory
		_ = df.Close()
	}
	return nil
}

// ReadAt is a convenience for readers: Read of the repo's state directory.
func ReadAt(repo string) (*Document, error) { return Read(Dir(repo)) }
