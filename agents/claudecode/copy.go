package claudecode

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/internal/safefs"
)

// MaxFileBytes bounds a memory file copied either way: a memory is a paragraph, and a huge
// file in the memory dir is not one.
const MaxFileBytes = 1 << 20

// sessionKey is the front matter key Claude Code stamps a memory with: the id of the
// session (and so the transcript) that wrote it. It names a local transcript and never
// leaves the machine: the repo's copy is the file without that one line.
const sessionKey = "originSessionId:"

// Shared is what the repo holds for a memory file Claude Code wrote: the bytes unchanged
// but for the front matter's originSessionId line.
func Shared(b []byte) []byte {
	if !bytes.HasPrefix(b, []byte("---\n")) && !bytes.HasPrefix(b, []byte("---\r\n")) {
		return b
	}
	out := make([]byte, 0, len(b))
	rest := b
	first := true
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		line := rest
		if i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		t := bytes.TrimRight(line, "\r\n")
		if !first && bytes.Equal(t, []byte("---")) {
			out = append(out, line...)
			return append(out, rest...)
		}
		first = false
		if bytes.HasPrefix(bytes.TrimLeft(t, " \t"), []byte(sessionKey)) {
			continue
		}
		out = append(out, line...)
	}
	return b // no closing ---: not a front matter, kept whole
}

// isMemoryName: a memory file Claude Code writes (*.md, not hidden, not a temp file).
func isMemoryName(name string) bool {
	return strings.HasSuffix(name, ".md") && !strings.HasPrefix(name, ".") && !safefs.IsTempName(name) &&
		!strings.ContainsAny(name, "/\\\x00")
}

// readMemories reads the memory files of one folder: regular files only (a symlink is
// never followed out of it), each at most MaxFileBytes. present is false when the folder
// itself is missing.
func readMemories(t *safefs.Tree, rel string) (files map[string][]byte, present bool, err error) {
	names, err := t.ReadDirNames(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]byte{}, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	files = map[string][]byte{}
	for _, n := range names {
		if !isMemoryName(n) {
			continue
		}
		p := n
		if rel != "" && rel != "." {
			p = rel + "/" + n
		}
		fi, err := t.Lstat(p)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > MaxFileBytes {
			continue
		}
		b, err := t.ReadFile(p)
		if err != nil {
			continue // gone meanwhile: the next pass sees it
		}
		files[n] = b
	}
	return files, true, nil
}

// side is one end of the copy: a folder of a safefs tree.
type side struct {
	t   *safefs.Tree
	rel string
}

func (s side) path(name string) string {
	if s.rel == "" || s.rel == "." {
		return name
	}
	return s.rel + "/" + name
}

func (s side) write(name string, b []byte) error {
	if s.rel != "" && s.rel != "." {
		if err := s.t.MkdirAll(s.rel, 0o755); err != nil {
			return err
		}
	}
	return s.t.WriteFileAtomic(s.path(name), b, 0o644)
}

