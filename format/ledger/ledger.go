package ledger

// The memory.jsonl ledger (docs/FORMATS.md §4). memd is not the ledger's owner: writers are. So
// this is a faithful reader/writer: a line memd does not change is written back byte for
// byte, unknown fields keep their place and their bytes, and a line that does not parse is
// kept verbatim. A note's lifecycle is judged here too (JudgeNote), once for every consumer:
// sleep drains by it, the inventory counts by it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/memd-dev/memd"
)

// Lifecycle is a note's lifecycle: mode persistent, read-count, hard-expiry or soft-expiry.
type Lifecycle struct {
	Mode           memd.LifecycleMode `json:"mode"`
	RemainingReads *int               `json:"remainingReads,omitempty"`
	ExpiresAt      string             `json:"expiresAt,omitempty"`
}

// Record is one ledger record. The typed fields mirror the well-known keys; every other key
// (context, repos, anything a newer writer adds) is kept as raw JSON in its original place.
// Change fields either directly (r.Text = "…") or with Set; MarshalJSON notices both.
type Record struct {
	ID, Type, Role, Text, CreatedAt, UpdatedAt string
	Lifecycle                                  *Lifecycle

	raw    []byte      // the original JSON object (trimmed line); nil for a new record
	fields []rawField  // every key in original order, raw key and raw value bytes
	seen   recordTyped // the typed fields as parsed or last Set, to notice direct edits
	dirty  bool        // Set/Delete changed fields
}

type rawField struct {
	key    string
	rawKey []byte // the key as written, quotes and escapes included
	value  json.RawMessage
}

// recordTyped is a comparable snapshot of the typed fields (the lifecycle by value, so an
// edit made through r.Lifecycle is noticed and no copy is allocated).
type recordTyped struct {
	ID, Type, Role, Text, CreatedAt, UpdatedAt string
	LC                                         lcSnap
}

type lcSnap struct {
	set       bool
	Mode      memd.LifecycleMode
	ExpiresAt string
	hasReads  bool
	reads     int
}

func snapLC(lc *Lifecycle) lcSnap {
	if lc == nil {
		return lcSnap{}
	}
	s := lcSnap{set: true, Mode: lc.Mode, ExpiresAt: lc.ExpiresAt}
	if lc.RemainingReads != nil {
		s.hasReads, s.reads = true, *lc.RemainingReads
	}
	return s
}

// The well-known keys and whether a record's typed field holds them.
const (
	keyID        = "id"
	keyType      = "type"
	keyRole      = "role"
	keyText      = "text"
	keyCreatedAt = "createdAt"
	keyUpdatedAt = "updatedAt"
	keyLifecycle = "lifecycle"
)

// ErrNotObject is wrapped by a ledger line's Err when the line is JSON but not an object.
var ErrNotObject = errors.New("not a JSON object")

// ErrBadField is wrapped when a well-known field has the wrong JSON type (e.g. a numeric id).
var ErrBadField = errors.New("bad field")

func (r *Record) typed() recordTyped {
	return recordTyped{r.ID, r.Type, r.Role, r.Text, r.CreatedAt, r.UpdatedAt, snapLC(r.Lifecycle)}
}

func (r *Record) snapshot() recordTyped { return r.typed() }

func copyLifecycle(lc *Lifecycle) *Lifecycle {
	if lc == nil {
		return nil
	}
	c := *lc
	if c.RemainingReads != nil {
		n := *c.RemainingReads
		c.RemainingReads = &n
	}
	return &c
}

// changed reports whether MarshalJSON would write anything but the original bytes.
func (r *Record) changed() bool {
	if r.raw == nil || r.dirty {
		return true
	}
	return r.typed() != r.seen
}

// ParseRecord reads one JSON object. The error names what is wrong; callers add the line.
func ParseRecord(data []byte) (*Record, error) {
	return parseRecord(data, "", nil)
}

// parseArena hands out records and field slices from shared blocks, so parsing a big
// ledger costs a few allocations per block rather than several per line.
type parseArena struct {
	recs   []Record
	fields []rawField
}

func (a *parseArena) record() *Record {
	if a == nil {
		return &Record{}
	}
	if len(a.recs) == 0 {
		a.recs = make([]Record, 512)
	}
	r := &a.recs[0]
	a.recs = a.recs[1:]
	return r
}

