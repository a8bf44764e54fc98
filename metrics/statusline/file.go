package statusline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/boundedfile"
	"github.com/memd-dev/memd/internal/statedir"
)

// FileName is the document's name inside the state directory (<repo>/.git/memd/).
const FileName = "status.json"

// Dir is the state directory of a repo (docs/ARCHITECTURE.md §6): memd.StateDir, inside the
// git dir as git resolves it (a submodule's or a linked worktree's own). Paths here use
// package path, not path/filepath: memd runs on Unix only.
func Dir(repo string) string { return memd.StateDir(repo) }

// Write publishes the document: status.<format> for every line format, then status.json,
// each written atomically (temp file, rename), mode 0600, in a 0700 directory. A reader sees
// the old file or the new one, never a torn one. None is fsynced: they say what a running
// daemon does, which the next publish (or the next start) writes again, and an fsync of
// status.json on every publish held the owner goroutine 5–20 ms on a busy disk, between
// the jobs of a sync storm. A file that already holds the text only gets its time set
// (statedir.RefreshCache).
//
// Every file's modification time is set to the document's updated_at before it is renamed
// into place. That ties the line files to the status.json of the same publish: a reader that
// finds status.<format>, status.json and updated_at all agreeing knows the line is what
// rendering that document gives (the fast path of `memd status`, internal/fastpath, relies
// on it), while a status.json written by anything else will not carry its own time.
//
// Everything goes through internal/statedir: a symlinked .git/memd is refused, and a symlink
// at a file's name is replaced by the rename, never written through.
func Write(stateDir string, d Document) error {
	sd, err := statedir.Create(stateDir)
	if err != nil {
		return err
	}
	defer sd.Close()
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
		if err := sd.RefreshCache("status."+f, 0o600, d.UpdatedAt, []byte(s)); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return fmt.Errorf("encode status: %w", err)
	}
	return sd.RefreshCache(FileName, 0o600, d.UpdatedAt, append(b, '\n'))
}

// MaxDocument bounds what Read reads of status.json; the daemon's is a few KiB.
const MaxDocument = 1 << 20

// Read loads status.json from the state directory. A missing file is ErrNoDocument; one that
// does not parse or has another version is ErrBadDocument, naming the file. A status.json
// that is not a regular file (a FIFO, a symlink to /dev/zero) or is over MaxDocument is an
// error at once: it is opened without blocking or following a link, and read up to the cap.
func Read(stateDir string) (*Document, error) {
	p := path.Join(stateDir, FileName)
	b, _, err := boundedfile.Read(p, MaxDocument, "1 MiB")
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

// ReadAt is a convenience for readers: Read of the repo's state directory.
func ReadAt(repo string) (*Document, error) { return Read(Dir(repo)) }
