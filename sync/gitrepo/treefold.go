package gitrepo

import (
	"runtime"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/memd-dev/memd/internal/gitpath"
)

// nameFS is the work tree's way of comparing names, probed once (lazily: only
// a sync checks trees), the way git sets core.ignorecase and
// core.precomposeunicode at init: a temp file in the work tree (*.tmp, which
// watchers and committers ignore), looked up in another
// case and another Unicode form.
type nameFS struct {
	once sync.Once
	fs   gitpath.FS
}

// nameFSLocked is the probed file system, or (when the probe cannot write)
// the platform's default: macOS folds case and normalises, others do not.
func (r *Repo) nameFSLocked() gitpath.FS {
	r.names.once.Do(func() {
		fs, err := gitpath.Probe(r.dir)
		if err != nil {
			if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
				fs = gitpath.Everywhere
			}
			r.log.Warn("cannot probe how the file system compares names; assuming the platform's default", "repo", r.dir, "err", err,
				"ignore_case", fs.IgnoreCase, "normalizes", fs.Normalizes)
		}
		r.names.fs = fs
		if fs.IgnoreCase || fs.Normalizes {
			r.log.Info("work tree file system folds names: fetched entries that collide are refused", "repo", r.dir,
				"ignore_case", fs.IgnoreCase, "normalizes", fs.Normalizes)
		}
	})
	return r.names.fs
}

// SetMaxFileSize changes sync.max_file_size (a reload); 0 = no limit.
func (r *Repo) SetMaxFileSize(n int64) { r.maxFile.Store(n) }

func (r *Repo) maxFileSize() int64 { return r.maxFile.Load() }

// checkFetchedTreeLocked is gitpath.CheckTree for a tree fetched from a remote: a
// blob over sync.max_file_size is refused by its size; entries colliding on this
// file system are refused; those that would
// collide only on a case-insensitive or normalising one (a clone on a Mac)
// are logged as warnings naming the commit and path.
func (r *Repo) checkFetchedTreeLocked(s storer.EncodedObjectStorer, commit, tree, known plumbing.Hash) error {
	tc := gitpath.TreeCheck{MaxBlob: r.maxFileSize(), FS: r.nameFSLocked(), Warn: func(path string, err error) {
		r.log.Warn("fetched tree holds names one file on a case-insensitive or normalising file system (macOS): a clone there would lose one",
			"repo", r.dir, "commit", short(commit), "path", path, "err", err)
	}}
	return tc.Check(s, commit, tree, known)
}
