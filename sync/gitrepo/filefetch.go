package gitrepo

// A fetch from a file remote (a bare repository on this machine) copies the few objects the
// remote branch gained straight from the remote's object store, instead of running
// `git upload-pack` there, its `git pack-objects` and a local `git index-pack`: three
// processes per fetch, about 30 ms of CPU each, which in the ten-machine swarm were a third
// of the CPU while the machines raced to one HEAD (perf, bench/RESULTS.md). Only the usual
// case is taken: at most maxCopyObjects objects and maxCopyBytes, none over maxCopyObject
// bytes, on top of commits held here, from a repository this user owns. Everything else (a
// first fetch, a big fetch, nothing in common, a remote owned by another user, which git
// refuses as dubious ownership) is fetched by git as before (fetchPackV2): the copy
// declines and nothing it wrote is named by any ref. An object that does not hash to its
// name fails the fetch, as git's connectivity check would.
//
// The objects are the commits from the remote's head down to the first ones held here, and
// their tree entries that differ from the held parents' trees, which are here in full as
// every commit memd holds is (gitremote.FetchObjects, run on the remote's store). Each is
// read whole, bounded, and hashed before it is written (gitstore.ReadBounded), and written
// as one pack of whole objects, durable before the tracking ref names it
// (gitstore.WritePack): one fsync, where loose objects cost one each.

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"

	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
)

const (
	// maxCopyObject bounds one copied object and maxCopyBytes all of them; a bigger fetch
	// goes through index-pack, which streams.
	maxCopyObject = 4 << 20
	maxCopyBytes  = 16 << 20
	// maxCopyWalk bounds the new commits one copy walks.
	maxCopyWalk = 5000
)

// maxCopyObjects bounds the objects of one copy: past it git's index-pack takes the fetch,
// which finds deltas. Ten machines writing at once bring a few hundred per fetch (five per
// commit: the commit, three trees, a blob). Tests lower it.
var maxCopyObjects = 2000

// copyFileFetches turns the copy on; tests of the pack path turn it off.
var copyFileFetches = true

// errCopyDeclined: this fetch is not one the copy takes (see the file comment); git fetches it.
var errCopyDeclined = errors.New("not copied from the file remote")

// copyFromFileRemoteLocked brings head, the branch's head in the file remote whose git
// directory is gitDir, into this repository's object store, the tracking ref track being
// where the last fetch or push left it. Caller holds r.mu.
func (r *Repo) copyFromFileRemoteLocked(gitDir string, head plumbing.Hash, track plumbing.ReferenceName) error {
	if !copyFileFetches {
		return errCopyDeclined
	}
	old, err := gitstore.ReadRef(r.commonDir, track.String())
	if err != nil || old.IsZero() || r.repo.Storer.HasEncodedObject(old) != nil {
		return fmt.Errorf("%w: no tracking ref to stand on", errCopyDeclined) // a first fetch
	}
	if !ownedByMe(gitDir) {
		return fmt.Errorf("%w: not this user's", errCopyDeclined)
	}
	src := r.fileSourceLocked(gitDir)
	have := func(h plumbing.Hash) bool { return r.repo.Storer.HasEncodedObject(h) == nil }
	objs, err := gitremote.FetchObjects(src, have, head, maxCopyWalk)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", errCopyDeclined, err)
	case len(objs) > maxCopyObjects:
		return fmt.Errorf("%w: %d objects", errCopyDeclined, len(objs))
	}
	raws := make([]gitstore.RawObject, 0, len(objs))
	total := 0
	for _, h := range objs {
		if r.repo.Storer.HasEncodedObject(h) == nil {
			continue // ours already: a blob both sides wrote, a commit pushed from here
		}
		t, b, err := src.ReadBounded(h, min(maxCopyObject, int64(maxCopyBytes-total)))
		if errors.Is(err, gitstore.ErrNotItsName) {
			// git's fetch would carry the same bytes under their true name, short of this one.
			return fmt.Errorf("fetch from %s: %w", gitDir, err)
		}
		if err != nil {
			return fmt.Errorf("%w: %w", errCopyDeclined, err)
		}
		total += len(b)
		raws = append(raws, gitstore.RawObject{Hash: h, Type: t, Content: b})
	}
	if err := gitstore.WritePack(r.commonDir, raws); err != nil {
		return fmt.Errorf("copy from %s: %w", gitDir, err)
	}
	if ri, ok := r.repo.Storer.(reindexer); ok {
		ri.Reindex()
	}
	if r.testFileCopied != nil {
		r.testFileCopied(len(raws))
	}
	return nil
}

// fileSourceLocked is the object store of the file remote at gitDir, kept across fetches
// and made to list its packs again (a push or a gc there changes them).
func (r *Repo) fileSourceLocked(gitDir string) *gitstore.Storage {
	if r.fileSrc == nil || r.fileSrcDir != gitDir {
		if r.fileSrc != nil {
			_ = r.fileSrc.Close() // another remote since a reload: its pack files go
		}
		r.fileSrc = gitstore.NewStorage(gitDir, cache.NewObjectLRU(cache.MiByte), maxCopyObject)
		r.fileSrcDir = gitDir
	} else {
		r.fileSrc.Reindex()
	}
	return r.fileSrc
}

// ownedByMe: gitDir is a directory of this user's, the ownership git's safe.directory
// check asks for before it reads a repository.
func ownedByMe(gitDir string) bool {
	fi, err := os.Stat(gitDir)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// checkConnectedLocked is git's check after a fetch (check_connected), for what a fetch
// from old to head brought: every object a push from old to head would carry is here now.
// A remote that sent a pack short of one (a forged object, which index-pack files under its
// true name) leaves the tracking ref where it was, as git leaves it. A first fetch (no old)
// or a walk past its bound is not checked here: the merge reads what it needs and fails on
// what is missing. Caller holds r.mu.
func (r *Repo) checkConnectedLocked(head, old plumbing.Hash) error {
	if old.IsZero() || r.repo.Storer.HasEncodedObject(old) != nil {
		return nil
	}
	var st gitremote.PushStats
	objs, _, err := gitremote.PushObjects(r.repo.Storer, head, old, maxCopyWalk, &st)
	if err != nil {
		if errors.Is(err, gitremote.ErrPushWalkTooLong) {
			return nil
		}
		return fmt.Errorf("fetched history of %s is incomplete: %w", head.String()[:12], err)
	}
	for _, h := range objs {
		if err := r.repo.Storer.HasEncodedObject(h); err != nil {
			return fmt.Errorf("fetched history of %s is incomplete: object %s: %w", head.String()[:12], h, err)
		}
	}
	return nil
}
