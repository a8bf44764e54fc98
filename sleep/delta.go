package sleep

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/memd-dev/memd"
)

// The delta plan: the usual night after a day of writes. Agents added or edited a few
// memory files, MEMORY.md files and ledger notes, so the idle record's key no longer
// matches, but the plans would still come out empty. Rather than parse and plan the whole
// tree, the run diffs its walk with the walk the record was made from
// (<state>/sleep-idle.walk) and judges only what differs. It answers with the record's
// results only when it can show that planning the whole tree would give exactly them:
//
//   - The base (config, executable) is the record's, the clock is in the record's window,
//     and the record has every phase to plan.
//   - Every difference is a memory file or a MEMORY.md added, or changed in place, outside
//     archive/ and areas/arcs/; a changed memory file is no episode (by date prefix or
//     type) and was none before, as far as the parse cache shows (it may have been an arc
//     member: episodes are episodes by type, whatever their names). Any other difference (a file deleted, any other file added, an
//     incomplete walk) means a full plan. Unchanged stats vouch for unchanged bytes only
//     outside the racy window of the record's walk.
//   - No item of the record's results names one of those files (every per-file count comes
//     with such an item: a move skipped because its destination exists, a file with no
//     year), and each of them, read and parsed now, makes no phase act or report: expire
//     and archive judge a file by itself alone (expireFile, archiveFile); arcs groups by
//     the file alone (arcKeysOf) and no group it joins reaches arcs.min_episodes (the
//     record keeps every group's size); tidy rewrites a file's links only to paths that no
//     longer exist, and every link of the file names an existing file. A MEMORY.md is
//     planned by tidy's own code (tidyMD) with every bullet target taken as staying, which
//     must come out empty, and every bullet target must exist.
//   - A changed ledger is planned by expire's own code (planLedger), which reads nothing
//     else unless it drains: it must drain nothing, and its counts and items replace the
//     ledger's part of the recorded expire result.
//   - Nothing a file that did not change contributes can change: its parse is the same,
//     and added memory files outside archive/ only take paths out of what tidy would
//     repoint.
//
// HEAD is left out: no planner reads git, and memd commits the day's writes, so HEAD moves
// every day. The new record (the walked tree, the results, the earliest of its window's
// end and the new files' and notes' own thresholds) is written like any idle record, so
// the next night compares with today.
const (
	idleWalkName  = "sleep-idle.walk"
	idleWalkMagic = "memd sleep idle walk\n"
	// maxDeltaFiles bounds the files a delta plan reads: beyond it a full plan (which also
	// brings the parse cache up to date) costs about as much.
	maxDeltaFiles = 2000
)

// walkCompare orders paths as walkTree lists them: in each directory its files by name,
// then its subdirectories by name, each depth first.
func walkCompare(a, b string) int {
	for {
		ia, ib := strings.IndexByte(a, '/'), strings.IndexByte(b, '/')
		switch {
		case ia < 0 && ib < 0:
			return strings.Compare(a, b)
		case ia < 0:
			return -1 // a file of this directory before anything in a subdirectory
		case ib < 0:
			return 1
		}
		if c := strings.Compare(a[:ia], b[:ib]); c != 0 {
			return c
		}
		a, b = a[ia+1:], b[ib+1:]
	}
}

