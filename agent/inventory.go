package agent

import (
	"hash/fnv"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/ledger"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/workpool"
	"github.com/memd-dev/memd/metrics"
)

// inventory keeps what the metrics and the status report about the tree: one entry per
// memory file, refreshed only for the paths a job touched (or, after a reconcile, a merge or
// a sleep, for files whose size or mtime changed), so a scrape never walks the tree.
// Owner-goroutine only.
//
// Per-commit work is O(changed): the counts the snapshot reports are kept up to date as
// entries come and go (set/del), the ledger's counts are made when it is read (and again
// only when a note's state is due to change), and dirs (entries per ancestor directory)
// lets a removed path that is not a directory of memories cost a map lookup, not a scan.
// touched counts the entries each of those visits, for the test that proves it.
type inventory struct {
	// warm is false until the first full scan is in: a cold inventory skips the per-job
	// rescans, because the first scan runs off the owner goroutine (see buildInventory).
	warm    bool
	cfg     memd.Config
	files   map[string]invEntry
	dirs    map[string]int // entries in files under each directory (every ancestor)
	n       invCounts
	ledger  *ledger.Ledger
	ledgerT time.Time
	lc      ledgerCounts
	mds     map[string]mdInfo
	// copies are the conflict copies in the tree, waiting to be merged by hand (status
	// conflict_copies).
	copies  map[string]struct{}
	touched int
	// While cold, jobs only note what they touched, for the warm inventory to catch up
	// with when it is swapped in (catchUp): since, the paths; sinceAll, a full scan.
	since    []string
	sinceAll bool
	// hashes counts the files holding each unique content key (invEntry.hash); duplicates
	// is how many keys two or more hold.
	hashes     map[uint64]int
	duplicates int
}

// mdInfo is one MEMORY.md: its size for the metrics and, for the project kind, what the
// status warns about (FORMATS §3B: the soft caps and the template).
type mdInfo struct {
	metrics.MDStat
	overSoftCap, untemplated bool
}

// invCounts are the snapshot's counts over files.
type invCounts struct {
	buckets                         [4]int // by memd.Buckets index
	invalid, inbox, taskInbox, arcs int
}

func (c *invCounts) add(e invEntry, d int) {
	c.buckets[e.bucket] += d
	if !e.is(entValid) {
		c.invalid += d
	}
	if e.is(entInbox) {
		c.inbox += d
	}
	if e.is(entTaskInbox) {
		c.taskInbox += d
	}
	if e.is(entArc) {
		c.arcs += d
	}
}

// ledgerCounts are the ledger's metrics at a time; they hold until next (a note's
// expiry or grace end), or until the ledger changes.
type ledgerCounts struct {
	at, next time.Time
	records  map[string]int
	notes    map[metrics.NoteKey]int
}

// set and del are the only writers of files: they keep n and dirs in step.
func (v *inventory) set(rel string, e invEntry) {
	v.touched++
	if old, ok := v.files[rel]; ok {
		v.n.add(old, -1)
		v.countHash(old.hash, -1)
	} else {
		forDirs(rel, func(d string) {
			if _, ok := v.dirs[d]; !ok {
				d = strings.Clone(d)
			}
			v.dirs[d]++
		})
	}
	// A clone: rel may be a slice of a walk's absolute path, which the key would keep.
	v.files[strings.Clone(rel)] = e
	v.n.add(e, 1)
	v.countHash(e.hash, 1)
}

// countHash keeps how many files hold each unique key, and how many keys are held twice or
// more (duplicate articles: memhtml's index refuses them) in step with files.
func (v *inventory) countHash(h uint64, d int) {
	if h == 0 {
		return
	}
	if v.hashes == nil {
		v.hashes = map[uint64]int{}
	}
	before := v.hashes[h]
	after := before + d
	if after <= 0 {
		delete(v.hashes, h)
	} else {
		v.hashes[h] = after
	}
	switch {
	case before < 2 && after >= 2:
		v.duplicates++
	case before >= 2 && after < 2:
		v.duplicates--
	}
}

func (v *inventory) del(rel string) {
	old, ok := v.files[rel]
	if !ok {
		return
	}
	v.touched++
	delete(v.files, rel)
	v.n.add(old, -1)
	v.countHash(old.hash, -1)
	forDirs(rel, func(d string) {
		if v.dirs[d]--; v.dirs[d] <= 0 {
			delete(v.dirs, d)
		}
	})
}

// forDirs calls fn with each ancestor directory of rel ("a/b/c.html": "a/b", "a").
func forDirs(rel string, fn func(string)) {
	for i := strings.LastIndexByte(rel, '/'); i > 0; i = strings.LastIndexByte(rel[:i], '/') {
		fn(rel[:i])
	}
}

// invEntry is kept small: there is one per memory file (100k in a big repo).
type invEntry struct {
	size   int64
	mtime  int64  // UnixNano
	hash   uint64 // uniqueKey of memfile.UniqueContentKey; 0: not under memhtml's unique key
	bucket uint8  // index into memd.Buckets
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
	Duplicates                int // content hashes two or more active memories share
	overCap                   []string
	untemplated               []string // project MEMORY.md files out of the four-section template
	copies                    []string // conflict copies waiting, sorted
}