func (a *parseArena) fieldBuf() []rawField {
	if a == nil {
		return make([]rawField, 0, 8)
	}
	if cap(a.fields) < 16 {
		a.fields = make([]rawField, 0, 4096)
	}
	return a.fields[:0]
}

// keep takes f (built from fieldBuf) out of the arena, capped so that a later append
// to it copies instead of overwriting the next record's fields.
func (a *parseArena) keep(f []rawField) []rawField {
	n := len(f)
	if a != nil && n > 0 && cap(a.fields) > 0 && &f[0] == &a.fields[:1][0] {
		a.fields = a.fields[n:n]
	}
	return f[:n:n]
}

// parseRecord is ParseRecord with, optionally, data as a string (so string values can be
// slices of it instead of copies) and an arena.
func parseRecord(data []byte, dataStr string, a *parseArena) (*Record, error) {
	trimmed := jsonTrimWS(data)
	if !jsonValid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		if err == nil { // cannot happen; keep an error anyway
			err = errors.New("invalid JSON")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, ErrNotObject
	}
	// trimmed is a sub-slice of data: the capacities give its offset.
	start := cap(data) - cap(trimmed)
	var str string
	if len(dataStr) == len(data) {
		str = dataStr[start : start+len(trimmed)]
	} else {
		str = string(trimmed)
	}
	fields, err := jsonSplitObjectInto(a.fieldBuf(), trimmed, str)
	if err != nil {
		return nil, err
	}
	fields = a.keep(fields)
	r := a.record()
	r.raw, r.fields = trimmed[:len(trimmed):len(trimmed)], fields
	for _, f := range fields {
		off := cap(trimmed) - cap(f.value)
		if err := r.setTyped(f.key, f.value, str[off:off+len(f.value)]); err != nil {
			return nil, err
		}
	}
	r.seen = r.snapshot()
	return r, nil
}

// setTyped decodes a well-known key into its typed field; other keys are ignored. vs is
// value as a string when the caller has it (else ""), to avoid a copy.
func (r *Record) setTyped(key string, value json.RawMessage, vs string) error {
	var dst *string
	switch key {
	case keyID:
		dst = &r.ID
	case keyType:
		dst = &r.Type
	case keyRole:
		dst = &r.Role
	case keyText:
		dst = &r.Text
	case keyCreatedAt:
		dst = &r.CreatedAt
	case keyUpdatedAt:
		dst = &r.UpdatedAt
	case keyLifecycle:
		if jsonIsNull(value) {
			r.Lifecycle = nil
			return nil
		}
		if len(value) == 0 || value[0] != '{' {
			return fmt.Errorf("%w: lifecycle is %s, want an object", ErrBadField, jsonShort(value))
		}
		lc, err := parseLifecycle(value, vs)
		if err != nil {
			return fmt.Errorf("%w: lifecycle %s: %v", ErrBadField, jsonShort(value), err)
		}
		r.Lifecycle = lc
		return nil
	default:
		return nil
	}
	if jsonIsNull(value) {
		*dst = ""
		return nil
	}
	s, ok := jsonDecodeStringIn(value, vs)
	if !ok {
		return fmt.Errorf("%w: %s is %s, want a string", ErrBadField, key, jsonShort(value))
	}
	*dst = s
	return nil
}

// parseLifecycle reads a lifecycle object as encoding/json would into Lifecycle (last
// repeat wins, unknown keys ignored, null leaves a field empty), without reflection.
func parseLifecycle(v []byte, vs string) (*Lifecycle, error) {
	if len(vs) != len(v) {
		vs = ""
	}
	var buf [8]rawField // on the stack: a lifecycle has three keys
	fields, err := jsonSplitObjectInto(buf[:0], v, vs)
	if err != nil {
		return nil, err
	}
	lc := &Lifecycle{}
	for _, f := range fields {
		if jsonIsNull(f.value) {
			continue
		}
		switch f.key {
		case "mode", "expiresAt":
			fs := ""
			if vs != "" {
				off := cap(v) - cap(f.value)
				fs = vs[off : off+len(f.value)]
			}
			s, ok := jsonDecodeStringIn(f.value, fs)
			if !ok {
				return nil, fmt.Errorf("%s is %s, want a string", f.key, jsonShort(f.value))
			}
			if f.key == "mode" {
				lc.Mode = memd.LifecycleMode(s) // unknown modes are carried as written
			} else {
				lc.ExpiresAt = s
			}
		case "remainingReads":
			n, err := strconv.Atoi(string(f.value))
			if err != nil {
				if err := json.Unmarshal(f.value, &n); err != nil {
					return nil, fmt.Errorf("remainingReads is %s, want an integer", jsonShort(f.value))
				}
			}
			lc.RemainingReads = &n
		}
	}
	return lc, nil
}

