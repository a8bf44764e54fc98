package gitstore

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// gitIndex runs git in dir (no user config) and returns the index file's bytes after it.
func gitIndex(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ".git", "index")) // none yet after init
	return b
}

func decodeIndex(t *testing.T, b []byte) *index.Index {
	t.Helper()
	var idx index.Index
	if err := index.NewDecoder(bytes.NewReader(b)).Decode(&idx); err != nil {
		t.Fatal(err)
	}
	return &idx
}

// Version 4 (path prefix compression) as git writes it, byte for byte: a whole file from
// entries, and a splice of git's file with git's own next entry added and one removed.
func TestIndexVersion4AsGit(t *testing.T) {
	dir := t.TempDir()
	gitIndex(t, dir, "init", "-q")
	gitIndex(t, dir, "config", "core.untrackedCache", "false")
	names := []string{"a.md", "projects/alpha/notes.md", "projects/alpha/todo.md", "projects/alphabet.md", "projects/beta/x.md", "z/" + string(bytes.Repeat([]byte("long"), 60)) + ".md"}
	for _, n := range append(names, "projects/alpha/new.md") {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, n)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitIndex(t, dir, "update-index", "--index-version", "4")
	before := gitIndex(t, dir, append([]string{"update-index", "--add"}, names...)...)
	if IndexFileVersion(filepath.Join(dir, ".git", "index")) != 4 {
		t.Fatal("git did not write version 4")
	}
	var whole bytes.Buffer
	if err := WriteIndexVersion(&whole, 4, decodeIndex(t, before).Entries); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(whole.Bytes(), before) {
		t.Fatalf("WriteIndexVersion 4 differs from git's file:\n%q\n%q", whole.Bytes(), before)
	}
	added := gitIndex(t, dir, "update-index", "--add", "projects/alpha/new.md")
	e, err := decodeIndex(t, added).Entry("projects/alpha/new.md")
	if err != nil {
		t.Fatal(err)
	}
	var spliced bytes.Buffer
	if _, err := SpliceIndex(bytes.NewReader(before), &spliced, []IndexEdit{{Name: e.Name, Entry: e}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spliced.Bytes(), added) {
		t.Fatalf("splice of an added entry differs from git's file")
	}
	removed := gitIndex(t, dir, "update-index", "--force-remove", "projects/alpha/notes.md")
	spliced.Reset()
	if _, err := SpliceIndex(bytes.NewReader(added), &spliced, []IndexEdit{{Name: "projects/alpha/notes.md"}}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spliced.Bytes(), removed) {
		t.Fatalf("splice of a removed entry differs from git's file")
	}
}

func TestVarintAsGit(t *testing.T) {
	// git's encode_varint: 127 → 7f, 128 → 80 00, 16511 → ff 7f, 16512 → 80 80 00.
	for v, want := range map[uint64][]byte{0: {0}, 127: {0x7f}, 128: {0x80, 0}, 16511: {0xff, 0x7f}, 16512: {0x80, 0x80, 0}, 1 << 40: nil} {
		got := appendVarint(nil, v)
		if want != nil && !bytes.Equal(got, want) {
			t.Errorf("appendVarint(%d) = %x, want %x", v, got, want)
		}
		if back, err := readVarint(bufio.NewReader(bytes.NewReader(got))); err != nil || back != v {
			t.Errorf("readVarint(%x) = %d, %v", got, back, err)
		}
	}
}

// BenchmarkSpliceIndex splices one changed entry into a 100k-entry index, version 2 against
// version 4 (4 re-encodes every name against the one before; 2 copies entries through).
func BenchmarkSpliceIndex(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	names := testNames(rng, 100000)
	entries := make([]*index.Entry, len(names))
	for i, n := range names {
		entries[i] = testEntry(rng, n)
	}
	edit := []IndexEdit{{Name: names[500], Entry: testEntry(rng, names[500])}}
	for _, v := range []uint32{2, 4} {
		var file bytes.Buffer
		if err := WriteIndexVersion(&file, v, entries); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				if _, err := SpliceIndex(bytes.NewReader(file.Bytes()), &out, edit); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