func newInventory(cfg memd.Config) *inventory {
	return &inventory{cfg: cfg, files: map[string]invEntry{}, dirs: map[string]int{}, mds: map[string]mdInfo{}, copies: map[string]struct{}{}}
}

// scan walks the tree, re-reading only files whose size or mtime changed. A cold inventory
// waits for buildInventory instead.
func (v *inventory) scan(root string, ign *repofiles.Ignorer) {
	if !v.warm {
		v.sinceAll = true
		return
	}
	v.walk(root, ign)
}

// catchUp brings a freshly built inventory up to what the jobs run while it was being
// built touched (cold's notes): the paths they committed, or a full scan if one was asked.
func (v *inventory) catchUp(root string, ign *repofiles.Ignorer, cold *inventory) {
	if cold.sinceAll {
		v.walk(root, ign)
		return
	}
	v.update(root, cold.since)
}

// walk is the full scan; memory files that need parsing are parsed in parallel.
func (v *inventory) walk(root string, ign *repofiles.Ignorer) {
	var toParse []string
	seen := make(map[string]bool, len(v.files))
	_ = repofiles.Walk(root, "", ign.Ignored, repofiles.Funcs{File: func(rel string, d fs.DirEntry) error {
		if !d.Type().IsRegular() {
			return nil // a symlink is committed as a link; the inventory never reads through one
		}
		seen[rel] = true
		v.noteCopy(rel)
		// One lstat a file: an os.ReadDir entry's Info is a fresh lstat on every call, and
		// needsParse and refresh both ask (at 100k files the second was a sixth of the
		// every-10-minutes scan's CPU).
		info, err := d.Info()
		if err != nil {
			return nil // vanished since the listing
		}
		d = fs.FileInfoToDirEntry(info)
		if v.needsParse(rel, d) {
			toParse = append(toParse, rel)
			return nil
		}
		v.refresh(root, rel, d)
		return nil
	}})
	for i, e := range parseMemories(root, toParse) {
		v.set(toParse[i], e)
	}
	for p := range v.files {
		if !seen[p] {
			v.del(p)
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
	if _, ok := memd.ConflictCopyOriginal(rel); ok {
		v.copies[rel] = struct{}{}
	}
}

// update refreshes the given repo-relative paths (a commit's batch). A path may be a
// directory that was removed: drop every entry under it.
func (v *inventory) update(root string, paths []string) {
	if !v.warm {
		v.since = append(v.since, paths...)
		return
	}
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
	v.del(rel)
	if v.dirs[rel] > 0 { // a removed directory of memories: the scan is what it removed
		for p := range v.files {
			if strings.HasPrefix(p, rel+"/") {
				v.del(p)
			}
		}
	}
	for p := range v.mds { // MEMORY.md files: a handful
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
		v.ledger, v.lc = nil, ledgerCounts{}
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
			if l, err := ledger.ParseFile(abs); err == nil {
				v.ledger, v.ledgerT, v.lc = l, info.ModTime(), ledgerCounts{}
			}
		}
	case memd.IsMemoryMD(rel):
		if data, err := os.ReadFile(abs); err == nil {
			md := mdInfo{MDStat: metrics.MDStat{Path: rel, Lines: countLines(data), Bytes: len(data),
				Project: memorymd.Detect(data) == memorymd.KindProject}}
			if md.Project {
				r := memorymd.InspectProject(data)
				md.overSoftCap, md.untemplated = r.OverSoftCap, !r.InTemplate
			}
			v.mds[rel] = md
		}
	case isMemory(rel):
		if old, ok := v.files[rel]; ok && old.same(info) {
			return
		}
		v.set(rel, parseEntry(root, rel, info))
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
	m, err := memfile.ParseFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err == nil && m.Valid() && memd.ValidMemoryPath(rel) {
		e.flags |= entValid
	}
	if err == nil {
		// The inbox depths as memhtml's doctor counts them (tasks included in the inbox).
		inbox, tasks := memfile.InboxDepth(rel, m)
		if inbox {
			e.flags |= entInbox
		}
		if tasks {
			e.flags |= entTaskInbox
		}
		e.hash = uniqueKey(memfile.UniqueContentKey(rel, m))
	}
	if path.Dir(rel) == memd.ArcsDir {
		e.flags |= entArc
	}
	return e
}

// uniqueKey folds a content hash to the inventory's 8 bytes (0: none); a collision of two
// different articles is 2^-64 a pair.
func uniqueKey(h string) uint64 {
	if h == "" {
		return 0
	}
	f := fnv.New64a()
	f.Write([]byte(h))
	return max(f.Sum64(), 1)
}

// parseMemories parses rels on all cores but one; the result is in the order of rels.
func parseMemories(root string, rels []string) []invEntry {
	out := make([]invEntry, len(rels))
	// One core is left to the owner: the first inventory is built while memd commits.
	_ = workpool.Each(len(rels), max(1, runtime.GOMAXPROCS(0)-1), func(i int) error {
		info, err := os.Lstat(filepath.Join(root, filepath.FromSlash(rels[i])))
		if err != nil {
			out[i] = invEntry{bucket: bucketIndex(rels[i])}
			return nil
		}
		out[i] = parseEntry(root, rels[i], info)
		return nil
	})
	return out
}

// buildInventory makes the first full inventory off the owner goroutine (at 100k files it
// parses for seconds; memd must not wait for it to be ready). The owner swaps it in.
func buildInventory(cfg memd.Config, ign *repofiles.Ignorer) *inventory {
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

// snapshot reports the kept counts: O(buckets + MEMORY.md files), and the ledger's notes
// once more only when one of them is due to change state.
func (v *inventory) snapshot(now time.Time) invSnapshot {
	var s invSnapshot
	s.Memories = make(map[string]int, len(memd.Buckets))
	for i, b := range memd.Buckets {
		s.Memories[string(b)] = v.n.buckets[i]
	}
	s.Inbox, s.TaskInbox, s.Invalid, s.Arcs = v.n.inbox, v.n.taskInbox, v.n.invalid, v.n.arcs
	s.Duplicates = v.duplicates
	s.Snapshot.Inbox, s.Snapshot.TaskInbox, s.Snapshot.Invalid = s.Inbox, s.TaskInbox, s.Invalid
	if v.ledger != nil && (v.lc.records == nil || !now.Before(v.lc.next) || now.Before(v.lc.at)) {
		v.lc = v.countLedger(now)
	}
	// The maps are shared by every snapshot until the counts change: a published snapshot
	// is never modified (metrics.Snapshot), and countLedger makes new ones.
	s.LedgerRecords, s.LedgerNotes = v.lc.records, v.lc.notes
	if s.LedgerRecords == nil {
		s.LedgerRecords, s.LedgerNotes = map[string]int{}, map[metrics.NoteKey]int{}
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

// countLedger counts the ledger's records and notes at now, and finds when a note next
// changes state (its expiry, or the end of its grace), after which they are counted again.
func (v *inventory) countLedger(now time.Time) ledgerCounts {
	lc := ledgerCounts{at: now, records: map[string]int{}, notes: map[metrics.NoteKey]int{}}
	grace := v.cfg.Expire.SoftGrace.D()
	for _, r := range v.ledger.Records() {
		v.touched++
		lc.records[r.Type]++
		if r.Type != memd.RecordNote || r.Lifecycle == nil {
			continue
		}
		lc.notes[metrics.NoteKey{Mode: r.Lifecycle.Mode, State: noteState(r, now, grace)}]++
		// The judgement's own clock (one rule): past t its verdict may change.
		if t, ok := ledger.NoteChangesAfter(r, now, grace); ok && (lc.next.IsZero() || t.Before(lc.next)) {
			lc.next = t
		}
	}
	if lc.next.IsZero() {
		lc.next = now.Add(100 * 365 * 24 * time.Hour) // nothing will change with time
	}
	return lc
}

// noteState is a note's memd_ledger_notes state: sleep's own verdict (ledger.JudgeNote), so
// the gauge counts as expired exactly what the next sleep drains.
func noteState(r *ledger.Record, now time.Time, grace time.Duration) string {
	return ledger.JudgeNote(r, now, grace).State()
}

// inventoryAfterMove refreshes the inventory for what a merge, fast-forward or sleep run
// changed between HEAD before it and now (a tree diff: O(changed)); a full scan when the
// diff cannot be made.
func (a *Agent) inventoryAfterMove(before string) {
	after, err := a.repo.Head()
	if err == nil && after == before {
		return
	}
	var paths []string
	if err == nil {
		paths, err = a.repo.ChangedPaths(before, after)
	}
	if err != nil {
		a.log.Warn("inventory: diff after the head moved; scanning the tree", "err", err)
		a.treeRescanned()
		return
	}
	a.filesChanged(paths)
}

// filesChanged notes paths that may have changed (a commit's, a move's) where the owner
// keeps what it knows of the tree: the inventory and the conflict list's cache.
func (a *Agent) filesChanged(paths []string) {
	a.inv.update(a.cfg.Repo, paths)
	a.conflicts.touch(paths)
}

// treeRescanned is filesChanged for anything: the inventory walks the tree again.
func (a *Agent) treeRescanned() {
	a.inv.scan(a.cfg.Repo, a.files())
	a.conflicts.touchAll()
}

// changedFiles are a commit's file paths (a batch may name a new directory instead).
func changedFiles(cs []memd.Change) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Path)
	}
	return out
}

// setConfig takes a reloaded config (SIGHUP) without a restart: a new expire.soft_grace
// re-judges the notes at the next snapshot, a new expire.ledger is read in place of the old.
func (v *inventory) setConfig(cfg memd.Config) {
	old := v.cfg.Expire
	v.cfg = cfg
	if cfg.Expire.SoftGrace != old.SoftGrace {
		v.lc = ledgerCounts{}
	}
	if cfg.Expire.Ledger != old.Ledger {
		v.ledger, v.ledgerT, v.lc = nil, time.Time{}, ledgerCounts{}
		v.update(cfg.Repo, []string{cfg.Expire.Ledger})
	}
}