func jsonIsNull(v []byte) bool { return string(v) == "null" }

func jsonShort(v []byte) string {
	const max = 40
	if len(v) > max {
		return string(v[:max]) + "…"
	}
	return string(v)
}

// jsonDecodeStringIn decodes a raw JSON string, fast when it has no escapes. vs is the
// same bytes as a string (or ""): an escape-free value is then a slice of vs, not a copy.
func jsonDecodeStringIn(v []byte, vs string) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		if len(vs) == len(v) {
			return vs[1 : len(vs)-1], true
		}
		return string(inner), true
	}
	return jsonUnquote(inner)
}

// jsonUnquote decodes the inside of a JSON string literal as encoding/json does: escapes,
// surrogate pairs, and U+FFFD for a lone surrogate or an invalid UTF-8 byte. It reports
// false for what is not a valid literal (a control byte, a bad escape).
func jsonUnquote(in []byte) (string, bool) {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == '\\':
			if i+1 >= len(in) {
				return "", false
			}
			e := in[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := jsonHex4(in, i)
				if !ok {
					return "", false
				}
				i += 4
				if utf16.IsSurrogate(r) {
					if r2, ok := jsonHex4(in, i+2); ok && i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", false
			}
		case c == '"' || c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, in[i:i+size]...)
			}
			i += size
		}
	}
	return string(out), true
}

func jsonHex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, h := range b[i : i+4] {
		switch {
		case h >= '0' && h <= '9':
			h -= '0'
		case h >= 'a' && h <= 'f':
			h = h - 'a' + 10
		case h >= 'A' && h <= 'F':
			h = h - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// jsonSplitObject cuts a valid JSON object into its fields without decoding the values.
// objStr is obj as a string or "": keys are then slices of it.
func jsonSplitObject(obj []byte, objStr string) ([]rawField, error) {
	return jsonSplitObjectInto(make([]rawField, 0, 8), obj, objStr)
}

// jsonSplitObjectInto is jsonSplitObject appending to fields.
func jsonSplitObjectInto(fields []rawField, obj []byte, objStr string) ([]rawField, error) {
	if len(objStr) != len(obj) {
		objStr = ""
	}
	i := jsonSkipWS(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return fields, nil
	}
	for i < len(obj) {
		kEnd := jsonScanValue(obj, i) // a string: the input is valid JSON
		rawKey := obj[i:kEnd]
		var keyStr string
		if objStr != "" {
			keyStr = objStr[i:kEnd]
		}
		key, ok := jsonDecodeStringIn(rawKey, keyStr)
		if !ok {
			return nil, fmt.Errorf("invalid key %s", jsonShort(rawKey))
		}
		i = jsonSkipWS(obj, kEnd)
		i = jsonSkipWS(obj, i+1) // ':'
		vEnd := jsonScanValue(obj, i)
		fields = append(fields, rawField{key: key, rawKey: rawKey, value: obj[i:vEnd]})
		i = jsonSkipWS(obj, vEnd)
		if i >= len(obj) || obj[i] == '}' {
			break
		}
		i = jsonSkipWS(obj, i+1) // ','
	}
	return fields, nil
}

func jsonSkipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonScanValue returns the end of the valid JSON value starting at i.
func jsonScanValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return jsonScanString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = jsonScanString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' &&
			b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		return j
	}
}

// jsonScanString returns the index after the closing quote of the string starting at i.
func jsonScanString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// Get returns a field's raw JSON (the last one when a key repeats, as encoding/json reads it).
// Typed fields edited directly are reflected.
func (r *Record) Get(key string) (json.RawMessage, bool) {
	fields, err := r.currentFields()
	if err != nil {
		return nil, false
	}
	for i := len(fields) - 1; i >= 0; i-- {
		if fields[i].key == key {
			return fields[i].value, true
		}
	}
	return nil, false
}

