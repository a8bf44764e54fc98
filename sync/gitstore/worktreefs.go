package gitstore

import (
	"os"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// packedRefsTemp is the prefix of go-git's temp file for a rewrite of packed-refs
// (dotgit's tmpPackedRefsPrefix), made at the git dir's top and renamed over packed-refs.
const packedRefsTemp = "._packed-refs"

// worktreeFS is go-git's RepositoryFilesystem (a linked worktree's git dir over its common
// dir) with packed-refs rewrites kept in the common dir: go-git makes the temp file at the
// top of the git dir, which RepositoryFilesystem puts in the worktree's own, and renames it
// from there, so a removed packed ref (a remote branch that went away) would be written to
// a packed-refs of the worktree's that git never reads.
type worktreeFS struct {
	*dotgit.RepositoryFilesystem
	common billy.Filesystem
}

func newWorktreeFS(gitDir, common billy.Filesystem) billy.Filesystem {
	return worktreeFS{RepositoryFilesystem: dotgit.NewRepositoryFilesystem(gitDir, common), common: common}
}

func packedRefsTempName(name string) bool {
	return !strings.ContainsRune(name, os.PathSeparator) && strings.HasPrefix(name, packedRefsTemp)
}

func (fs worktreeFS) TempFile(dir, prefix string) (billy.File, error) {
	if dir == "" && prefix == packedRefsTemp {
		return fs.common.TempFile(dir, prefix)
	}
	return fs.RepositoryFilesystem.TempFile(dir, prefix)
}

func (fs worktreeFS) Rename(from, to string) error {
	if packedRefsTempName(from) {
		return fs.common.Rename(from, to)
	}
	return fs.RepositoryFilesystem.Rename(from, to)
}

func (fs worktreeFS) Remove(name string) error {
	if packedRefsTempName(name) {
		return fs.common.Remove(name)
	}
	return fs.RepositoryFilesystem.Remove(name)
}
