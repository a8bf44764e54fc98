package watcher

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"

	"github.com/memd-dev/memd/internal/repofiles"
)

const isLinux = runtime.GOOS == "linux"

func parentOf(rel string) string {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i]
	}
	return ""
}

func baseOf(rel string) string { return rel[strings.LastIndexByte(rel, '/')+1:] }

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func stampOf(d fs.DirEntry) (stamp, bool) {
	fi, err := d.Info()
	if err != nil {
		return stamp{}, false
	}
	return stamp{size: fi.Size(), modNano: fi.ModTime().UnixNano(), mode: fi.Mode()}, true
}

func (w *Watcher) addWatch(abs string) error {
	if w.hook != nil {
		return w.hook(abs, w.fw.Add)
	}
	return w.fw.Add(abs)
}

// watchDir adds the watch for directory rel (called before it is listed). When the
// watch cannot be added the directory is scanned periodically instead.
func (w *Watcher) watchDir(rel string) {
	st := w.dirs[rel]
	if st != nil && st.watched {
		return
	}
	if st == nil {
		st = &dirState{children: map[string]struct{}{}}
		w.dirs[rel] = st
		if rel != "" {
			if p := w.dirs[parentOf(rel)]; p != nil {
				p.children[rel] = struct{}{}
			}
		}
	}
	err := w.addWatch(w.abs(rel))
	switch {
	case err == nil:
		st.watched = true
		if st.snap != nil {
			st.snap = nil
			w.unwatched--
		}
		w.nWatched.Add(1)
		return
	case errors.Is(err, fsnotify.ErrClosed):
		return // shutting down
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		w.dropTree(rel) // gone already; its removal is reported by the parent
		return
	}
	reason := fmt.Sprintf("cannot watch %s: %v", rel, err)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		reason = "watch limit reached: " + err.Error()
		if isLinux {
			reason += " (raise fs.inotify.max_user_watches)"
		}
	}
	if st.snap == nil {
		st.snap = map[string]stamp{}
		w.unwatched++
	}
	if w.watchErr == "" {
		w.watchErr = reason
	}
	w.log.Warn("directory not watched; scanning it instead", "dir", rel, "err", err)
	w.updateDegraded()
	w.markRescan(reason)
	w.armScan()
}

// snapFile records a file of an unwatched directory for the fallback scan.
func (w *Watcher) snapFile(rel string, d fs.DirEntry) error {
	st := w.dirs[parentOf(rel)]
	if st == nil || st.snap == nil {
		return nil
	}
	if s, ok := stampOf(d); ok {
		st.snap[baseOf(rel)] = s
	}
	return nil
}

func (w *Watcher) listFailed(rel string, err error) {
	w.log.Warn("cannot list directory", "dir", rel, "err", err)
}

// addTree watches a directory that appeared (created, moved in, or un-ignored) and
// everything below it. Watches go on before each listing, so a file created meanwhile is
// seen either by the listing or by an event. With report, the files found are dirty.
func (w *Watcher) addTree(rel string, report bool) {
	// A .gitignore that comes with the tree never produces its own event: read them on
	// the way down, as New does, so the walk already honours them.
	cur := w.ign.Load()
	ig, err := cur.Extend(rel, repofiles.Funcs{
		Dir: w.watchDir,
		File: func(f string, d fs.DirEntry) error {
			if report {
				w.markDirty(f)
			}
			return w.snapFile(f, d)
		},
		Fail: w.listFailed,
	})
	// A SetIgnore meanwhile wins: its rules were read from the whole tree after this one.
	if ig.Gitignores() > cur.Gitignores() && w.ign.CompareAndSwap(cur, ig) {
		w.log.Info("ignore rules extended", "dir", rel, "gitignores", ig.Gitignores())
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			w.dropTree(rel)
		} else {
			w.listFailed(rel, err)
		}
	}
}

// dropTree forgets directory rel and everything known below it, removing their watches.
// inotify keeps a renamed directory's watches under the old names, so they must go.
func (w *Watcher) dropTree(rel string) {
	st := w.dirs[rel]
	if st == nil {
		return
	}
	for c := range st.children {
		w.dropTree(c)
	}
	if st.watched {
		_ = w.fw.Remove(w.abs(rel)) // often gone already with the directory
		w.nWatched.Add(-1)
	}
	if st.snap != nil {
		w.unwatched--
		w.updateDegraded()
	}
	delete(w.dirs, rel)
	if rel != "" {
		if p := w.dirs[parentOf(rel)]; p != nil {
			delete(p.children, rel)
		}
	}
}