// Set sets or replaces a field, keeping every other field and the order. A value that is
// json.RawMessage or []byte must be valid JSON and is used as is; anything else is encoded
// without HTML escaping (as JSON.stringify writes it). A well-known key must get the type
// the format gives it (a string, or an object for lifecycle).
func (r *Record) Set(key string, value any) error {
	raw, err := jsonEncodeValue(value)
	if err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	if err := r.flush(); err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	if err := r.setTyped(key, raw, ""); err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	r.fields = jsonPutField(r.fields, key, raw)
	r.seen = r.snapshot()
	r.dirty = true
	return nil
}

// Delete removes a field (every copy of a repeated key). It reports whether one was there.
func (r *Record) Delete(key string) bool {
	if err := r.flush(); err != nil {
		return false
	}
	n := 0
	for _, f := range r.fields {
		if f.key != key {
			r.fields[n] = f
			n++
		}
	}
	found := n != len(r.fields)
	r.fields = r.fields[:n]
	if found {
		_ = r.setTyped(key, json.RawMessage("null"), "")
		r.seen = r.snapshot()
		r.dirty = true
	}
	return found
}

// flush writes direct edits of the typed fields into r.fields.
func (r *Record) flush() error {
	fields, err := r.currentFields()
	if err != nil {
		return err
	}
	if !jsonSameFields(fields, r.fields) {
		r.fields = fields
		r.dirty = true
	}
	r.seen = r.snapshot()
	return nil
}

func jsonSameFields(a, b []rawField) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || !bytes.Equal(a[i].value, b[i].value) {
			return false
		}
	}
	return true
}

func jsonEncodeValue(value any) (json.RawMessage, error) {
	switch v := value.(type) {
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, fmt.Errorf("invalid JSON %s", jsonShort(v))
		}
		return append(json.RawMessage(nil), jsonTrimWS(v)...), nil
	case []byte:
		return jsonEncodeValue(json.RawMessage(v))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(value); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// jsonPutField replaces the first field named key (dropping later repeats) or appends it.
func jsonPutField(fields []rawField, key string, value json.RawMessage) []rawField {
	out := fields[:0:0]
	done := false
	for _, f := range fields {
		if f.key != key {
			out = append(out, f)
			continue
		}
		if !done {
			f.value = value
			out = append(out, f)
			done = true
		}
	}
	if !done {
		rk, _ := jsonEncodeValue(key)
		out = append(out, rawField{key: key, rawKey: rk, value: value})
	}
	return out
}

// currentFields returns r.fields with the typed fields' direct edits applied (a copy when
// they differ). A changed lifecycle keeps unknown keys inside the lifecycle object too.
func (r *Record) currentFields() ([]rawField, error) {
	t, s := r.typed(), r.seen
	fields := r.fields
	copied := false
	put := func(key string, value json.RawMessage) {
		if !copied {
			fields = append([]rawField(nil), fields...)
			copied = true
		}
		fields = jsonPutField(fields, key, value)
	}
	del := func(key string) {
		if !copied {
			fields = append([]rawField(nil), fields...)
			copied = true
		}
		n := 0
		for _, f := range fields {
			if f.key != key {
				fields[n] = f
				n++
			}
		}
		fields = fields[:n]
	}
	strs := []struct {
		key      string
		now, was string
		optional bool
	}{
		{keyID, t.ID, s.ID, false},
		{keyType, t.Type, s.Type, false},
		{keyRole, t.Role, s.Role, false},
		{keyText, t.Text, s.Text, false},
		{keyCreatedAt, t.CreatedAt, s.CreatedAt, false},
		{keyUpdatedAt, t.UpdatedAt, s.UpdatedAt, true},
	}
	for _, f := range strs {
		if f.now == f.was {
			continue
		}
		if f.now == "" && f.optional {
			del(f.key)
			continue
		}
		v, err := jsonEncodeValue(f.now)
		if err != nil {
			return nil, err
		}
		put(f.key, v)
	}
	if t.LC != s.LC {
		if r.Lifecycle == nil {
			del(keyLifecycle)
		} else {
			v, err := mergeLifecycle(r.lifecycleRaw(), r.Lifecycle)
			if err != nil {
				return nil, err
			}
			put(keyLifecycle, v)
		}
	}
	return fields, nil
}

func (r *Record) lifecycleRaw() json.RawMessage {
	for i := len(r.fields) - 1; i >= 0; i-- {
		if r.fields[i].key == keyLifecycle {
			return r.fields[i].value
		}
	}
	return nil
}

// mergeLifecycle writes lc over the old lifecycle object, keeping keys Lifecycle does not know.
func mergeLifecycle(old json.RawMessage, lc *Lifecycle) (json.RawMessage, error) {
	var fields []rawField
	if len(old) > 0 && old[0] == '{' {
		var err error
		if fields, err = jsonSplitObject(old, ""); err != nil {
			return nil, err
		}
	}
	mode, _ := jsonEncodeValue(lc.Mode)
	fields = jsonPutField(fields, "mode", mode)
	if lc.RemainingReads != nil {
		v, _ := jsonEncodeValue(*lc.RemainingReads)
		fields = jsonPutField(fields, "remainingReads", v)
	} else {
		fields = jsonDropField(fields, "remainingReads")
	}
	if lc.ExpiresAt != "" {
		v, _ := jsonEncodeValue(lc.ExpiresAt)
		fields = jsonPutField(fields, "expiresAt", v)
	} else {
		fields = jsonDropField(fields, "expiresAt")
	}
	return jsonWriteObject(fields), nil
}

func jsonDropField(fields []rawField, key string) []rawField {
	out := fields[:0:0]
	for _, f := range fields {
		if f.key != key {
			out = append(out, f)
		}
	}
	return out
}

// jsonWriteObject writes fields compactly, as JSON.stringify does; values keep their bytes.
func jsonWriteObject(fields []rawField) []byte {
	n := 2
	for _, f := range fields {
		n += len(f.rawKey) + len(f.value) + 2
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.rawKey...)
		b = append(b, ':')
		b = append(b, f.value...)
	}
	return append(b, '}')
}

