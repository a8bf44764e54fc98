package secrets

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd"
)

// IgnoreFile is gitleaks' fingerprint list, read from the repo's root.
const IgnoreFile = ".gitleaksignore"

// Guard is the sync package's Guard with gitleaks' rules: a memory with a finding is held
// whole; in the ledger only the records (lines) with a finding are, and only the records
// that changed since HEAD are scanned, so the cost follows the change, not the file.
type Guard struct {
	dir    string // the repo's work tree (for .gitleaksignore)
	ledger string // the ledger's repo-relative path (memory.jsonl)
	load   func() (*Rules, error)

	mu      sync.Mutex
	ignore  map[string]bool // fingerprints from .gitleaksignore
	ignSeen ignoreStamp
}

type ignoreStamp struct {
	size  int64
	mtime time.Time
	there bool
}

// NewGuard guards the repo at dir whose ledger is ledger (repo-relative). config is a
// gitleaks TOML ("" = gitleaks' default rules); it is read, and the rules compiled, at the
// first Vet (the daemon's first commit), not here.
func NewGuard(dir, ledger, config string) *Guard {
	var once sync.Once
	var rs *Rules
	var err error
	return &Guard{dir: dir, ledger: ledger, load: func() (*Rules, error) {
		once.Do(func() { rs, err = Load(config) })
		return rs, err
	}}
}

// Rules compiles the rules now (the agent calls it when it starts, off any commit's path,
// so a bad secrets.config is an error at start and the first commit pays nothing).
func (g *Guard) Rules() (*Rules, error) { return g.load() }

// Vet implements sync.Guard.
func (g *Guard) Vet(rel string, content []byte, head func() ([]byte, error)) (memd.GuardVerdict, error) {
	rs, err := g.load()
	if err != nil {
		return memd.GuardVerdict{}, err
	}
	ignore := g.ignored()
	if rel == g.ledger {
		return g.vetLedger(rs, ignore, rel, content, head)
	}
	fs := keep(rs.Scan(rel, string(content), ""), rel, ignore, nil)
	if len(fs) == 0 {
		return memd.GuardVerdict{}, nil
	}
	return memd.GuardVerdict{Hold: true, Findings: fs}, nil
}

// keep drops the findings .gitleaksignore lists (gitleaks' global fingerprint
// `file:rule:line`) and turns the rest into sync findings; lineOf maps a line of the
// scanned text to the file's (nil: the same).
func keep(fs []Finding, rel string, ignore map[string]bool, lineOf func(int) int) []memd.GuardFinding {
	var out []memd.GuardFinding
	for _, f := range fs {
		line := f.StartLine
		if lineOf != nil && line > 0 {
			line = lineOf(line)
		}
		if ignore[fmt.Sprintf("%s:%s:%d", rel, f.RuleID, line)] {
			continue
		}
		out = append(out, memd.GuardFinding{Rule: f.RuleID, Line: line})
	}
	return out
}

