package watcher

import (
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// Names watches a few named entries of a few directories, not recursively: the daemon's
// look at what other writers do outside the work tree (git's HEAD and operation files at
// the top of .git, the kick and pause files of the state directory). Only the names asked
// for count, so memd's own writes beside them (status.json, the index) never wake it.
type Names struct {
	fw   *fsnotify.Watcher
	want map[string]map[string]bool // dir → names
	c    chan struct{}
	done chan struct{}
}

// WatchNames starts watching dirs (each dir → the entry names that matter in it). A
// directory that cannot be watched is an error naming it.
func WatchNames(dirs map[string][]string) (*Names, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch names: %w", err)
	}
	n := &Names{fw: fw, want: map[string]map[string]bool{}, c: make(chan struct{}, 1), done: make(chan struct{})}
	for dir, names := range dirs {
		dir = filepath.Clean(dir)
		if err := fw.Add(dir); err != nil {
			fw.Close()
			return nil, fmt.Errorf("watch %s: %w", dir, err)
		}
		set := map[string]bool{}
		for _, name := range names {
			set[name] = true
		}
		n.want[dir] = set
	}
	go n.run()
	return n, nil
}

// C receives (coalesced: capacity one) after a watched name was created, written, removed
// or renamed.
func (n *Names) C() <-chan struct{} { return n.c }

// Close stops the watch.
func (n *Names) Close() error {
	err := n.fw.Close()
	<-n.done
	return err
}

func (n *Names) run() {
	defer close(n.done)
	for {
		select {
		case ev, ok := <-n.fw.Events:
			if !ok {
				return
			}
			if n.want[filepath.Dir(ev.Name)][filepath.Base(ev.Name)] {
				n.signal()
			}
		case _, ok := <-n.fw.Errors:
			if !ok {
				return
			}
			n.signal() // an overflow may have dropped one: look again
		}
	}
}

func (n *Names) signal() {
	select {
	case n.c <- struct{}{}:
	default:
	}
}