// writeIdleWalk writes the walk (every path, its kind and stat) and the arc group sizes
// (nil: arcs not planned), tagged with the record's key.
func writeIdleWalk(dir, key string, t *tree, groups map[arcKey]int) error {
	err := writeStreamRename(filepath.Join(dir, idleWalkName), 0o600, func(w *bufio.Writer) error {
		// Streamed entry by entry: the whole record is ~11 MB at 100k files.
		b := make([]byte, 0, 512)
		str := func(s string) {
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
		b = append(b, idleWalkMagic...)
		b = binary.AppendUvarint(b, idleVersion)
		str(key)
		b = binary.AppendUvarint(b, uint64(len(t.files)))
		for _, f := range t.files {
			str(f.rel)
			b = append(b, walkFlags(f))
			if f.statted {
				b = binary.AppendVarint(b, f.st.Size)
				b = binary.AppendVarint(b, f.st.Mtime)
				b = binary.AppendVarint(b, f.st.Ctime)
				b = binary.AppendUvarint(b, f.st.Ino)
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			b = b[:0]
		}
		if groups == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = binary.AppendUvarint(b, uint64(len(groups)))
			for k, n := range groups {
				str(k.entity)
				b = binary.AppendVarint(b, int64(k.year))
				b = binary.AppendUvarint(b, uint64(n))
			}
		}
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("idle walk: %w", err)
	}
	return nil
}

func walkFlags(f treeFile) byte {
	var fl byte
	if f.mem {
		fl |= 1
	}
	if f.statted {
		fl |= 2
	}
	return fl
}

// idleWalk is a loaded walk file, read entry by entry (paths share the file's one string).
type idleWalk struct {
	r     cacheReader
	count int
}

// readIdleWalk opens the walk recorded with key; nil when there is none or it is another's.
func readIdleWalk(dir, key string) *idleWalk {
	b, err := readFileString(filepath.Join(dir, idleWalkName))
	if err != nil || !strings.HasPrefix(b, idleWalkMagic) {
		return nil
	}
	w := &idleWalk{r: cacheReader{data: b, pos: len(idleWalkMagic)}}
	if w.r.uvarint() != idleVersion || w.r.str() != key {
		return nil
	}
	w.count = int(min(w.r.uvarint(), uint64(len(b))))
	if w.r.err != nil {
		return nil
	}
	return w
}

// next reads the next entry.
func (w *idleWalk) next() (f treeFile, ok bool) {
	f.rel = w.r.str()
	fl := w.r.byte()
	f.mem, f.statted = fl&1 != 0, fl&2 != 0
	if f.statted {
		f.st.Size, f.st.Mtime, f.st.Ctime, f.st.Ino = w.r.varint(), w.r.varint(), w.r.varint(), w.r.uvarint()
	}
	return f, w.r.err == nil
}

// groups reads the arc group sizes after the entries (nil, true when none were recorded).
func (w *idleWalk) groups() (map[arcKey]int, bool) {
	if w.r.byte() == 0 {
		return nil, w.r.err == nil && w.r.pos == len(w.r.data)
	}
	n := int(min(w.r.uvarint(), uint64(len(w.r.data))))
	out := make(map[arcKey]int, n)
	for range n {
		k := arcKey{entity: w.r.str(), year: int(w.r.varint())}
		out[k] = int(w.r.uvarint())
	}
	return out, w.r.err == nil && w.r.pos == len(w.r.data)
}

// diffWalk compares the recorded walk with t: the memory files and MEMORY.md files (the
// stat'ed ones) added and changed, and the latest stamp of the unchanged ones; ok false
// when anything else differs (a file deleted, any other file added) or the record is
// unreadable. A walk whose memory files and MEMORY.md files all have a stat is complete
// (checked by the caller).
func diffWalk(w *idleWalk, t *tree) (added, changed []string, sameStamp int64, ok bool) {
	i := 0
	for range w.count {
		old, ok := w.next()
		if !ok {
			return nil, nil, 0, false
		}
		for i < len(t.files) && t.files[i].rel != old.rel && walkCompare(t.files[i].rel, old.rel) < 0 {
			if !t.files[i].statted {
				return nil, nil, 0, false // a new file the planners do not judge by itself
			}
			added = append(added, t.files[i].rel)
			i++
		}
		if i == len(t.files) || t.files[i].rel != old.rel {
			return nil, nil, 0, false // deleted
		}
		f := t.files[i]
		i++
		if walkFlags(f) != walkFlags(old) {
			return nil, nil, 0, false
		}
		// (A file without a stat is one the planners only see exist.)
		if f.statted && f.st != old.st {
			changed = append(changed, f.rel)
		} else if f.statted {
			sameStamp = max(sameStamp, f.st.stamp())
		}
	}
	for ; i < len(t.files); i++ {
		if !t.files[i].statted {
			return nil, nil, 0, false
		}
		added = append(added, t.files[i].rel)
	}
	return added, changed, sameStamp, true
}

// deltaPlan is a delta plan that holds: the record's results hold for the walked tree,
// up to until.
type deltaPlan struct {
	until  time.Time
	groups map[arcKey]int // nil when the record had none
	read   int            // memory files read
	// phases replaces recorded results that changed (expire, after a changed ledger).
	phases map[string]*idlePhase
}

// planDelta returns the delta plan for the walk t at now, or nil and why not.
func (r *Runner) planDelta(rec *idleRecord, in idleInputs, t *tree, now time.Time, phases []string) (*deltaPlan, string) {
	switch {
	case rec == nil:
		return nil, "no idle record"
	case !in.ok || !t.complete:
		return nil, "incomplete walk"
	case rec.Base == "" || rec.Base != in.base:
		return nil, "config or executable changed"
	case now.Before(rec.From) || now.Year() != rec.Year || (!rec.Until.IsZero() && !now.Before(rec.Until)):
		return nil, "clock outside the record's window"
	}
	for _, ph := range phases {
		if rec.phase(ph) == nil {
			return nil, "phase " + ph + " not recorded"
		}
	}
	w := readIdleWalk(r.opts.StateDir, rec.Key)
	if w == nil {
		return nil, "no walk for the record"
	}
	added, changed, sameStamp, ok := diffWalk(w, t)
	if !ok {
		return nil, "a file other than a memory file or MEMORY.md was added or changed, or a file was deleted"
	}
	// An unchanged stat proves unchanged bytes only outside the racy window of the walk
	// the record was made from (as for the idle record itself).
	ledgerSame := in.ledgerState == rec.Ledger
	if ledgerSame {
		sameStamp = max(sameStamp, in.ledger)
	}
	if sameStamp >= rec.Saved-racyWindow {
		return nil, "files touched within the racy window of the record's walk"
	}
	groups, ok := w.groups()
	if !ok {
		return nil, "damaged walk record"
	}
	if groups == nil && slices.Contains(phases, PhaseArcs) {
		return nil, "no arc groups recorded"
	}
	if len(added)+len(changed) > maxDeltaFiles {
		return nil, "too many changed files"
	}
	isNew := make(map[string]bool, len(added))
	for _, p := range added {
		isNew[p] = true
	}
	// What a file contributes to an empty plan's results (a skipped move, a file with no
	// year) is an item naming it: a file named there may report differently now.
	named := map[string]bool{}
	for _, ph := range rec.Phases {
		for _, it := range ph.Items {
			named[it.Path], named[it.To] = true, true
		}
	}
	env := &planEnv{cfg: r.opts.Config, now: now}
	grace := env.cfg.Expire.SoftGrace.D()
	thresholds := newPlan() // only its until: the same "past is strict" rule as the planners
	joined := map[arcKey]int{}
	targets := map[string]bool{} // link targets that must exist
	rd := &snapshot{root: r.dir}
	var keys []arcKey
	wasMember := cachedArcMembers(r.opts.StateDir, changed, isNew, r.opts.Config.Arcs.Key)
	for _, p := range slices.Concat(added, changed) {
		if strings.HasPrefix(p, memd.BucketArchive+"/") || strings.HasPrefix(p, memd.ArcsDir+"/") {
			return nil, p + ": in archive/ or the arcs directory"
		}
		if named[p] {
			return nil, p + ": named in the recorded results"
		}
		if isMemoryMD(p) {
			// Tidy alone reads it: planned on its own, with every bullet's target taken
			// as moved away unless it exists (checked below).
			data, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(p)))
			if err != nil {
				return nil, p + ": unreadable"
			}
			tp := newPlan()
			tidyMD(rd, env, tp, p, data, func(q string) (string, bool) {
				targets[q] = true
				return "", false
			})
			if len(tp.ops) > 0 || len(tp.items) > 0 || len(tp.counts) > 0 {
				return nil, p + ": tidy would act on it or report it"
			}
			continue
		}
		if _, dated := memd.EpisodeDate(p); dated && !isNew[p] {
			return nil, p + ": a changed episode (it may be an arc member)"
		}
		res := rd.readOne(readJob{path: p})
		m := res.m
		if m == nil || !res.key.hashed {
			return nil, p + ": unreadable or oversize"
		}
		// An episode is one by its type, whatever its name: a changed one may be an arc
		// member (what the arc shows of it changes), and so may one that was an episode
		// before this change.
		if !isNew[p] && (m.IsEpisode() || wasMember[p]) {
			return nil, p + ": a changed episode (it may be an arc member)"
		}
		if _, moves, until := expireFile(p, m, now, grace); moves {
			return nil, p + ": expire would archive it"
		} else if !until.IsZero() {
			thresholds.changesAfter(until)
		}
		if why, until := archiveFile(p, m, env); why != "" {
			return nil, p + ": archive would move it"
		} else if !until.IsZero() {
			thresholds.changesAfter(until)
		}
		keys, _ = arcKeysOf(p, m, r.opts.Config.Arcs.Key, keys[:0])
		for _, k := range keys {
			joined[k]++
		}
		for _, ref := range m.Refs {
			if lp, err := memd.HrefToPath(ref); err == nil {
				targets[lp] = true
			}
		}
	}
	if len(targets) > 0 {
		found := 0
		for _, f := range t.files {
			if targets[f.rel] {
				found++
			}
		}
		if found != len(targets) {
			return nil, "a link or index bullet to a file that does not exist (tidy may repoint it)"
		}
	}
	if len(joined) > 0 {
		if groups == nil {
			return nil, "no arc groups recorded"
		}
		min := arcsMin(r.opts.Config)
		for k, n := range joined {
			if groups[k]+n >= min {
				return nil, "group " + k.entity + " reaches arcs.min_episodes"
			}
		}
		for k, n := range joined {
			groups[k] += n
		}
	}
	d := &deltaPlan{groups: groups, read: len(added) + len(changed)}
	if !ledgerSame && slices.Contains(phases, PhaseExpire) {
		ip, why := r.deltaLedger(rec, in, env, thresholds)
		if ip == nil {
			return nil, why
		}
		d.phases = map[string]*idlePhase{PhaseExpire: ip}
	}
	d.until = rec.Until
	if !thresholds.until.IsZero() && (d.until.IsZero() || thresholds.until.Before(d.until)) {
		d.until = thresholds.until
	}
	return d, ""
}