// resync walks the whole tree and brings the watches in line with it: directories not
// known yet are watched and their files reported; known ones that are gone or now
// ignored are dropped. With old (the ignore rules before a reload), files that old
// ignored and the current rules do not are reported too.
func (w *Watcher) resync(old *repofiles.Ignorer) {
	ig := w.ign.Load()
	visited := map[string]struct{}{}
	fresh := map[string]struct{}{}
	err := repofiles.Walk(w.root, "", ig.Skip, repofiles.Funcs{
		Dir: func(rel string) {
			visited[rel] = struct{}{}
			if w.dirs[rel] == nil {
				fresh[rel] = struct{}{}
				w.watchDir(rel)
			}
		},
		File: func(rel string, d fs.DirEntry) error {
			_, isNew := fresh[parentOf(rel)]
			if isNew || (old != nil && old.Skip(rel, false)) {
				w.markDirty(rel)
			}
			if isNew {
				return w.snapFile(rel, d)
			}
			return nil
		},
		Fail: w.listFailed,
	})
	if err != nil {
		w.log.Error("resync walk failed", "err", err)
		return
	}
	var stale []string
	for rel := range w.dirs {
		if _, ok := visited[rel]; !ok {
			stale = append(stale, rel)
		}
	}
	sort.Strings(stale) // parents first: dropping one drops its children
	for _, rel := range stale {
		if w.dirs[rel] == nil {
			continue
		}
		if _, err := os.Lstat(w.abs(rel)); err != nil {
			w.markDirty(rel)
		}
		w.dropTree(rel)
	}
}

// armScan starts the fallback scan timer unless it runs; it only runs while some
// directory is not watched.
func (w *Watcher) armScan() {
	if w.scanTimer != nil || w.unwatched == 0 {
		return
	}
	w.scanTimer = w.clock.AfterFunc(w.scanIvl, func() {
		select {
		case w.scanTick <- struct{}{}:
		default:
		}
	})
}

// scanUnwatched compares every unwatched directory with its last listing, reports what
// changed, and tries to watch it again (limits may have been raised, watches freed).
func (w *Watcher) scanUnwatched() {
	w.scanTimer = nil
	var list []string
	for rel, st := range w.dirs {
		if st.snap != nil {
			list = append(list, rel)
		}
	}
	sort.Strings(list)
	for _, rel := range list {
		w.scanDir(rel)
	}
	w.updateDegraded()
	w.armScan()
}

func (w *Watcher) scanDir(rel string) {
	st := w.dirs[rel]
	if st == nil || st.snap == nil {
		return
	}
	abs := w.abs(rel)
	// Try the watch before listing so nothing falls between the two.
	watched := w.addWatch(abs) == nil
	ents, err := os.ReadDir(abs)
	if err != nil {
		if watched {
			_ = w.fw.Remove(abs)
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			w.markDirty(rel)
			w.dropTree(rel)
		} else {
			w.listFailed(rel, err)
		}
		return
	}
	ig := w.ign.Load()
	snap := make(map[string]stamp, len(ents))
	dirsSeen := map[string]struct{}{}
	for _, e := range ents {
		child := joinRel(rel, e.Name())
		if e.IsDir() {
			if repofiles.SkipDir(filepath.Join(abs, e.Name()), child, ig.Skip) {
				continue
			}
			dirsSeen[child] = struct{}{}
			if w.dirs[child] == nil {
				w.addTree(child, true)
			}
			continue
		}
		if repofiles.SkipFile(child, e.Type(), ig.Skip) {
			continue
		}
		s, ok := stampOf(e)
		if !ok {
			continue
		}
		snap[e.Name()] = s
		if prev, had := st.snap[e.Name()]; !had || prev != s {
			w.markDirty(child)
		}
	}
	for name := range st.snap {
		if _, ok := snap[name]; !ok {
			w.markDirty(joinRel(rel, name))
		}
	}
	for c := range st.children {
		if _, ok := dirsSeen[c]; !ok {
			w.markDirty(c)
			w.dropTree(c)
		}
	}
	if watched {
		st.watched = true
		st.snap = nil
		w.unwatched--
		w.nWatched.Add(1)
		w.log.Info("directory watched again", "dir", rel)
		return
	}
	st.snap = snap
}

// updateDegraded publishes the fallback state for Stats.
func (w *Watcher) updateDegraded() {
	var deg string
	if w.unwatched > 0 {
		deg = fmt.Sprintf("%s; %d directories scanned every %s instead", w.watchErr, w.unwatched, w.scanIvl)
	} else {
		w.watchErr = ""
	}
	w.mu.Lock()
	was := w.degraded
	w.degraded = deg
	w.mu.Unlock()
	if was != "" && deg == "" {
		w.log.Info("all directories watched again")
	}
}
