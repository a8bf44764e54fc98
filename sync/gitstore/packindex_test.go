package gitstore

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"

	"github.com/memd-dev/memd/internal/testutil"
)

// packedRepo is a git repository of commits commits, each rewriting one of 40 files with a
// new version of a long shared text, so that git's repack stores most blobs and trees as
// OFS deltas; git packs everything, with a .rev file when rev is set. It returns the
// repository, its git, and the one pack's .idx path.
func packedRepo(t testing.TB, commits int, rev bool) (string, testutil.Git, string) {
	t.Helper()
	dir := t.TempDir()
	home := t.TempDir()
	cfg := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(cfg, []byte("[user]\n\tname = t\n\temail = t@example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := testutil.Git{Env: testutil.IsolatedEnv(home, cfg)}
	run := func(stdin io.Reader, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env, cmd.Stdin = dir, g.Env, stdin
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(nil, "init", "-q", "-b", "main")
	var stream bytes.Buffer
	text := strings.Repeat("a memory about the build, the deploy and the rules we keep. ", 60)
	for i := range commits {
		body := fmt.Sprintf("<p>version %d</p>\n%s\n<p>tail %d</p>\n", i, text, i*7)
		fmt.Fprintf(&stream, "commit refs/heads/main\nmark :%d\ncommitter t <t@example.com> %d +0000\ndata 4\nc%03d\n", i+1, 1700000000+i, i%1000)
		if i > 0 {
			fmt.Fprintf(&stream, "from :%d\n", i)
		}
		fmt.Fprintf(&stream, "M 100644 inline areas/f%02d.html\ndata %d\n%s\n", i%40, len(body), body)
	}
	run(&stream, "fast-import", "--quiet")
	run(nil, "-c", "pack.writeReverseIndex="+strconv.FormatBool(rev), "repack", "-adfq", "--window=20")
	run(nil, "prune-packed")
	idxs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.idx"))
	if len(idxs) != 1 {
		t.Fatalf("want one pack index, have %v", idxs)
	}
	revs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.rev"))
	if rev && len(revs) != 1 {
		t.Skipf("this git (%s) writes no .rev file", gitVersion(t))
	}
	return dir, g, idxs[0]
}

func gitVersion(t testing.TB) string {
	out, _ := exec.Command("git", "version").Output()
	return strings.TrimSpace(string(out))
}

// showIndex is git's own reading of an .idx: `git show-index` prints offset, name, crc.
func showIndex(t testing.TB, g testutil.Git, dir, idx string) []idxfile.Entry {
	t.Helper()
	f, err := os.Open(idx)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("git", "show-index")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, g.Env, f
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git show-index: %v", err)
	}
	var es []idxfile.Entry
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var e idxfile.Entry
		var name, crc string
		if _, err := fmt.Sscanf(sc.Text(), "%d %s %s", &e.Offset, &name, &crc); err != nil {
			t.Fatalf("show-index line %q: %v", sc.Text(), err)
		}
		e.Hash = plumbing.NewHash(name)
		c, err := strconv.ParseUint(strings.Trim(crc, "()"), 16, 32)
		if err != nil {
			t.Fatalf("show-index crc %q: %v", crc, err)
		}
		e.CRC32 = uint32(c)
		es = append(es, e)
	}
	return es
}

// TestPackIndexAgreesWithGit reads a real pack index, with and without git's .rev file,
// and checks every lookup against `git show-index` and against go-git's own MemoryIndex.
func TestPackIndexAgreesWithGit(t *testing.T) {
	for _, rev := range []bool{false, true} {
		t.Run(fmt.Sprintf("rev=%v", rev), func(t *testing.T) {
			dir, g, path := packedRepo(t, 400, rev)
			idx, err := OpenPackIndex(path)
			if err != nil {
				t.Fatal(err)
			}
			if (idx.rev != nil) != rev {
				t.Fatalf("rev file used = %v, want %v", idx.rev != nil, rev)
			}
			want := showIndex(t, g, dir, path)
			if n, _ := idx.Count(); int(n) != len(want) || len(want) < 1000 {
				t.Fatalf("Count %d, git lists %d (want over 1000)", n, len(want))
			}
			mem := idxfile.NewMemoryIndex()
			f, _ := os.Open(path)
			if err := idxfile.NewDecoder(f).Decode(mem); err != nil {
				t.Fatal(err)
			}
			f.Close()
			for _, e := range want {
				if o, err := idx.FindOffset(e.Hash); err != nil || uint64(o) != e.Offset {
					t.Fatalf("FindOffset(%s) = %d, %v; git says %d", e.Hash, o, err, e.Offset)
				}
				if c, err := idx.FindCRC32(e.Hash); err != nil || c != e.CRC32 {
					t.Fatalf("FindCRC32(%s) = %x, %v; git says %x", e.Hash, c, err, e.CRC32)
				}
				if h, err := idx.FindHash(int64(e.Offset)); err != nil || h != e.Hash {
					t.Fatalf("FindHash(%d) = %s, %v; git says %s", e.Offset, h, err, e.Hash)
				}
				if ok, _ := idx.Contains(e.Hash); !ok {
					t.Fatalf("Contains(%s) = false", e.Hash)
				}
			}
			// Absent names and offsets, at both ends of the fanout and between entries.
			for _, h := range []plumbing.Hash{plumbing.ZeroHash, {0xff, 0xff, 0xff}, {0x80}, plumbing.NewHash(strings.Repeat("f", 40))} {
				if _, err := idx.FindOffset(h); !errors.Is(err, plumbing.ErrObjectNotFound) {
					t.Fatalf("FindOffset(%s) of an absent name: %v", h, err)
				}
			}
			if _, err := idx.FindHash(int64(want[0].Offset) + 1); !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("FindHash of an offset inside an object: %v", err)
			}
			for _, byOffset := range []bool{false, true} {
				ours, theirs := entries(t, idx, byOffset), entries(t, mem, byOffset)
				if len(ours) != len(theirs) {
					t.Fatalf("byOffset=%v: %d entries, go-git %d", byOffset, len(ours), len(theirs))
				}
				for i := range ours {
					if ours[i] != theirs[i] {
						t.Fatalf("byOffset=%v entry %d: %+v, go-git %+v", byOffset, i, ours[i], theirs[i])
					}
				}
			}
			prefix := want[7].Hash[:2]
			var wantPre []plumbing.Hash
			for _, e := range want {
				if bytes.HasPrefix(e.Hash[:], prefix) {
					wantPre = append(wantPre, e.Hash)
				}
			}
			if got := idx.HashesWithPrefix(nil, prefix); len(got) != len(wantPre) {
				t.Fatalf("HashesWithPrefix(%x): %d names, want %d", prefix, len(got), len(wantPre))
			}
		})
	}
}

