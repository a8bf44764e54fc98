//go:build !linux && !darwin

package gitrepo

import (
	"io/fs"
	"os"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// fillStat records what portable stat data there is; git re-checks the
// content of entries whose other fields are zero, which is slower but
// correct.
func fillStat(e *index.Entry, fi fs.FileInfo) {
	e.ModifiedAt = fi.ModTime()
	e.Size = uint32(fi.Size())
}

func inodeOf(fs.FileInfo) uint64 { return 0 }

// openNoFollow: no O_NOFOLLOW here; the lstat just before is the guard.
func openNoFollow(p string) (*os.File, error) { return os.Open(p) }
