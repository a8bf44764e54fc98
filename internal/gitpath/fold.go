package gitpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// FS says how a file system compares names, as git's core.ignorecase and
// core.precomposeunicode record it at clone time: two names a byte-wise
// file system keeps apart may be one file elsewhere.
type FS struct {
	// IgnoreCase: "A.html" and "a.html" are one file (macOS's APFS and HFS+ by
	// default, Windows, FAT, ext4 with casefold).
	IgnoreCase bool
	// Normalizes: a composed "é" (U+00E9) and a decomposed "e" + U+0301 are
	// one file (APFS, HFS+).
	Normalizes bool
}

// ErrCollision is a tree entry whose name is another entry's on a file
// system that folds case or normalises Unicode.
var ErrCollision = errors.New("names one file with another entry")

var folder = cases.Fold()

// Key is the name as fs compares it: case-folded when it ignores case, NFC
// when it normalises. Two entries of one tree with the same Key land on one
// file there.
func (fs FS) Key(name string) string {
	if fs.Normalizes {
		name = norm.NFC.String(name)
	}
	if fs.IgnoreCase {
		name = norm.NFC.String(folder.String(name))
	}
	return name
}

// Everywhere is the strictest comparison, macOS's: the names a clone on a Mac
// could not keep apart.
var Everywhere = FS{IgnoreCase: true, Normalizes: true}

// Collision explains why name and other collide under fs (nil when they do
// not, or are the same bytes: a duplicate is refused on its own).
func (fs FS) Collision(name, other string) error {
	if name == other || fs.Key(name) != fs.Key(other) {
		return nil
	}
	what := "differs only in case from"
	if norm.NFC.String(name) == norm.NFC.String(other) {
		what = "is the same Unicode text (composed vs decomposed) as"
	}
	return fmt.Errorf("%w: %s %q", ErrCollision, what, other)
}

// Probe finds out how the file system holding dir compares names, the way git
// does at init (probing a file): it creates a temp file and looks its name up
// in another case and in another Unicode form. The probe files are removed.
func Probe(dir string) (FS, error) {
	base := ".memd-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(os.Getpid())
	var out FS
	lower := filepath.Join(dir, base+"-a.tmp")
	f, err := os.OpenFile(lower, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return FS{}, fmt.Errorf("probe %s: %w", dir, err)
	}
	f.Close()
	defer os.Remove(lower)
	if _, err := os.Lstat(filepath.Join(dir, base+"-A.tmp")); err == nil {
		out.IgnoreCase = true
	}
	composed := filepath.Join(dir, base+"-\u00e9.tmp")
	if f, err := os.OpenFile(composed, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err == nil {
		f.Close()
		defer os.Remove(composed)
		if _, err := os.Lstat(filepath.Join(dir, base+"-e\u0301.tmp")); err == nil {
			out.Normalizes = true
		}
	}
	return out, nil
}