// cachedArcMembers reports which of the changed (not new) memory files may have been arc
// members before the change, judged by the parse the parse cache holds for each (episodes
// are episodes by type, whatever their names, so the name cannot say). The cache holds the
// version a plan that made it a member saw (such a plan writes the arc, and a run that
// applies saves the cache) or an older one; a path it does not hold counts as a member.
func cachedArcMembers(stateDir string, changed []string, isNew map[string]bool, key string) map[string]bool {
	var paths []string
	for _, p := range changed {
		if !isNew[p] {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	out := make(map[string]bool, len(paths))
	for _, p := range paths {
		out[p] = true
	}
	pc := openParseCache(stateDir)
	if pc == nil {
		return out
	}
	slices.Sort(paths) // the cache is sorted: one merge
	var slab memSlab
	var keys []arcKey
	for _, p := range paths {
		e, ok := pc.seek(p)
		if !ok {
			continue
		}
		m, err := decodeMem(e.payload, &slab)
		if err != nil {
			continue
		}
		keys, _ = arcKeysOf(p, m, key, keys[:0])
		out[p] = len(keys) > 0
	}
	return out
}

// deltaLedger plans a changed ledger the way expire does (planLedger reads nothing else
// unless it drains a note): it must drain nothing. The expire result is then the ledger's
// counts and items followed by what the record has from memory files (their skipped
// moves: expire plans the ledger first), and its clock thresholds go to thresholds.
func (r *Runner) deltaLedger(rec *idleRecord, in idleInputs, env *planEnv, thresholds *plan) (*idlePhase, string) {
	if !in.ledgerExists || rec.Ledger == "" || strings.HasSuffix(rec.Ledger, " absent\n") {
		return nil, "the ledger appeared or went away"
	}
	lpath := ledgerPath(r.opts.Config)
	raw, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(lpath)))
	if err != nil {
		return nil, "ledger unreadable"
	}
	lp := newPlan()
	if err := planLedger(&snapshot{root: r.dir}, env, lp, lpath, raw, env.cfg.Expire.SoftGrace.D()); err != nil {
		return nil, "ledger: " + err.Error()
	}
	if len(lp.ops) > 0 {
		return nil, "expire would drain notes"
	}
	ip := &idlePhase{Name: PhaseExpire, Counts: lp.counts, Items: lp.items}
	old := rec.phase(PhaseExpire)
	for k, v := range old.Counts {
		switch {
		case k == "unparseable" || k == "invalid" || k == "stale" || k == "drained" || strings.HasPrefix(k, "drained_"):
			// the ledger's: replaced
		case k == "skipped":
			ip.Counts[k] += v
		default:
			return nil, "expire recorded " + k
		}
	}
	for _, it := range old.Items {
		if it.Path != lpath {
			ip.Items = append(ip.Items, it)
		}
	}
	if !lp.until.IsZero() && (thresholds.until.IsZero() || lp.until.Before(thresholds.until)) {
		thresholds.until = lp.until // (already past-strict: planLedger used changesAfter)
	}
	return ip, ""
}
