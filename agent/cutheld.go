package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics/statusline"
)

// A power cut leaves a file whose writer did not fsync it empty (ext4's delayed allocation:
// the new size reached the journal, the data never did) or, on other file systems, full of
// zero bytes (docs/RELIABILITY.md "Power cuts and files that were never fsynced"). Committed,
// that file would replace the memory on every machine. So after an unclean stop (the last
// status document is not memd run's clean stop's) a file that is empty or all zero bytes
// where HEAD's version is not, and that nobody has written since this memd started, is held
// (reason cut), not committed: HEAD keeps the memory. Any write to it, or its deletion, ends
// the hold; `git checkout -- PATH` brings HEAD's version back.
//
// A writer that emptied a memory on purpose just before the cut waits for its next write:
// memories are deleted, not emptied, so that is the rarer mistake to make.

// maxCutCheck bounds the file a zero-byte check reads whole.
const maxCutCheck = 1 << 20

// cutHolds are one session's holds of files a power cut left emptied.
type cutHolds struct {
	on    bool      // the last stop was unclean
	since time.Time // the session's start: a file written after it is a write, never held
	mu    sync.Mutex
	held  map[string]cutStamp // repo-relative path -> its stat when held
}

// cutStamp is what a held file looked like; a file that no longer does was written.
type cutStamp struct {
	size  int64
	mtime time.Time
}

// newCutHolds reads whether the last stop was clean; it must run before this memd writes a
// status document. since is the wall clock, not the session's (maybe injected) one: it is
// compared with the file system's mtimes.
func newCutHolds(cfg memd.Config) *cutHolds {
	return &cutHolds{on: stoppedUncleanly(cfg), since: time.Now(), held: map[string]cutStamp{}}
}

// filter is paths less the ones a cut emptied (see above); headData reads HEAD's version
// of a repo-relative path (nil: HEAD has none).
func (c *cutHolds) filter(root string, paths []string, headData func(rel string) []byte) []string {
	if c == nil || !c.on {
		return paths
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := paths[:0:0]
	for _, p := range paths {
		rel := p
		if filepath.IsAbs(p) {
			r, err := filepath.Rel(root, p)
			if err != nil {
				keep = append(keep, p)
				continue
			}
			rel = r
		}
		rel = filepath.ToSlash(rel)
		if c.emptied(root, rel, headData) {
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

// emptied judges rel (caller holds c.mu), keeping c.held up to date.
func (c *cutHolds) emptied(root, rel string, headData func(string) []byte) bool {
	fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil || !fi.Mode().IsRegular() || fi.ModTime().After(c.since) {
		delete(c.held, rel) // gone, not a file, or written since: a writer's doing
		return false
	}
	st := cutStamp{size: fi.Size(), mtime: fi.ModTime()}
	if was, ok := c.held[rel]; ok {
		if was == st {
			return true
		}
		delete(c.held, rel)
		return false
	}
	if !zeroFile(filepath.Join(root, filepath.FromSlash(rel)), fi.Size()) {
		return false
	}
	if head := headData(rel); len(head) == 0 || allZero(head) {
		return false // HEAD's version is no memory either
	}
	c.held[rel] = st
	return true
}

// zeroFile: the file is empty or, up to maxCutCheck bytes, all zero bytes.
func zeroFile(path string, size int64) bool {
	if size == 0 {
		return true
	}
	if size > maxCutCheck {
		return false
	}
	b, err := os.ReadFile(path)
	return err == nil && allZero(b)
}

func allZero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}

// list is the paths held now, sorted: a held file written, checked out or deleted since (its
// stat moved) is held no more, whether or not a commit has looked at it again.
func (c *cutHolds) list(root string) []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.held))
	for p, st := range c.held {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || (cutStamp{size: fi.Size(), mtime: fi.ModTime()}) != st {
			delete(c.held, p)
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// cutFilter is paths less the files a power cut emptied (cutHolds), read against HEAD.
func (s *Session) cutFilter(paths []string) []string {
	if s.cut == nil || !s.cut.on {
		return paths // after a clean stop (the common case): no ref read on the commit path
	}
	head, err := s.repo.Head()
	if err != nil || head == "" {
		return paths
	}
	return s.cut.filter(s.cfg.Repo, paths, func(rel string) []byte {
		v, err := s.repo.History().VersionAt(rel, head)
		if err != nil {
			return nil
		}
		return v.Data
	})
}

// CutHeld lists the files held because a power cut emptied them (cutHolds).
func (s *Session) CutHeld() []string { return s.cut.list(s.cfg.Repo) }

// cutHeldFacts is the document's held entries for the files a power cut emptied, with one
// event per file that became held, and the gauge set.
func (a *Agent) cutHeldFacts() []statusline.Held {
	held := a.sess.CutHeld()
	if a.st.cutHeld == nil {
		a.st.cutHeld = map[string]bool{}
	}
	now := map[string]bool{}
	out := make([]statusline.Held, 0, len(held))
	for _, p := range held {
		now[p] = true
		out = append(out, statusline.Held{Path: p, Reason: statusline.HeldCut})
		if a.st.cutHeld[p] {
			continue
		}
		a.st.cutHeld[p] = true
		a.event(statusline.KindWarn, statusline.Part{Text: "held", Kind: statusline.KindWarn},
			statusline.Part{Text: " " + p}, statusline.Part{Text: ": emptied by a power cut; not committed (git checkout -- " + p + " brings it back)", Kind: statusline.KindDim})
	}
	for p := range a.st.cutHeld {
		if !now[p] {
			delete(a.st.cutHeld, p)
			a.log.Info("no longer held as emptied by a power cut: written or gone", "path", p)
		}
	}
	a.metrics.HeldFiles(statusline.HeldCut, len(held))
	return out
}