func (s side) remove(name string) error {
	if err := s.t.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// pair is one project's two folders and the contents both last agreed on (bases).
type pair struct {
	local, repo side
	bases       map[string]string
	host        string
	now         time.Time
	// pulled: a pass wrote into Claude Code's dir what came through the repo (from another
	// machine, or a merge of both).
	pulled bool
}

// copyBoth makes both folders hold the same memories, each change going the way it was
// made: a file changed (or added, or removed) on one side since the last agreement follows
// on the other; both changed: MEMORY.md is merged by line, any other file keeps the repo's
// version at its name and the local one beside it as a conflict copy. A whole folder that
// is missing is not a deletion of every memory: it is filled from the other. Returns how
// many files it wrote or removed.
func (p *pair) copyBoth() (int, error) {
	lf, lok, err := readMemories(p.local.t, p.local.rel)
	if err != nil {
		return 0, fmt.Errorf("read Claude Code's memory: %w", err)
	}
	rf, rok, err := readMemories(p.repo.t, p.repo.rel)
	if err != nil {
		return 0, fmt.Errorf("read the repo's copy: %w", err)
	}
	if !lok || !rok {
		p.bases = map[string]string{} // a vanished folder: nothing counts as deleted
	}
	names := map[string]bool{}
	for n := range lf {
		names[n] = true
	}
	for n := range rf {
		names[n] = true
	}
	for n := range p.bases {
		names[n] = true
	}
	changed := 0
	for _, n := range slices.Sorted(mapsKeys(names)) {
		c, err := p.one(n, lf, rf)
		changed += c
		if err != nil {
			return changed, fmt.Errorf("%s: %w", n, err)
		}
	}
	return changed, nil
}

func mapsKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// one settles one name (see copyBoth).
func (p *pair) one(n string, lf, rf map[string][]byte) (int, error) {
	lraw, lok := lf[n]
	r, rok := rf[n]
	l := Shared(lraw)
	b, bok := p.bases[n]
	switch {
	case !lok && !rok:
		delete(p.bases, n)
		return 0, nil
	case lok && rok && bytes.Equal(l, r):
		p.bases[n] = string(r)
		return 0, nil
	case lok && !rok:
		if bok && string(l) == b { // removed from the repo
			delete(p.bases, n)
			p.pulled = true
			return 1, p.local.remove(n)
		}
		p.bases[n] = string(l)
		return 1, p.repo.write(n, l)
	case !lok && rok:
		if bok && string(r) == b { // Claude Code removed it
			delete(p.bases, n)
			return 1, p.repo.remove(n)
		}
		p.bases[n] = string(r)
		p.pulled = true
		return 1, p.local.write(n, r)
	case bok && string(l) == b: // the repo's changed
		p.bases[n] = string(r)
		p.pulled = true
		return 1, p.local.write(n, r)
	case bok && string(r) == b: // Claude Code's changed
		p.bases[n] = string(l)
		return 1, p.repo.write(n, l)
	}
	return p.both(n, []byte(b), l, r, bok)
}

// both: changed on both sides since they last agreed (or added on both without a base).
func (p *pair) both(n string, base, l, r []byte, bok bool) (int, error) {
	p.pulled = true
	if n == memd.MemoryMDName {
		if !bok {
			base = nil
		}
		m, err := memorymd.MergeTopicFile(base, l, r)
		if err != nil {
			m = MergeIndexLines(l, r)
		}
		p.bases[n] = string(m)
		if err := p.repo.write(n, m); err != nil {
			return 0, err
		}
		return 2, p.local.write(n, m)
	}
	cp := memd.ConflictCopyPath(n, p.host, p.now)
	p.bases[n], p.bases[cp] = string(r), string(l)
	for _, w := range []struct {
		s    side
		name string
		b    []byte
	}{{p.repo, cp, l}, {p.local, cp, l}, {p.local, n, r}} {
		if err := w.s.write(w.name, w.b); err != nil {
			return 0, err
		}
	}
	return 3, nil
}

// MergeIndexLines is the union of two MEMORY.md indexes: theirs' lines, then ours' lines
// theirs lacks, in order.
func MergeIndexLines(ours, theirs []byte) []byte {
	have := map[string]bool{}
	var out []byte
	for _, l := range strings.SplitAfter(string(theirs), "\n") {
		if l == "" {
			continue
		}
		have[strings.TrimRight(l, "\r\n")] = true
		out = append(out, l...)
	}
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	for _, l := range strings.SplitAfter(string(ours), "\n") {
		k := strings.TrimRight(l, "\r\n")
		if k == "" || have[k] {
			continue
		}
		have[k] = true
		out = append(out, k...)
		out = append(out, '\n')
	}
	return out
}

// baseFile is where the bases of one memory dir are kept in memd's state dir.
func baseFile(memoryDir string) string {
	sum := sha256.Sum256([]byte(memoryDir))
	return "claude-code/" + hex.EncodeToString(sum[:8]) + ".json"
}

// baseDoc is one memory dir's state: the bases, and the last change this machine copied
// either way (when, and the machine that made it).
type baseDoc struct {
	MemoryDir   string            `json:"memory_dir"`
	ID          string            `json:"id"`
	Bases       map[string]string `json:"bases"`
	LastChange  time.Time         `json:"last_change,omitzero"`
	LastMachine string            `json:"last_machine,omitempty"`
}

func loadDoc(state *safefs.Tree, memoryDir string) baseDoc {
	b, err := state.ReadFile(baseFile(memoryDir))
	var d baseDoc
	if err != nil || json.Unmarshal(b, &d) != nil || d.MemoryDir != memoryDir || d.Bases == nil {
		return baseDoc{MemoryDir: memoryDir, Bases: map[string]string{}}
	}
	return d
}

func saveDoc(state *safefs.Tree, d baseDoc) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := state.MkdirAll("claude-code", 0o700); err != nil {
		return err
	}
	return state.WriteFileAtomic(baseFile(d.MemoryDir), b, 0o600)
}
