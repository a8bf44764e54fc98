package agent

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics"
	memsync "github.com/memd-dev/memd/sync"
	"github.com/memd-dev/memd/watcher"
)

// inventory keeps what the metrics and the status report about the tree: one entry per
// memory file, refreshed only for the paths a job touched (or, after a reconcile, a merge or
// a sleep, for files whose size or mtime changed), so a scrape never walks the tree.
// Owner-goroutine only.
type inventory struct {
	// warm is false until the first full scan is in: a cold inventory skips the per-job
	// rescans, because the first scan runs off the owner goroutine (see buildInventory).
	warm    bool
	cfg     memd.Config
	files   map[string]invEntry
	ledger  *memd.Ledger
	ledgerT time.Time
	mds     map[string]mdInfo
	// copies are the conflict copies in the tree, waiting to be merged by hand (status
	// conflict_copies).
	copies map[string]struct{}
}

// mdInfo is one MEMORY.md: its size for the metrics and, for the project kind, what the
// status warns about (FORMATS §3B: the soft caps and the template).
type mdInfo struct {
	metrics.MDStat
	overSoftCap, untemplated bool
}

// invEntry is kept small: there is one per memory file (100k in a big repo).
type invEntry struct {
	size   int64
	mtime  int64 // UnixNano
	bucket uint8 // index into memd.Buckets
	flags  uint8
}

const (
	entValid uint8 = 1 << iota
	entInbox
	entTaskInbox
	entArc
)

func (e invEntry) is(f uint8) bool { return e.flags&f != 0 }

func (e invEntry) same(info fs.FileInfo) bool {
	return e.size == info.Size() && e.mtime == info.ModTime().UnixNano()
}

func bucketIndex(rel string) uint8 {
	b := memd.BucketOf(rel)
	for i, name := range memd.Buckets {
		if name == b {
			return uint8(i)
		}
	}
	return 0
}

type invSnapshot struct {
	metrics.Snapshot
	Inbox, TaskInbox, Invalid int
	overCap                   []string
	untemplated               []string // project MEMORY.md files out of the four-section template
	copies                    []string // conflict copies waiting, sorted
}

func newInventory(cfg memd.Config) *inventory {
	return &inventory{cfg: cfg, files: map[string]invEntry{}, mds: map[string]mdInfo{}, copies: map[string]struct{}{}}
}

// scan walks the tree, re-reading only files whose size or mtime changed. A cold inventory
// waits for buildInventory instead.
func (v *inventory) scan(root string, ign *watcher.Ignorer) {
	if !v.warm {
		return
	}
	v.walk(root, ign)
}

// walk is the full scan; memory files that need parsing are parsed on every core.
func (v *inventory) walk(root string, ign *watcher.Ignorer) {
	var toParse []string
	seen := make(map[string]bool, len(v.files))
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if rel == "." {
			return nil
		}
		if ign != nil && ign.Ignored(rel, d.IsDir()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !d.Type().IsRegular() {
			return nil
		}
		seen[rel] = true
		v.noteCopy(rel)
		if v.needsParse(rel, d) {
			toParse = append(toParse, rel)
			return nil
		}
		v.refresh(root, rel, d)
		return nil
	})
	for i, e := range parseMemories(root, toParse) {
		v.files[toParse[i]] = e
	}
	for p := range v.files {
		if !seen[p] {
			delete(v.files, p)
		}
	}
	for p := range v.mds {
		if !seen[p] {
			delete(v.mds, p)
		}
	}
	for p := range v.copies {
		if !seen[p] {
			delete(v.copies, p)
		}
	}
}

// noteCopy remembers rel when it is a conflict copy (a regular file the walk or a commit saw).
func (v *inventory) noteCopy(rel string) {
	if _, ok := memsync.ConflictCopyOriginal(rel); ok {
		v.copies[rel] = struct{}{}
	}
}

// update refreshes the given repo-relative paths (a commit's batch). A path may be a
// directory that was removed: drop every entry under it.
func (v *inventory) update(root string, paths []string) {
	for _, rel := range paths {
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			v.dropUnder(rel)
			continue
		}
		if fi.IsDir() {
			continue // the next reconcile's scan picks up new files in new dirs
		}
		if fi.Mode().IsRegular() {
			v.noteCopy(rel)
		}
		v.refresh(root, rel, fs.FileInfoToDirEntry(fi))
	}
}

func (v *inventory) dropUnder(rel string) {
	for p := range v.files {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			delete(v.files, p)
		}
	}
	for p := range v.mds {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			delete(v.mds, p)
		}
	}
	for p := range v.copies {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			delete(v.copies, p)
		}
	}
	if rel == v.cfg.Expire.Ledger {
		v.ledger = nil
	}
}