func entries(t *testing.T, idx idxfile.Index, byOffset bool) []idxfile.Entry {
	t.Helper()
	var it idxfile.EntryIter
	var err error
	if byOffset {
		it, err = idx.EntriesByOffset()
	} else {
		it, err = idx.Entries()
	}
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []idxfile.Entry
	for {
		e, err := it.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, *e)
	}
}

// idxSpec is a hand-built .idx: names (sorted by the builder), offsets (a 64-bit one when
// above 2^31) and crcs.
type idxSpec struct {
	names   []plumbing.Hash
	offsets []uint64
	pack    plumbing.Hash
}

// encode writes spec the way git does (version 2, fanout, names, crcs, offsets, large
// offsets, pack checksum, index checksum).
func (s idxSpec) encode() []byte {
	var b bytes.Buffer
	b.Write(idxMagic)
	binary.Write(&b, binary.BigEndian, uint32(2))
	var fan [256]uint32
	for _, h := range s.names {
		for i := int(h[0]); i < 256; i++ {
			fan[i]++
		}
	}
	binary.Write(&b, binary.BigEndian, fan)
	for _, h := range s.names {
		b.Write(h[:])
	}
	for i := range s.names {
		binary.Write(&b, binary.BigEndian, uint32(0xc0ffee00+i))
	}
	var big []uint64
	for _, o := range s.offsets {
		if o >= 1<<31 {
			binary.Write(&b, binary.BigEndian, uint32(0x80000000|len(big)))
			big = append(big, o)
		} else {
			binary.Write(&b, binary.BigEndian, uint32(o))
		}
	}
	for _, o := range big {
		binary.Write(&b, binary.BigEndian, o)
	}
	b.Write(s.pack[:])
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

func writeIdx(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pack-x.idx")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func bigSpec() idxSpec {
	return idxSpec{
		names:   []plumbing.Hash{{0x01, 1}, {0x01, 2}, {0x7f}, {0xff, 9}},
		offsets: []uint64{12, 5 << 32, 1 << 31, 400},
		pack:    plumbing.Hash{0xaa},
	}
}

// TestPackIndexLargeOffsets covers the 64-bit offset table, which only packs over 2 GiB
// use, against go-git's decoding of the same bytes.
func TestPackIndexLargeOffsets(t *testing.T) {
	s := bigSpec()
	path := writeIdx(t, s.encode())
	idx, err := OpenPackIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	mem := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bytes.NewReader(s.encode())).Decode(mem); err != nil {
		t.Fatal(err)
	}
	for i, h := range s.names {
		o, err := idx.FindOffset(h)
		mo, _ := mem.FindOffset(h)
		if err != nil || uint64(o) != s.offsets[i] || o != mo {
			t.Fatalf("FindOffset(%s) = %d, %v; want %d (go-git %d)", h, o, err, s.offsets[i], mo)
		}
		if got, err := idx.FindHash(o); err != nil || got != h {
			t.Fatalf("FindHash(%d) = %s, %v", o, got, err)
		}
	}
	if idx.PackChecksum() != s.pack {
		t.Fatalf("pack checksum %s", idx.PackChecksum())
	}
}

