package treemerge

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
)

// AccessStatePath is memhtml's committed state-plane sidecar: one JSON row per memory path
// holding its read and reinforcement counts (memhtml's sleep state-export phase and `memhtml
// state export` write it; `memhtml state import` replays it with max-of upserts).
const AccessStatePath = ".memhtml/state/access.jsonl"

// accessKeys are the sidecar row's fields in the order memhtml renders them
// (packages/sleep state-export.ts toSidecarEntry).
var accessKeys = []string{"path", "accessCount", "reinforcementCount", "outcomeScore", "lastAccessedAt", "lastReinforcedAt", "updatedAt"}

// MergeAccessState merges two versions of the access sidecar row by row, keyed by path, each
// field by a maximum: the counters (accessCount, reinforcementCount) and the timestamps
// (lastAccessedAt, lastReinforcedAt, updatedAt; null below any time) take the larger value;
// outcomeScore, a moving average rather than a counter, comes from the row updated last (the
// larger score on a tie). Every rule is a maximum, so the merge is commutative, associative and
// idempotent: machines merging in any order end with the same file, and no read is lost (what
// memhtml's own import does with a sidecar, and what its design asks of multi-machine counters).
// A row only one side holds, or both hold alike, is kept byte for byte; rows come out in path
// order as memhtml writes them. Lines that are not rows are kept (sorted, once) at the end.
func MergeAccessState(ours, theirs []byte) []byte {
	rows := map[string]accessRow{}
	var other [][]byte
	for _, side := range [][]byte{ours, theirs} {
		for _, line := range splitLines(side) {
			line = bytes.TrimRight(line, "\r")
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			r, ok := parseAccessRow(line)
			if !ok {
				other = append(other, line)
				continue
			}
			if cur, seen := rows[r.path]; seen {
				r = mergeAccessRows(cur, r)
			}
			rows[r.path] = r
		}
	}
	var out [][]byte
	for _, p := range slices.Sorted(maps.Keys(rows)) {
		out = append(out, rows[p].line())
	}
	slices.SortFunc(other, bytes.Compare)
	return joinLines(append(out, slices.CompactFunc(other, bytes.Equal)...))
}

// accessRow is one sidecar row: its fields as raw JSON, and its line while it is unmerged.
type accessRow struct {
	path   string
	fields map[string]json.RawMessage
	raw    []byte // the line as written; nil once merged
}

func parseAccessRow(line []byte) (accessRow, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return accessRow{}, false
	}
	var p string
	if err := json.Unmarshal(fields["path"], &p); err != nil || p == "" {
		return accessRow{}, false // memhtml's import skips a row with no path too
	}
	return accessRow{path: p, fields: fields, raw: slices.Clone(line)}, true
}

// mergeAccessRows is the field-wise maximum of two rows of one path.
func mergeAccessRows(a, b accessRow) accessRow {
	if bytes.Equal(a.raw, b.raw) && a.raw != nil {
		return a
	}
	out := accessRow{path: a.path, fields: map[string]json.RawMessage{"path": a.fields["path"]}}
	for _, k := range []string{"accessCount", "reinforcementCount"} {
		setMax(out.fields, k, a.fields, b.fields, compareNumber)
	}
	for _, k := range []string{"lastAccessedAt", "lastReinforcedAt", "updatedAt"} {
		setMax(out.fields, k, a.fields, b.fields, compareTime)
	}
	// outcomeScore: the pair (updatedAt, outcomeScore) ordered lexicographically.
	if sa, sb := a.fields["outcomeScore"], b.fields["outcomeScore"]; sa != nil || sb != nil {
		c := compareTime(a.fields["updatedAt"], b.fields["updatedAt"])
		if c == 0 {
			c = compareNumber(sa, sb)
		}
		if c == 0 {
			c = -bytes.Compare(sa, sb)
		}
		if c >= 0 && sa != nil || sb == nil {
			out.fields["outcomeScore"] = sa
		} else {
			out.fields["outcomeScore"] = sb
		}
	}
	// Fields memhtml does not write today: the larger raw value, so the rule stays a maximum.
	for k := range maps.Keys(a.fields) {
		if !slices.Contains(accessKeys, k) {
			setMax(out.fields, k, a.fields, b.fields, func(x, y json.RawMessage) int { return bytes.Compare(x, y) })
		}
	}
	for k := range maps.Keys(b.fields) {
		if !slices.Contains(accessKeys, k) {
			setMax(out.fields, k, a.fields, b.fields, func(x, y json.RawMessage) int { return bytes.Compare(x, y) })
		}
	}
	return out
}

// setMax sets out[k] to the larger of a[k] and b[k] by cmp (an absent value is smallest; a
// tie keeps the smaller raw text, so the choice does not depend on the side).
func setMax(out map[string]json.RawMessage, k string, a, b map[string]json.RawMessage, cmp func(x, y json.RawMessage) int) {
	x, y := a[k], b[k]
	switch {
	case x == nil && y == nil:
		return
	case x == nil:
		out[k] = y
	case y == nil:
		out[k] = x
	default:
		c := cmp(x, y)
		if c == 0 {
			c = -bytes.Compare(x, y)
		}
		if c >= 0 {
			out[k] = x
		} else {
			out[k] = y
		}
	}
}

// compareNumber orders JSON numbers by value; anything that is not a number is below them.
func compareNumber(x, y json.RawMessage) int {
	fx, ex := strconv.ParseFloat(string(bytes.TrimSpace(x)), 64)
	fy, ey := strconv.ParseFloat(string(bytes.TrimSpace(y)), 64)
	switch {
	case ex != nil && ey != nil:
		return 0
	case ex != nil:
		return -1
	case ey != nil:
		return 1
	case fx < fy:
		return -1
	case fx > fy:
		return 1
	}
	return 0
}

// compareTime orders the sidecar's ISO timestamps as strings (they sort as text); null and
// anything that is not a string are below every time.
func compareTime(x, y json.RawMessage) int {
	var sx, sy string
	okx := json.Unmarshal(x, &sx) == nil && len(bytes.TrimSpace(x)) > 0 && bytes.TrimSpace(x)[0] == '"'
	oky := json.Unmarshal(y, &sy) == nil && len(bytes.TrimSpace(y)) > 0 && bytes.TrimSpace(y)[0] == '"'
	switch {
	case !okx && !oky:
		return 0
	case !okx:
		return -1
	case !oky:
		return 1
	}
	if sx < sy {
		return -1
	}
	if sx > sy {
		return 1
	}
	return 0
}

// line renders the row: the line as written while unmerged, else memhtml's key order (then
// any other keys, sorted), compact, the values as they were written.
func (r accessRow) line() []byte {
	if r.raw != nil {
		return r.raw
	}
	var b bytes.Buffer
	b.WriteByte('{')
	keys := slices.Clone(accessKeys)
	for _, k := range slices.Sorted(maps.Keys(r.fields)) {
		if !slices.Contains(accessKeys, k) {
			keys = append(keys, k)
		}
	}
	first := true
	for _, k := range keys {
		v, ok := r.fields[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(bytes.TrimSpace(v))
	}
	b.WriteByte('}')
	return b.Bytes()
}
