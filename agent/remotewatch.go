package agent

// A remote that is a path on this machine (a bare repository beside the memory, on a mounted
// disk) gets the checker's looks on the timer like any other; its branch moving is also an
// inotify event, on the ref's file (receive-pack renames refs/heads/<branch>.lock into place)
// or on packed-refs, and that pokes the checker to look at once. A push from another clone is
// then seen in milliseconds, not at the next tick, and nothing wakes while nothing moves. A
// filesystem that sends no events for others' writes (NFS) still has the timer's looks.

import (
	"context"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"github.com/memd-dev/memd/sync/gitrepo"
)

// remoteRefWatch is the inotify watch of a file remote's branch.
type remoteRefWatch struct {
	w    *fsnotify.Watcher
	done chan struct{}
}

// watchRemoteRef calls poke on every change of the ref's file or of packed-refs in gitDir.
func watchRemoteRef(gitDir, ref string, poke func()) (*remoteRefWatch, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	refPath := filepath.Join(gitDir, filepath.FromSlash(ref))
	packed := filepath.Join(gitDir, "packed-refs")
	for _, d := range []string{filepath.Dir(refPath), gitDir} {
		if err := w.Add(d); err != nil {
			_ = w.Close()
			return nil, err
		}
	}
	rw := &remoteRefWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(rw.done)
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Name == refPath || ev.Name == packed {
					poke()
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow or a watch gone: the timer's looks go on.
			}
		}
	}()
	return rw, nil
}

func (rw *remoteRefWatch) close() {
	if rw != nil {
		_ = rw.w.Close()
		<-rw.done
	}
}

// watchFileRemote (re)starts the watch of the configured remote when it is a path here
// (owner only: at start and on reload).
func (a *Agent) watchFileRemote() {
	a.refWatch.close()
	a.refWatch = nil
	if a.check == nil || !a.hasRemote() {
		return
	}
	gitDir, ref, ok := a.repo.FileRemote(context.Background(), gitrepo.RemoteOptionsFromConfig(a.cfg))
	if !ok {
		return
	}
	rw, err := watchRemoteRef(gitDir, ref, a.check.poke)
	if err != nil {
		a.log.Debug("no watch of the remote's branch; the timer's looks only", "remote", gitDir, "err", err)
		return
	}
	a.refWatch = rw
}
