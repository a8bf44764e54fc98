package gitrepair

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/memd-dev/memd/internal/workpool"
	"github.com/memd-dev/memd/sync/gitstore"
)

// fsyncWorkers: the filesystem folds concurrent fsyncs into few journal commits.
const fsyncWorkers = 16

// SyncTree fsyncs every regular file and directory under root, and root's parent (which
// holds root's own entry), so what was written there survives a power cut: `memd init` calls
// it on the repo it made before it says it is done. Symlinks are not followed.
func SyncTree(root string) error {
	var names []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Type().IsRegular() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	names = append(names, filepath.Dir(root))
	if err := workpool.Each(len(names), fsyncWorkers, func(i int) error { return fsyncPath(names[i]) }); err != nil {
		return fmt.Errorf("sync %s: %w", root, err)
	}
	return nil
}

// SyncPaths fsyncs the given files or directories (a repair's writes and their folders).
func SyncPaths(names []string) error {
	return workpool.Each(len(names), fsyncWorkers, func(i int) error { return fsyncPath(names[i]) })
}

// fsyncPath is gitstore.FsyncPath where a name gone meanwhile is not an error.
func fsyncPath(name string) error {
	if err := gitstore.FsyncPath(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("fsync %w", err)
	}
	return nil
}
