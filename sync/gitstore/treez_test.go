package gitstore

import (
	"fmt"
	"hash/adler32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

func TestAdler32Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		b := make([]byte, rng.IntN(200000))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		if round%3 == 0 {
			for i := range b {
				b[i] = 0xff // the sums' largest values
			}
		}
		cut := 0
		if len(b) > 0 {
			cut = rng.IntN(len(b) + 1)
		}
		got := adler32Combine(adler32.Checksum(b[:cut]), adler32.Checksum(b[cut:]), len(b)-cut)
		if want := adler32.Checksum(b); got != want {
			t.Fatalf("round %d (len %d, cut %d): combined %08x, want %08x", round, len(b), cut, got, want)
		}
	}
}

// inflatePieces checks pt against the tree object of es (PackedTree.Verify).
func inflatePieces(t *testing.T, es []object.TreeEntry, pt *PackedTree) {
	t.Helper()
	if err := pt.Verify(es); err != nil {
		t.Fatal(err)
	}
}

// A change recompresses only the pieces it touches; the rest are the base's, shared.
func TestPackTreeReusesUnchangedPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	entry := func(i int) object.TreeEntry {
		e := object.TreeEntry{Name: fmt.Sprintf("2024-%06d-a-memory-file-name.html", i), Mode: filemode.Regular}
		e.Hash[0], e.Hash[1], e.Hash[19] = byte(i), byte(i>>8), byte(rng.IntN(256))
		return e
	}
	var es []object.TreeEntry
	for i := range 8000 {
		es = append(es, entry(i*10))
	}
	type tree struct {
		entries []object.TreeEntry
		z       *PackedTree
	}
	base := &tree{entries: es}
	base.z = PackTree(es, AppendTree(nil, es), nil, nil)
	inflatePieces(t, es, base.z)
	for round := range 60 {
		nw := slices.Clone(base.entries)
		at := rng.IntN(len(nw))
		switch round % 3 {
		case 0: // modify
			nw[at].Hash[5]++
		case 1: // insert
			nw = slices.Insert(nw, at, entry(rng.IntN(80000)))
		case 2: // delete
			nw = slices.Delete(nw, at, at+1)
		}
		pt := PackTree(nw, AppendTree(nil, nw), base.entries, base.z)
		inflatePieces(t, nw, pt)
		if fresh := len(pt.chunks) - pt.SharedWith(base.z); fresh > 2 {
			t.Fatalf("round %d: %d of %d pieces recompressed for one change", round, fresh, len(pt.chunks))
		}
		base = &tree{entries: nw, z: pt}
	}
	// Changes far apart: the pieces between them are compressed again (correct, not minimal).
	nw := slices.Clone(base.entries)
	nw[0].Hash[3]++
	nw[len(nw)-1].Hash[3]++
	inflatePieces(t, nw, PackTree(nw, AppendTree(nil, nw), base.entries, base.z))
}
