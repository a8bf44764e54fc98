package treemerge

// Merge policy: pure functions over blob contents that decide what a path
// holds after a three-way merge (docs/ARCHITECTURE.md §4). No git, no disk:
// the tree merge (sync/treemerge) feeds them the base, ours and theirs bytes
// and writes what they return.

import (
	"bytes"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/ledger"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/memorymd"
)

// FileKind says which merge rule applies to a path.
type FileKind int

const (
	// KindOther is any file without a special rule: on a real conflict
	// theirs stays at the path and ours is written beside it as a
	// conflict copy.
	KindOther FileKind = iota
	// KindLedger is the memory.jsonl ledger: merged by record id.
	KindLedger
	// KindLineUnion is an append-only log (*.drained.jsonl,
	// *.conflicts.jsonl): union of lines.
	KindLineUnion
	// KindIndexMD is an index-kind MEMORY.md: union of bullets.
	KindIndexMD
	// KindDerived is a file sleep or memhtml renders again (arcs, memhtml's
	// index.html / sitemap.xml listings): theirs wins, never conflict-copied.
	KindDerived
	// KindProjectMD is a project-kind MEMORY.md: merged by section and
	// bullet (MergeProjectMemoryMD).
	KindProjectMD
	// KindTopicFile is a *.md beside a project-kind MEMORY.md (history.md,
	// …): merged by line (MergeTopicFile).
	KindTopicFile
	// KindNewer is a derived file of the project-memory layout
	// (MEMORY.pre-migration.md, memory-save.failed-reply.txt): the newer
	// side wins, never conflict-copied.
	KindNewer
	// KindAccessState is memhtml's state-plane sidecar (AccessStatePath):
	// merged row by row with the maximum of each counter (MergeAccessState).
	KindAccessState
)

func (k FileKind) String() string {
	switch k {
	case KindLedger:
		return "ledger"
	case KindLineUnion:
		return "line-union"
	case KindIndexMD:
		return "index-md"
	case KindDerived:
		return "derived"
	case KindProjectMD:
		return "project-md"
	case KindTopicFile:
		return "topic-file"
	case KindNewer:
		return "newer"
	case KindAccessState:
		return "access-state"
	default:
		return "other"
	}
}

// claudeCodePrefix: Claude Code's memories, one folder per project (memd.ClaudeCodeDir).
const claudeCodePrefix = memd.ClaudeCodeDir + "/"

// arcsDirPrefix: derived arcs live under ArcsDir.
const arcsDirPrefix = memd.ArcsDir + "/"

// Policy holds what the per-path rules need to know beyond the bytes.
type Policy struct {
	// Ledgers are the repo-relative ledger paths merged by record id;
	// empty means DefaultLedgerFile.
	Ledgers []string
	// Host names the machine in conflict copy names.
	Host string
	// Now stamps conflict copy names (UTC, second precision).
	Now time.Time
	// OursTime and TheirsTime are the commit times of the two sides' heads:
	// a KindNewer path takes the side whose head is later (theirs on a tie).
	OursTime, TheirsTime time.Time

	// MemoryMDAt returns the versions of a MEMORY.md in the two trees being
	// merged (ours, theirs; nil where absent), so a topic file is told by the
	// MEMORY.md in its directory. The tree merge sets it.
	MemoryMDAt func(mdPath string) [][]byte

	// Filter, when set, turns a path's blobs into the text the rules read and the merged
	// text back into a blob (git's smudge and clean: a ledger under git-crypt is merged
	// on its plaintext and stored encrypted). nil: blobs are the text.
	Filter BlobFilter
}

// BlobFilter is Policy.Filter. Plain's ok false: the path is not filtered (blob is the
// text). An error leaves the path to a conflict copy of ours, never a merge of ciphertext.
type BlobFilter interface {
	Plain(path string, blob []byte) (text []byte, ok bool, err error)
	Blob(path string, text []byte) ([]byte, error)
}