func (v *inventory) refresh(root, rel string, d fs.DirEntry) {
	info, err := d.Info()
	if err != nil || !info.Mode().IsRegular() {
		return
	}
	abs := filepath.Join(root, filepath.FromSlash(rel))
	switch {
	case rel == v.cfg.Expire.Ledger:
		if v.ledger == nil || !info.ModTime().Equal(v.ledgerT) {
			if l, err := memd.ReadLedger(abs); err == nil {
				v.ledger, v.ledgerT = l, info.ModTime()
			}
		}
	case path.Base(rel) == "MEMORY.md":
		if data, err := os.ReadFile(abs); err == nil {
			md := mdInfo{MDStat: metrics.MDStat{Path: rel, Lines: countLines(data), Bytes: len(data),
				Project: memd.DetectMemoryMDKind(data) == memd.MemoryMDProject}}
			if md.Project {
				r := memd.InspectProjectMD(data)
				md.overSoftCap, md.untemplated = r.OverSoftCap, !r.InTemplate
			}
			v.mds[rel] = md
		}
	case isMemory(rel):
		if old, ok := v.files[rel]; ok && old.same(info) {
			return
		}
		v.files[rel] = parseEntry(root, rel, info)
	}
}

func isMemory(rel string) bool {
	return strings.HasSuffix(rel, memd.MemoryExt) && !memd.IsNonMemory(rel)
}

// needsParse is true for a memory file that is new or changed since it was last parsed.
func (v *inventory) needsParse(rel string, d fs.DirEntry) bool {
	if !isMemory(rel) {
		return false
	}
	info, err := d.Info()
	if err != nil || !info.Mode().IsRegular() {
		return false
	}
	old, ok := v.files[rel]
	return !ok || !old.same(info)
}

func parseEntry(root, rel string, info fs.FileInfo) invEntry {
	e := invEntry{size: info.Size(), mtime: info.ModTime().UnixNano(), bucket: bucketIndex(rel)}
	if m, err := memd.ParseMemoryFile(filepath.Join(root, filepath.FromSlash(rel))); err == nil && m.Valid() && memd.ValidMemoryPath(rel) {
		e.flags |= entValid
	}
	switch path.Dir(rel) {
	case memd.InboxDir:
		e.flags |= entInbox
	case memd.TaskInboxDir:
		e.flags |= entTaskInbox
	case memd.ArcsDir:
		e.flags |= entArc
	}
	return e
}

// parseMemories parses rels on every core; the result is in the order of rels.
func parseMemories(root string, rels []string) []invEntry {
	out := make([]invEntry, len(rels))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(rels); i = int(next.Add(1) - 1) {
				info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rels[i])))
				if err != nil {
					out[i] = invEntry{bucket: bucketIndex(rels[i])}
					continue
				}
				out[i] = parseEntry(root, rels[i], info)
			}
		}()
	}
	wg.Wait()
	return out
}

// buildInventory makes the first full inventory off the owner goroutine (at 100k files it
// parses for seconds; memd must not wait for it to be ready). The owner swaps it in.
func buildInventory(cfg memd.Config, ign *watcher.Ignorer) *inventory {
	v := newInventory(cfg)
	v.walk(cfg.Repo, ign)
	v.warm = true
	return v
}

func countLines(b []byte) int {
	n := strings.Count(string(b), "\n")
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

func (v *inventory) snapshot(now time.Time) invSnapshot {
	var s invSnapshot
	s.Memories = map[string]int{memd.BucketProjects: 0, memd.BucketAreas: 0, memd.BucketResources: 0, memd.BucketArchive: 0}
	for _, e := range v.files {
		s.Memories[memd.Buckets[e.bucket]]++
		if !e.is(entValid) {
			s.Invalid++
		}
		if e.is(entInbox) {
			s.Inbox++
		}
		if e.is(entTaskInbox) {
			s.TaskInbox++
		}
		if e.is(entArc) {
			s.Arcs++
		}
	}
	s.Snapshot.Inbox, s.Snapshot.TaskInbox, s.Snapshot.Invalid = s.Inbox, s.TaskInbox, s.Invalid
	s.LedgerRecords = map[string]int{}
	s.LedgerNotes = map[metrics.NoteKey]int{}
	if v.ledger != nil {
		for _, r := range v.ledger.Records() {
			s.LedgerRecords[r.Type]++
			if r.Type == memd.RecordNote && r.Lifecycle != nil {
				s.LedgerNotes[metrics.NoteKey{Mode: r.Lifecycle.Mode, State: noteState(r, now, v.cfg.Expire.SoftGrace.D())}]++
			}
		}
	}
	for p := range v.copies {
		s.copies = append(s.copies, p)
	}
	sort.Strings(s.copies)
	for _, md := range v.mds {
		s.MemoryMD = append(s.MemoryMD, md.MDStat)
		if md.overSoftCap {
			s.overCap = append(s.overCap, md.Path)
		}
		if md.untemplated {
			s.untemplated = append(s.untemplated, md.Path)
		}
	}
	sort.Strings(s.overCap)
	sort.Strings(s.untemplated)
	return s
}

// noteState is a note's memd_ledger_notes state: sleep's own verdict (memd.JudgeNote), so
// the gauge counts as expired exactly what the next sleep drains.
func noteState(r *memd.Record, now time.Time, grace time.Duration) string {
	return memd.JudgeNote(r, now, grace).State()
}