// MarshalJSON returns the original bytes for an unchanged record, else the fields in their
// original order (new keys at the end), written compactly.
func (r *Record) MarshalJSON() ([]byte, error) {
	if !r.changed() {
		return append([]byte(nil), r.raw...), nil
	}
	fields, err := r.currentFields()
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", r.ID, err)
	}
	return jsonWriteObject(fields), nil
}

// Clone returns a deep copy, unchanged-ness included.
func (r *Record) Clone() *Record {
	c := *r
	c.fields = append([]rawField(nil), r.fields...)
	c.Lifecycle = copyLifecycle(r.Lifecycle)
	return &c
}

// Expiry returns the parsed lifecycle.expiresAt (ParseTime). False when there is none or it
// does not parse.
func (r *Record) Expiry() (time.Time, bool) {
	if r.Lifecycle == nil || r.Lifecycle.ExpiresAt == "" {
		return time.Time{}, false
	}
	return memd.ParseTime(r.Lifecycle.ExpiresAt)
}

// A note's lifecycle states, the state label of memd_ledger_notes (docs/ARCHITECTURE.md §6).
const (
	NoteLive    = "live"
	NoteStale   = "stale"   // soft-expired, still in its grace
	NoteExpired = "expired" // due to be drained by the next sleep
)

// NoteVerdict is what a note's lifecycle says at one instant.
type NoteVerdict struct {
	Drain  bool
	Stale  bool               // soft-expiry past expiresAt (reported; drained once the grace passed too)
	Reason memd.LifecycleMode // drain reason, written into drainReason: the lifecycle mode
	Year   int                // year of the drained file: the expiry year, else the drain year
	Bad    string             // an unusable lifecycle (e.g. an unparseable expiresAt): kept and reported
}

// State is the verdict as memd_ledger_notes labels it. An unusable lifecycle is kept, so
// it counts as live.
func (v NoteVerdict) State() string {
	switch {
	case v.Drain:
		return NoteExpired
	case v.Stale:
		return NoteStale
	}
	return NoteLive
}