func (p Policy) isLedger(name string) bool {
	if len(p.Ledgers) == 0 {
		return name == memd.DefaultLedgerFile
	}
	for _, l := range p.Ledgers {
		if name == l {
			return true
		}
	}
	return false
}

// KindOf classifies a path. contents are the versions at hand (base, ours,
// theirs; nil for an absent side): a MEMORY.md is merged as the index kind
// (or the project kind) only when every present version is of that kind,
// otherwise it is treated as an ordinary file, so neither kind is ever
// merged by the other's rule. A *.md is a topic file when the MEMORY.md in
// its directory is project-kind in ours' or theirs' tree (MemoryMDAt).
func (p Policy) KindOf(name string, contents ...[]byte) FileKind {
	base := path.Base(name)
	switch {
	case name == AccessStatePath:
		return KindAccessState
	case p.isLedger(name):
		return KindLedger
	case strings.HasSuffix(base, ".drained.jsonl"), strings.HasSuffix(base, ".conflicts.jsonl"):
		return KindLineUnion
	case memd.IsGenerated(name), strings.HasPrefix(name, arcsDirPrefix) && allMemdArcs(contents):
		// memhtml's index.html / sitemap.xml listings are regenerated (its .gitattributes
		// merges them merge=ours): derived like memd's arcs. An arc memd did not write (a
		// curated one, memhtml's own) is a file like any other: never dropped for theirs.
		return KindDerived
	case memorymd.IsProjectLayoutDerived(name):
		return KindNewer
	case base == memd.MemoryMDName && strings.HasPrefix(name, claudeCodePrefix):
		// Claude Code's index (`- [Title](file.md) — hook`, one line a memory): merged by
		// line like a topic file, so two machines' added memories keep both lines.
		return KindTopicFile
	case base == memd.MemoryMDName:
		return memoryMDKind(contents)
	case memorymd.IsTopicFileName(base) && p.besideProjectMD(name):
		return KindTopicFile
	}
	return KindOther
}

// allMemdArcs reports whether no present version is a memory someone else wrote: every one
// is an arc memd wrote (IsMemdArc) or not a memory at all (no memhtml-type).
func allMemdArcs(contents [][]byte) bool {
	for _, c := range contents {
		if len(c) == 0 {
			continue
		}
		if m := memfile.ParseBytes(c); m.Type != "" && !memfile.IsMemdArc(m) {
			return false
		}
	}
	return true
}

// memoryMDKind: index-kind (or project-kind) only when every present version
// is, so a file that might be the other kind is never merged as this one.
func memoryMDKind(contents [][]byte) FileKind {
	index, project := 0, 0
	for _, c := range contents {
		if len(bytes.TrimSpace(c)) == 0 {
			continue // absent or empty (a new file): no evidence either way
		}
		switch memorymd.Detect(c) {
		case memorymd.KindIndex:
			index++
		case memorymd.KindProject:
			project++
		default:
			return KindOther
		}
	}
	switch {
	case index > 0 && project == 0:
		return KindIndexMD
	case project > 0 && index == 0:
		return KindProjectMD
	}
	return KindOther
}

// besideProjectMD says whether the MEMORY.md in name's directory is
// project-kind on either side of the merge.
func (p Policy) besideProjectMD(name string) bool {
	if p.MemoryMDAt == nil {
		return false
	}
	for _, v := range p.MemoryMDAt(path.Join(path.Dir(name), memd.MemoryMDName)) {
		if memorymd.Detect(v) == memorymd.KindProject {
			return true
		}
	}
	return false
}

// ConflictsPathFor is where the losers of a ledger merge go:
// memory.jsonl → memory.conflicts.jsonl, in the ledger's directory.
func ConflictsPathFor(ledger string) string {
	dir, base := path.Split(ledger)
	stem := strings.TrimSuffix(base, path.Ext(base))
	return dir + stem + ".conflicts.jsonl"
}

