package gitstore

import (
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// revWriteMin is how many objects a pack holds before its order is written to a .rev: below
// it the sort costs a few milliseconds, about what the file would.
var revWriteMin = 1 << 16

// writeRev writes the pack's reverse index (order: positions in pack order) beside its .idx,
// the file `git index-pack --rev-index` writes and every git since 2.41 writes with each
// pack: so that the next process maps the order FindHash needs instead of sorting the pack's
// objects again (on a 200,000-commit history, a million objects, most of what `memd
// restore` cost after its walk: issue 48). Git 2.31 on reads it and deletes it with its pack.
// The file is synced before it is renamed into place, as a torn .rev would fail every read
// of the pack; an existing one is left alone, and a pack gone meanwhile takes it away again.
func (idx *PackIndex) writeRev(order []uint32) error {
	base := strings.TrimSuffix(idx.name, ".idx")
	path := base + ".rev"
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		return err // there already (another process wrote it), or not ours to judge
	}
	b := make([]byte, 12, 12+4*len(order)+2*hashLen)
	copy(b, "RIDX")
	binary.BigEndian.PutUint32(b[4:], 1) // version
	binary.BigEndian.PutUint32(b[8:], 1) // SHA-1
	for _, p := range order {
		b = binary.BigEndian.AppendUint32(b, p)
	}
	b = append(b, idx.pack[:]...)
	sum := sha1.Sum(b)
	b = append(b, sum[:]...)
	f, err := os.CreateTemp(filepath.Dir(path), "tmp_rev_") // git's prune clears what a crash leaves
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o444) // read-only, as git leaves its pack files
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := os.Stat(base + ".pack"); errors.Is(err, os.ErrNotExist) {
		_ = os.Remove(path) // repacked away while it was written: no orphan beside nothing
	}
	return nil
}
