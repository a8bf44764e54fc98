package gitstore

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

func testEntry(rng *rand.Rand, name string) *index.Entry {
	e := &index.Entry{Name: name, Mode: filemode.Regular, Size: rng.Uint32(), Dev: rng.Uint32(), Inode: rng.Uint32(), UID: 1000, GID: 1000}
	for i := range e.Hash {
		e.Hash[i] = byte(rng.UintN(256))
	}
	if rng.IntN(4) > 0 { // some entries carry no stat data (git re-checks them)
		e.ModifiedAt = time.Unix(1700000000+rng.Int64N(1e6), rng.Int64N(1e9))
		e.CreatedAt = time.Unix(1700000000+rng.Int64N(1e6), rng.Int64N(1e9))
	}
	if rng.IntN(10) == 0 {
		e.Mode = filemode.Executable
	}
	return e
}

func testNames(rng *rand.Rand, n int) []string {
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		parts := []string{"areas", "projects", "archive/2026", "a-b", "a", "é"}
		name := fmt.Sprintf("%s/%s.html", parts[rng.IntN(len(parts))], strings.Repeat("x", rng.IntN(40))+fmt.Sprint(rng.IntN(1000)))
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

func goGitIndex(t *testing.T, entries []*index.Entry) []byte {
	t.Helper()
	var b bytes.Buffer
	cp := append([]*index.Entry(nil), entries...)
	if err := index.NewEncoder(&b).Encode(&index.Index{Version: 2, Entries: cp}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// WriteIndex is byte-for-byte go-git's encoder (which git reads), only faster.
func TestWriteIndexMatchesGoGit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 300} {
		var entries []*index.Entry
		for _, name := range testNames(rng, n) {
			entries = append(entries, testEntry(rng, name))
		}
		var got bytes.Buffer
		if err := WriteIndex(&got, append([]*index.Entry(nil), entries...)); err != nil {
			t.Fatal(err)
		}
		if want := goGitIndex(t, entries); !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%d entries: Write differs from go-git's encoder (%d vs %d bytes)", n, got.Len(), len(want))
		}
	}
}

// A splice of edits into a file equals a full write of the edited entries: replaced,
// added before, between and after the existing ones, removed, and removals of absent names.
func TestSpliceIndexEqualsFullWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	names := testNames(rng, 400)
	base := map[string]*index.Entry{}
	for _, name := range names[:300] {
		base[name] = testEntry(rng, name)
	}
	for round := 0; round < 20; round++ {
		var file bytes.Buffer
		if err := WriteIndex(&file, values(base)); err != nil {
			t.Fatal(err)
		}
		var edits []IndexEdit
		for _, name := range names {
			if rng.IntN(25) != 0 {
				continue
			}
			if rng.IntN(3) == 0 {
				edits = append(edits, IndexEdit{Name: name}) // remove (maybe absent)
				delete(base, name)
				continue
			}
			e := testEntry(rng, name)
			edits = append(edits, IndexEdit{Name: name, Entry: e})
			base[name] = e
		}
		edits = append(edits, IndexEdit{Name: "0first.html", Entry: testEntry(rng, "0first.html")}, IndexEdit{Name: "zz/last.html", Entry: testEntry(rng, "zz/last.html")})
		base["0first.html"], base["zz/last.html"] = edits[len(edits)-2].Entry, edits[len(edits)-1].Entry
		sort.Slice(edits, func(i, j int) bool { return edits[i].Name < edits[j].Name })
		var got bytes.Buffer
		n, err := SpliceIndex(bytes.NewReader(file.Bytes()), &got, edits)
		if err != nil {
			t.Fatal(err)
		}
		want := goGitIndex(t, values(base))
		if n != len(base) || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("round %d: splice wrote %d entries, %d bytes; a full write has %d, %d bytes", round, n, got.Len(), len(base), len(want))
		}
		// git's own reader agrees.
		var idx index.Index
		if err := index.NewDecoder(bytes.NewReader(got.Bytes())).Decode(&idx); err != nil || len(idx.Entries) != len(base) {
			t.Fatalf("round %d: go-git decodes the spliced file: %v, %d entries", round, err, len(idx.Entries))
		}
	}
}

// Files the splice cannot copy from are refused with ErrNotSpliceable (the caller does a
// full refresh), never spliced into garbage.
func TestSpliceIndexRefusesForeignFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var good bytes.Buffer
	if err := WriteIndex(&good, []*index.Entry{testEntry(rng, "a.html"), testEntry(rng, "b.html")}); err != nil {
		t.Fatal(err)
	}
	v4 := append([]byte(nil), good.Bytes()...)
	v4[7] = 4
	long := []*index.Entry{testEntry(rng, strings.Repeat("n", 5000))}
	var longFile bytes.Buffer
	if err := WriteIndex(&longFile, long); err != nil {
		t.Fatal(err)
	}
	edit := []IndexEdit{{Name: "a.html", Entry: testEntry(rng, "a.html")}}
	for name, file := range map[string][]byte{
		"empty": nil, "not an index": []byte("hello, this is not DIRC at all"), "version 4": v4,
		"truncated": good.Bytes()[:40], "long name": longFile.Bytes(),
	} {
		var out bytes.Buffer
		if _, err := SpliceIndex(bytes.NewReader(file), &out, edit); !errors.Is(err, ErrNotSpliceable) {
			t.Errorf("%s: err = %v, want ErrNotSpliceable", name, err)
		}
	}
}

func values(m map[string]*index.Entry) []*index.Entry {
	out := make([]*index.Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	return out
}

// An index git wrote with optional extensions (the cache tree) can be spliced; one whose
// entries live elsewhere (a required extension such as the split index's "link"), or that
// holds a conflict's stages, cannot.
func TestSpliceableIndexFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var buf bytes.Buffer
	if err := WriteIndex(&buf, []*index.Entry{testEntry(rng, "a.html"), testEntry(rng, "b/c.html")}); err != nil {
		t.Fatal(err)
	}
	body := buf.Bytes()[:buf.Len()-indexTrailerSize]
	withExt := func(sig string, data []byte) string {
		b := append([]byte(nil), body...)
		b = append(b, sig...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
		sum := sha1.Sum(b)
		p := filepath.Join(t.TempDir(), "index")
		if err := os.WriteFile(p, append(b, sum[:]...), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	staged := testEntry(rng, "a.html")
	staged.Stage = 2
	var conflicted bytes.Buffer
	if err := WriteIndex(&conflicted, []*index.Entry{staged, testEntry(rng, "b/c.html")}); err != nil {
		t.Fatal(err)
	}
	stages := filepath.Join(t.TempDir(), "index")
	if err := os.WriteFile(stages, conflicted.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "index")
	if err := os.WriteFile(plain, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want bool
	}{
		{plain, true},
		{stages, false},
		{withExt("TREE", []byte("\x002 0\n0123456789abcdefghij")), true},
		{withExt("link", make([]byte, 20)), false},
		{withExt("sdir", nil), false},
		{filepath.Join(t.TempDir(), "none"), false},
	} {
		if got := SpliceableIndexFile(c.path); got != c.want {
			t.Errorf("SpliceableIndexFile(%s) = %v, want %v", c.path, got, c.want)
		}
	}
}