// splitLines splits into lines without their "\n" (a trailing "\r" is kept:
// bytes are preserved). A missing final newline still yields the last line.
func splitLines(b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	lines := bytes.Split(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func joinLines(lines [][]byte) []byte {
	if len(lines) == 0 {
		return []byte{}
	}
	n := 0
	for _, l := range lines {
		n += len(l) + 1
	}
	out := make([]byte, 0, n)
	for _, l := range lines {
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out
}

// MergeLineUnion merges an append-only line log: theirs' lines in their
// order, then ours' lines theirs lacks (counted as a multiset, so a line
// written twice on purpose stays twice). Nothing either side holds is lost.
func MergeLineUnion(base, ours, theirs []byte) []byte {
	_ = base // a union needs no base: both sides only append
	tl := splitLines(theirs)
	have := make(map[string]int, len(tl))
	out := make([][]byte, 0, len(tl)+8)
	for _, l := range tl {
		have[string(l)]++
		out = append(out, l)
	}
	for _, l := range splitLines(ours) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		if have[string(l)] > 0 {
			have[string(l)]--
			continue
		}
		out = append(out, l)
	}
	return joinLines(out)
}

// AppendMissingLines appends to data each of lines it does not already hold
// (used to add ledger losers to a conflicts file without duplicating them).
func AppendMissingLines(data []byte, lines [][]byte) []byte {
	if len(lines) == 0 {
		return data
	}
	have := make(map[string]bool)
	for _, l := range splitLines(data) {
		have[string(l)] = true
	}
	out := append([]byte(nil), data...)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	for _, l := range lines {
		if have[string(l)] {
			continue
		}
		have[string(l)] = true
		out = append(out, l...)
		out = append(out, '\n')
	}
	return out
}

// ledgerLine is one line of a ledger, keyed when it parses as a record with
// an id. Duplicate ids in one file get an occurrence suffix so every line
// keeps its own identity and none is folded away.
type ledgerLine struct {
	key  string // "" = unparseable or no id: kept verbatim
	raw  []byte
	when time.Time
}

// parsedStamp is a line's id and time, cached by line text: most lines are
// the same in base, ours and theirs and are decoded once.
type parsedStamp struct {
	id   string // "" = unparseable or no id
	when time.Time
}

func parseLedgerLines(b []byte, cache map[string]parsedStamp) []ledgerLine {
	var out []ledgerLine
	seen := map[string]int{}
	for _, raw := range splitLines(b) {
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 {
			continue // blank lines carry nothing
		}
		ps, ok := cache[string(trimmed)]
		if !ok {
			// The model's reader: what it cannot read (or has no id) is kept verbatim.
			if r, err := ledger.ParseRecord(trimmed); err == nil && r.ID != "" {
				ps.id = strconv.Quote(r.ID) // quoted: the "#n" of a duplicate cannot collide with an id
				ps.when, _ = memd.ParseTime(r.UpdatedAt)
				if ps.when.IsZero() {
					ps.when, _ = memd.ParseTime(r.CreatedAt)
				}
			}
			cache[string(trimmed)] = ps
		}
		ll := ledgerLine{raw: raw, when: ps.when}
		if ps.id != "" {
			n := seen[ps.id]
			seen[ps.id] = n + 1
			ll.key = ps.id
			if n > 0 {
				ll.key = ps.id + "#" + itoa(n)
			}
		}
		out = append(out, ll)
	}
	return out
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// MergeLedger merges memory.jsonl by record id. The result follows theirs'
// order with ours' changes replayed:
//   - a record only one side changed takes that side's line;
//   - both changed one id differently: the later updatedAt (else createdAt)
//     wins; on a tie theirs wins (it is already shared). The loser's line is
//     returned in losers, for <ledger>.conflicts.jsonl;
//   - a record only one side added is kept (ours' additions go at the end);
//   - a record one side deleted (drained by sleep) and the other left
//     unchanged stays deleted; deleted on one side and changed on the other,
//     the changed line stays;
//   - lines that do not parse (or have no id) from both sides are kept
//     verbatim (theirs in place, ours' extra ones at the end).
func MergeLedger(base, ours, theirs []byte) (merged []byte, losers [][]byte) {
	cache := map[string]parsedStamp{}
	bl, ol, tl := parseLedgerLines(base, cache), parseLedgerLines(ours, cache), parseLedgerLines(theirs, cache)
	bm, om, tm := ledgerByKey(bl), ledgerByKey(ol), ledgerByKey(tl)
	tRaw := map[string]int{} // theirs' lines without an id, by content
	for _, l := range tl {
		if l.key == "" {
			tRaw[string(l.raw)]++
		}
	}

	var out [][]byte
	for _, t := range tl {
		if t.key == "" {
			out = append(out, t.raw)
			continue
		}
		b, inBase := bm[t.key]
		o, inOurs := om[t.key]
		line, keep, loser := mergeLedgerRecord(b, inBase, o, inOurs, t)
		if keep {
			out = append(out, line)
		}
		if loser != nil {
			losers = append(losers, loser)
		}
	}
	return joinLines(appendOursOnly(out, ol, bm, tm, tRaw)), losers
}

// ledgerByKey indexes the lines that have an id.
func ledgerByKey(lines []ledgerLine) map[string]ledgerLine {
	m := map[string]ledgerLine{}
	for _, l := range lines {
		if l.key != "" {
			m[l.key] = l
		}
	}
	return m
}

// mergeLedgerRecord decides the record theirs (t) holds, given base's and
// ours' lines for its id: the line kept (keep false: it stays deleted) and
// the loser's line when both changed it.
func mergeLedgerRecord(b ledgerLine, inBase bool, o ledgerLine, inOurs bool, t ledgerLine) (line []byte, keep bool, loser []byte) {
	oursChanged := !inBase || !inOurs || !bytes.Equal(o.raw, b.raw)
	theirsChanged := !inBase || !bytes.Equal(t.raw, b.raw)
	switch {
	case inOurs && bytes.Equal(o.raw, t.raw):
		return t.raw, true, nil
	case !oursChanged:
		return t.raw, true, nil // only theirs changed (or nobody)
	case !inOurs:
		// ours deleted it (inBase must hold, else oursChanged is about
		// an id ours never had). Unchanged on theirs → stays deleted;
		// changed on theirs → the change survives.
		if !inBase || theirsChanged {
			return t.raw, true, nil
		}
		return nil, false, nil
	case !theirsChanged:
		return o.raw, true, nil // only ours changed
	default:
		// both changed (or both added) the id differently
		if o.when.After(t.when) {
			return o.raw, true, t.raw
		}
		return t.raw, true, o.raw
	}
}

// appendOursOnly appends ours' lines theirs does not hold: records only ours
// added or changed after theirs deleted them, and lines without an id that
// theirs has fewer copies of (tRaw counts theirs'; it is consumed).
func appendOursOnly(out [][]byte, ol []ledgerLine, bm, tm map[string]ledgerLine, tRaw map[string]int) [][]byte {
	for _, o := range ol {
		if o.key == "" {
			if tRaw[string(o.raw)] > 0 {
				tRaw[string(o.raw)]--
				continue
			}
			out = append(out, o.raw)
			continue
		}
		if _, ok := tm[o.key]; ok {
			continue // handled in theirs' pass
		}
		b, inBase := bm[o.key]
		switch {
		case !inBase:
			out = append(out, o.raw) // added by ours only
		case bytes.Equal(o.raw, b.raw):
			// theirs deleted it, ours left it alone: stays deleted
		default:
			out = append(out, o.raw) // theirs deleted, ours changed: keep
		}
	}
	return out
}