// vetLedger scans the ledger's lines that HEAD does not have (new or changed records), as
// one text, and holds the records with a finding: the content to commit is the file with
// each held record replaced by HEAD's version of the same record (same "id"), or without it
// when HEAD has none. The work tree keeps every line.
func (g *Guard) vetLedger(rs *Rules, ignore map[string]bool, rel string, content []byte, head func() ([]byte, error)) (memd.GuardVerdict, error) {
	old, err := head()
	if err != nil {
		return memd.GuardVerdict{}, fmt.Errorf("read HEAD's %s: %w", rel, err)
	}
	// A ledger grows by appends: the lines up to where it first differs from HEAD's are
	// HEAD's, compared at memory speed; only the lines after that are looked up among
	// HEAD's remaining lines, so the work follows the change.
	same := commonLines(old, content)
	had := map[string]bool{}
	for _, l := range bytes.SplitAfter(old[same:], []byte("\n")) {
		had[string(bytes.TrimRight(l, "\r\n"))] = true
	}
	lines := bytes.SplitAfter(content[same:], []byte("\n"))
	first := 1 + bytes.Count(content[:same], []byte("\n")) // the file's line of lines[0]
	var text strings.Builder
	var at []int // at[i]: the file's 1-based line of the scanned text's line i+1
	for i, l := range lines {
		if len(l) == 0 || had[string(bytes.TrimRight(l, "\r\n"))] {
			continue
		}
		text.Write(bytes.TrimRight(l, "\n"))
		text.WriteByte('\n')
		at = append(at, first+i)
	}
	if len(at) == 0 {
		return memd.GuardVerdict{}, nil
	}
	raw := rs.Scan(rel, text.String(), "")
	lineOf := func(n int) int {
		if n-1 < len(at) {
			return at[n-1]
		}
		return at[len(at)-1]
	}
	found := keep(raw, rel, ignore, lineOf)
	if len(found) == 0 {
		return memd.GuardVerdict{}, nil
	}
	held := map[int]bool{}
	for _, f := range raw {
		if f.StartLine == 0 { // a path rule: the ledger's name itself matched
			return memd.GuardVerdict{Hold: true, Findings: found}, nil
		}
		for n := f.StartLine; n <= max(f.EndLine, f.StartLine); n++ {
			if !ignore[fmt.Sprintf("%s:%s:%d", rel, f.RuleID, lineOf(f.StartLine))] {
				held[lineOf(n)] = true
			}
		}
	}
	var out bytes.Buffer
	out.Write(content[:same])
	for i, l := range lines {
		if !held[first+i] {
			out.Write(l)
			continue
		}
		// HEAD's version of the record stays, unless the file has it already (a
		// checkout wrote HEAD's ledger with the held line after it).
		if prev := lineWithID(old, recordID(l)); prev != nil && !hasLine(content, prev) {
			out.Write(prev)
			if !bytes.HasSuffix(prev, []byte("\n")) {
				out.WriteByte('\n')
			}
		}
	}
	return memd.GuardVerdict{Content: out.Bytes(), Findings: found}, nil
}

// commonLines is the length of the longest common prefix of a and b that ends at a line
// end (after a newline) in both.
func commonLines(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	const block = 4 << 10 // whole blocks with bytes.Equal (vectorised), then byte by byte
	for i+block <= n && bytes.Equal(a[i:i+block], b[i:i+block]) {
		i += block
	}
	for i < n && a[i] == b[i] {
		i++
	}
	if j := bytes.LastIndexByte(a[:i], '\n'); j >= 0 {
		return j + 1
	}
	return 0
}

// hasLine reports whether text has line (with or without its newline) as a whole line.
func hasLine(text, line []byte) bool {
	line = bytes.TrimRight(line, "\n")
	for _, l := range bytes.SplitAfter(text, []byte("\n")) {
		if bytes.Equal(bytes.TrimRight(l, "\n"), line) {
			return true
		}
	}
	return false
}

// lineWithID is the last line of ledger whose record has id (nil: none, or id "").
// It runs only for a held record, so its full pass over HEAD's ledger is rare.
func lineWithID(ledger []byte, id string) []byte {
	if id == "" {
		return nil
	}
	needle, _ := json.Marshal(id)
	var found []byte
	for _, l := range bytes.SplitAfter(ledger, []byte("\n")) {
		if bytes.Contains(l, needle) && recordID(l) == id {
			found = l
		}
	}
	return found
}

// recordID is a ledger line's "id" ("" when the line is not a record with one).
func recordID(line []byte) string {
	var r struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &r) != nil {
		return ""
	}
	return r.ID
}

// ignored is the fingerprints of the repo's .gitleaksignore, read again when it changes (a
// stat per commit).
func (g *Guard) ignored() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := filepath.Join(g.dir, IgnoreFile)
	fi, err := os.Stat(p)
	st := ignoreStamp{}
	if err == nil {
		st = ignoreStamp{size: fi.Size(), mtime: fi.ModTime(), there: true}
	}
	if g.ignore != nil && st == g.ignSeen {
		return g.ignore
	}
	g.ignSeen = st
	g.ignore = map[string]bool{}
	if err != nil {
		return g.ignore
	}
	m, err := ReadIgnore(p)
	if err == nil {
		g.ignore = m
	}
	return g.ignore
}

// ReadIgnore reads a .gitleaksignore as gitleaks does: one fingerprint a line
// (`file:rule:line` or `commit:file:rule:line`), blank lines and # comments skipped,
// backslashes in the file part made slashes.
func ReadIgnore(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		s := strings.Split(l, ":")
		switch len(s) {
		case 3:
			s[0] = strings.ReplaceAll(s[0], `\`, "/")
		case 4:
			s[1] = strings.ReplaceAll(s[1], `\`, "/")
		}
		out[strings.Join(s, ":")] = true
	}
	return out, sc.Err()
}