// JudgeNote applies docs/ARCHITECTURE.md §5.1 to one record at now. "Past" is strict: a note expiring at
// exactly now is still live, and a soft-expired one at exactly the end of its grace is still
// stale. Only notes are ever drained; rules and lessons never.
func JudgeNote(r *Record, now time.Time, softGrace time.Duration) NoteVerdict {
	v := NoteVerdict{Year: now.UTC().Year()}
	if r == nil || r.Type != memd.RecordNote || r.Lifecycle == nil {
		return v
	}
	switch r.Lifecycle.Mode {
	case memd.ModeHardExpiry, memd.ModeSoftExpiry:
		exp, ok := r.Expiry()
		if !ok {
			v.Bad = fmt.Sprintf("expiresAt %q is not an ISO 8601 time", r.Lifecycle.ExpiresAt)
			return v
		}
		if !now.After(exp) {
			return v
		}
		v.Year = exp.UTC().Year()
		if r.Lifecycle.Mode == memd.ModeHardExpiry {
			v.Drain, v.Reason = true, memd.ModeHardExpiry
			return v
		}
		v.Stale = true
		if now.After(exp.Add(softGrace)) {
			v.Drain, v.Reason = true, memd.ModeSoftExpiry
		}
	case memd.ModeReadCount:
		if r.Lifecycle.RemainingReads == nil {
			v.Bad = "read-count without remainingReads"
			return v
		}
		if *r.Lifecycle.RemainingReads <= 0 {
			v.Drain, v.Reason = true, memd.ModeReadCount
		}
	}
	return v
}

// NoteChangesAfter is the time past which JudgeNote's verdict on r can next change: its
// expiry (stale, or drained for hard-expiry) and, for soft-expiry, the end of the grace.
// ok is false when no later clock changes it.
func NoteChangesAfter(r *Record, now time.Time, softGrace time.Duration) (time.Time, bool) {
	if r == nil || r.Type != memd.RecordNote || r.Lifecycle == nil {
		return time.Time{}, false
	}
	switch r.Lifecycle.Mode {
	case memd.ModeHardExpiry, memd.ModeSoftExpiry:
		exp, ok := r.Expiry()
		if !ok {
			return time.Time{}, false
		}
		if !now.After(exp) {
			return exp, true
		}
		if r.Lifecycle.Mode == memd.ModeSoftExpiry && !now.After(exp.Add(softGrace)) {
			return exp.Add(softGrace), true
		}
	}
	return time.Time{}, false
}

// LedgerLine is one line of the ledger, without its newline. Record is nil for a blank line
// (Err nil) and for a line that does not parse (Err says why, with the line number).
type LedgerLine struct {
	Raw    []byte
	Record *Record
	Err    error
}

// Ledger is a parsed memory.jsonl, every line kept in order.
type Ledger struct {
	Lines []LedgerLine

	noFinalNewline bool // the input's last line had no newline
}

// Parse never fails: lines that do not parse are kept verbatim with their error.
func Parse(data []byte) *Ledger {
	l := &Ledger{}
	if len(data) == 0 {
		return l
	}
	if data[len(data)-1] != '\n' {
		l.noFinalNewline = true
	} else {
		data = data[:len(data)-1]
	}
	// One string copy of the whole input: keys and escape-free values of every record are
	// slices of it.
	dataStr := string(data)
	arena := &parseArena{}
	l.Lines = make([]LedgerLine, 0, bytes.Count(data, []byte{'\n'})+1)
	for start := 0; start <= len(data); {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += start
		}
		line := data[start:end] // capacity runs on to the end of data: parseRecord uses it
		ll := LedgerLine{Raw: line[:len(line):len(line)]}
		if len(jsonTrimWS(line)) > 0 {
			rec, err := parseRecord(line, dataStr[start:end], arena)
			if err != nil {
				ll.Err = fmt.Errorf("line %d: %w", len(l.Lines)+1, err)
			} else {
				ll.Record = rec
			}
		}
		l.Lines = append(l.Lines, ll)
		start = end + 1
	}
	return l
}

// ParseFile reads and parses a ledger file. A missing file is an empty ledger.
func ParseFile(path string) (*Ledger, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Ledger{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger %s: %w", path, err)
	}
	return Parse(data), nil
}

// Bytes writes the ledger back: unchanged lines as they were (so an unchanged ledger comes
// back byte-identical, a missing final newline included), changed records re-encoded.
func (l *Ledger) Bytes() []byte {
	n := 0
	for _, ln := range l.Lines {
		n += len(ln.Raw) + 1
	}
	out := make([]byte, 0, n)
	for i, ln := range l.Lines {
		if i > 0 {
			out = append(out, '\n')
		}
		if ln.Record != nil && ln.Record.changed() {
			b, err := ln.Record.MarshalJSON()
			if err == nil {
				out = append(out, b...)
				continue
			}
			// Cannot happen for a parsed record; never lose the line: keep its old bytes.
		}
		out = append(out, ln.Raw...)
	}
	if len(l.Lines) > 0 && !l.noFinalNewline {
		out = append(out, '\n')
	}
	return out
}