// TestPackIndexRefusesBadFiles: every malformed index is refused with ErrBadPackIndex and
// its name, and never read past its end.
func TestPackIndexRefusesBadFiles(t *testing.T) {
	good := bigSpec().encode()
	hdr := idxHeaderLen
	cases := map[string][]byte{
		"empty":        {},
		"short":        good[:100],
		"no magic":     append([]byte("PACK"), good[4:]...),
		"version 3":    append(append(append([]byte(nil), good[:4]...), 0, 0, 0, 3), good[8:]...),
		"truncated":    good[:len(good)-30],
		"huge count":   func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[hdr+4*255:], 1<<30); return b }(),
		"fanout drops": func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[hdr+4*0x10:], 4); return b }(),
		"odd tail":     append(bytes.Clone(good[:len(good)-trailerLen]), append([]byte{1, 2, 3}, good[len(good)-trailerLen:]...)...),
	}
	for name, data := range cases {
		path := writeIdx(t, data)
		if _, err := OpenPackIndex(path); !errors.Is(err, ErrBadPackIndex) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want ErrBadPackIndex naming %s", name, err, path)
		}
	}
	// A large-offset index past the table fails the lookup, not the process.
	b := bytes.Clone(good)
	n := len(bigSpec().names)
	off32 := hdr + fanoutLen + n*(hashLen+4)
	binary.BigEndian.PutUint32(b[off32:], 0x80000000|77)
	idx, err := OpenPackIndex(writeIdx(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.FindOffset(bigSpec().names[0]); !errors.Is(err, ErrBadPackIndex) {
		t.Fatalf("FindOffset with a large offset out of range: %v", err)
	}
	if _, err := idx.FindHash(12); !errors.Is(err, ErrBadPackIndex) {
		t.Fatalf("FindHash when an offset is out of range: %v", err)
	}
}

// TestPackIndexRefusesBadRev: a .rev of the wrong size or another pack's is an error naming
// it at open; one with a position out of range, when a lookup reads that position (the
// positions are not all read at open): never an index that answers wrong.
func TestPackIndexRefusesBadRev(t *testing.T) {
	s := bigSpec()
	n := len(s.names)
	rev := func(pos []uint32, pack plumbing.Hash) []byte {
		var b bytes.Buffer
		b.WriteString("RIDX")
		binary.Write(&b, binary.BigEndian, []uint32{1, 1})
		binary.Write(&b, binary.BigEndian, pos)
		b.Write(pack[:])
		b.Write(make([]byte, hashLen))
		return b.Bytes()
	}
	cases := map[string][]byte{
		"short":      rev([]uint32{0, 3, 2}, s.pack),
		"other pack": rev([]uint32{0, 3, 2, 1}, plumbing.Hash{0xbb}),
		"version 2":  append([]byte("RIDX\x00\x00\x00\x02"), rev([]uint32{0, 3, 2, 1}, s.pack)[8:]...),
	}
	for name, data := range cases {
		path := writeIdx(t, s.encode())
		revPath := strings.TrimSuffix(path, ".idx") + ".rev"
		if err := os.WriteFile(revPath, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := OpenPackIndex(path); !errors.Is(err, ErrBadPackIndex) || !strings.Contains(err.Error(), revPath) {
			t.Errorf("%s: %v, want ErrBadPackIndex naming %s", name, err, revPath)
		}
	}
	path := writeIdx(t, s.encode())
	revPath := strings.TrimSuffix(path, ".idx") + ".rev"
	if err := os.WriteFile(revPath, rev([]uint32{0, 3, 2, uint32(n)}, s.pack), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := OpenPackIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.FindHash(5 << 32); !errors.Is(err, ErrBadPackIndex) || !strings.Contains(err.Error(), revPath) {
		t.Errorf("FindHash through a position out of range: %v, want ErrBadPackIndex naming %s", err, revPath)
	}
	// The right one is used: offsets 12, 400, 2^31, 5<<32 are positions 0, 3, 2, 1.
	path = writeIdx(t, s.encode())
	if err := os.WriteFile(strings.TrimSuffix(path, ".idx")+".rev", rev([]uint32{0, 3, 2, 1}, s.pack), 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err = OpenPackIndex(path)
	if err != nil || idx.rev == nil {
		t.Fatalf("a good .rev: %v", err)
	}
	if h, err := idx.FindHash(400); err != nil || h != s.names[3] {
		t.Fatalf("FindHash(400) through the .rev = %s, %v", h, err)
	}
}

// FuzzPackIndex: any bytes either fail to open or answer every lookup without panicking.
func FuzzPackIndex(f *testing.F) {
	f.Add(bigSpec().encode())
	f.Add(idxSpec{pack: plumbing.Hash{1}}.encode())
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "pack-fuzz.idx")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		idx, err := OpenPackIndex(path)
		if err != nil {
			if !errors.Is(err, ErrBadPackIndex) {
				t.Fatalf("an error that is not ErrBadPackIndex: %v", err)
			}
			return
		}
		for _, byOffset := range []bool{false, true} {
			var it idxfile.EntryIter
			if byOffset {
				if it, err = idx.EntriesByOffset(); err != nil {
					continue
				}
			} else {
				it, _ = idx.Entries()
			}
			for {
				e, err := it.Next()
				if err != nil {
					break
				}
				_, _ = idx.FindOffset(e.Hash)
				_, _ = idx.FindCRC32(e.Hash)
				_, _ = idx.FindHash(int64(e.Offset))
				_ = idx.HashesWithPrefix(nil, e.Hash[:1])
			}
		}
		_, _ = idx.FindOffset(plumbing.Hash{0xff})
	})
}

// BenchmarkPackIndexLookup compares PackIndex's lookups with go-git's MemoryIndex on the
// same real .idx: FindOffset of present and absent names, and FindHash (the OFS-delta base
// lookup), without a .rev file.
func BenchmarkPackIndexLookup(b *testing.B) {
	dir, g, path := packedRepo(b, 3000, false)
	es := showIndex(b, g, dir, path)
	ours, err := OpenPackIndex(path)
	if err != nil {
		b.Fatal(err)
	}
	mem := idxfile.NewMemoryIndex()
	f, _ := os.Open(path)
	if err := idxfile.NewDecoder(f).Decode(mem); err != nil {
		b.Fatal(err)
	}
	f.Close()
	for _, c := range []struct {
		name string
		idx  idxfile.Index
	}{{"PackIndex", ours}, {"MemoryIndex", mem}} {
		b.Run("present/"+c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := c.idx.FindOffset(es[i%len(es)].Hash); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("absent/"+c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				h := es[i%len(es)].Hash
				h[19] ^= 0xff
				_, _ = c.idx.FindOffset(h)
			}
		})
		b.Run("byOffset/"+c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := c.idx.FindHash(int64(es[i%len(es)].Offset)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// packOrder's radix sort orders offsets as a comparison sort does: small and large packs
// (one to six 11-bit digits, offsets past 4 GiB), ties kept in position order, none at all.
func TestPackOrderSorts(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 1))
	for _, c := range []struct {
		n   int
		top uint64
	}{{0, 0}, {1, 12}, {5, 1}, {1000, 1 << 11}, {1000, 1 << 12}, {50000, 80 << 20}, {50000, 1 << 40}, {3000, 1 << 62}} {
		offs := make([]uint64, c.n)
		for i := range offs {
			offs[i] = rng.Uint64N(c.top + 1)
		}
		want := make([]uint32, c.n)
		for i := range want {
			want[i] = uint32(i)
		}
		slices.SortStableFunc(want, func(a, b uint32) int { return cmp.Compare(offs[a], offs[b]) })
		if got := packOrder(slices.Clone(offs)); !slices.Equal(got, want) {
			t.Fatalf("%d offsets up to %d: radix order differs from a comparison sort", c.n, c.top)
		}
	}
}

// BenchmarkPackOrder is the order FindHash builds on a pack of a million objects (a
// 200,000-commit history's) without a .rev.
func BenchmarkPackOrder(b *testing.B) {
	rng := rand.New(rand.NewPCG(48, 2))
	offs := make([]uint64, 1_000_000)
	for i := range offs {
		offs[i] = 12 + uint64(i)*78
	}
	rng.Shuffle(len(offs), func(i, j int) { offs[i], offs[j] = offs[j], offs[i] })
	b.Run("radix", func(b *testing.B) {
		scratch := make([]uint64, len(offs))
		for b.Loop() {
			copy(scratch, offs)
			packOrder(scratch)
		}
	})
	b.Run("comparison", func(b *testing.B) {
		for b.Loop() {
			pos := make([]uint32, len(offs))
			for i := range pos {
				pos[i] = uint32(i)
			}
			slices.SortFunc(pos, func(a, b uint32) int { return cmp.Compare(offs[a], offs[b]) })
		}
	})
}

// A big pack without a .rev gets one written by its first FindHash, byte for byte the file
// git writes with pack.writeReverseIndex, which the next open reads instead of sorting.
func TestPackIndexWritesGitsRev(t *testing.T) {
	dir, g, path := packedRepo(t, 300, true)
	revPath := strings.TrimSuffix(path, ".idx") + ".rev"
	gits, err := os.ReadFile(revPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(revPath); err != nil {
		t.Fatal(err)
	}
	old := revWriteMin
	revWriteMin = 1
	t.Cleanup(func() { revWriteMin = old })
	idx, err := OpenPackIndex(path)
	if err != nil {
		t.Fatal(err)
	}
	es := showIndex(t, g, dir, path)
	if h, err := idx.FindHash(int64(es[7].Offset)); err != nil || h != es[7].Hash {
		t.Fatalf("FindHash = %s, %v; want %s", h, err, es[7].Hash)
	}
	ours, err := os.ReadFile(revPath)
	if err != nil {
		t.Fatalf("no .rev written: %v", err)
	}
	if !bytes.Equal(ours, gits) {
		t.Fatalf(".rev differs from git's (%d bytes, git's %d)", len(ours), len(gits))
	}
	again, err := OpenPackIndex(path)
	if err != nil || again.rev == nil {
		t.Fatalf("reopened: rev read %v, %v", again != nil && again.rev != nil, err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "tmp_*")); len(tmps) != 0 {
		t.Fatalf("temp files left: %v", tmps)
	}
	// A pack under the threshold is sorted in memory only.
	revWriteMin = old
	_ = os.Remove(revPath)
	small, _ := OpenPackIndex(path)
	if _, err := small.FindHash(int64(es[7].Offset)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(revPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a .rev for a pack of %d objects: %v", len(es), err)
	}
}