// Records returns the records that parsed, in file order.
func (l *Ledger) Records() []*Record {
	out := make([]*Record, 0, len(l.Lines))
	for _, ln := range l.Lines {
		if ln.Record != nil {
			out = append(out, ln.Record)
		}
	}
	return out
}

// Bad returns the lines that did not parse (blank lines are not bad).
func (l *Ledger) Bad() []LedgerLine {
	var out []LedgerLine
	for _, ln := range l.Lines {
		if ln.Err != nil {
			out = append(out, ln)
		}
	}
	return out
}

// Find returns the first record with this id, or nil.
func (l *Ledger) Find(id string) *Record {
	for _, ln := range l.Lines {
		if ln.Record != nil && ln.Record.ID == id {
			return ln.Record
		}
	}
	return nil
}

// Remove drops every record line with this id and returns how many it dropped.
func (l *Ledger) Remove(id string) int {
	n := 0
	for _, ln := range l.Lines {
		if ln.Record != nil && ln.Record.ID == id {
			continue
		}
		l.Lines[n] = ln
		n++
	}
	removed := len(l.Lines) - n
	clear(l.Lines[n:])
	l.Lines = l.Lines[:n]
	return removed
}

// Append adds a record as a new last line. The file then ends with a newline.
func (l *Ledger) Append(r *Record) {
	raw, _ := r.MarshalJSON()
	l.Lines = append(l.Lines, LedgerLine{Raw: raw, Record: r})
	l.noFinalNewline = false
}

// AppendRaw adds a line verbatim (a line that did not parse elsewhere, kept, never dropped).
func (l *Ledger) AppendRaw(line []byte) {
	line = bytes.TrimRight(line, "\n")
	ll := LedgerLine{Raw: append([]byte(nil), line...)}
	if len(jsonTrimWS(line)) > 0 {
		rec, err := ParseRecord(line)
		if err != nil {
			ll.Err = fmt.Errorf("line %d: %w", len(l.Lines)+1, err)
		} else {
			ll.Record = rec
		}
	}
	l.Lines = append(l.Lines, ll)
	l.noFinalNewline = false
}

// jsonValid reports what json.Valid reports, in one pass without the reflection-free but
// state-machine-per-byte cost of encoding/json's scanner (a quarter of a ledger parse).
// FuzzJSONValid checks the two agree.
func jsonValid(b []byte) bool {
	i, ok := jsonValidValue(b, jsonSkipWS(b, 0), 0)
	return ok && jsonSkipWS(b, i) == len(b)
}

// jsonMaxDepth is encoding/json's nesting limit.
const jsonMaxDepth = 10000

func jsonValidValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return jsonValidString(b, i)
	case c == '{':
		if depth+1 > jsonMaxDepth {
			return i, false
		}
		i = jsonSkipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = jsonValidString(b, i); !ok {
				return i, false
			}
			i = jsonSkipWS(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = jsonValidValue(b, jsonSkipWS(b, i+1), depth+1); !ok {
				return i, false
			}
			i = jsonSkipWS(b, i)
			if i >= len(b) {
				return i, false
			}
			if b[i] == '}' {
				return i + 1, true
			}
			if b[i] != ',' {
				return i, false
			}
			i = jsonSkipWS(b, i+1)
		}
	case c == '[':
		if depth+1 > jsonMaxDepth {
			return i, false
		}
		i = jsonSkipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = jsonValidValue(b, i, depth+1); !ok {
				return i, false
			}
			i = jsonSkipWS(b, i)
			if i >= len(b) {
				return i, false
			}
			if b[i] == ']' {
				return i + 1, true
			}
			if b[i] != ',' {
				return i, false
			}
			i = jsonSkipWS(b, i+1)
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return jsonValidNumber(b, i)
	case c == 't':
		return jsonValidLiteral(b, i, "true")
	case c == 'f':
		return jsonValidLiteral(b, i, "false")
	case c == 'n':
		return jsonValidLiteral(b, i, "null")
	}
	return i, false
}

func jsonValidLiteral(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

func jsonValidString(b []byte, i int) (int, bool) {
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

func jsonValidNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i + 1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

// jsonTrimWS trims JSON whitespace (space, tab, CR, LF) and nothing else: a line that
// ends in, say, a vertical tab is not valid JSON and must not be read as if it were.
func jsonTrimWS(b []byte) []byte {
	return bytes.Trim(b, " \t\r\n")
}
