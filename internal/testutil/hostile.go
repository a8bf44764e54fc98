package testutil

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Objects writes raw git objects (loose, zlib-compressed) into a repository's object
// store, so a test can build what no git command would: tree entries named "..", ".git",
// "a/b", duplicates, 10,000-deep trees. Dir is the git directory (a bare remote, or a
// clone's .git). Nothing here validates anything: that is the point.
type Objects struct {
	T   testing.TB
	Dir string
}

// Entry is one tree entry. Exactly one of Data (a blob, or a link's target when Mode is
// "120000"), Kids (a subtree) and Hash (an object already written) is used, in that order
// of preference: Kids when Mode is "40000", Hash when set, else Data.
type Entry struct {
	Name string
	Mode string // "100644" when empty, "40000" for a tree, "120000" a link, "160000" a gitlink
	Data string
	Kids []Entry
	Hash string
}

// TreeFile, TreeDir, TreeLink and TreeRaw build entries.
func TreeFile(name, data string) Entry         { return Entry{Name: name, Mode: "100644", Data: data} }
func TreeDir(name string, kids ...Entry) Entry { return Entry{Name: name, Mode: "40000", Kids: kids} }
func TreeLink(name, target string) Entry       { return Entry{Name: name, Mode: "120000", Data: target} }
func TreeRaw(name, mode, hash string) Entry    { return Entry{Name: name, Mode: mode, Hash: hash} }

// Write stores one object of type typ and returns its hex id.
func (o Objects) Write(typ string, content []byte) string {
	o.T.Helper()
	hdr := fmt.Sprintf("%s %d\x00", typ, len(content))
	h := sha1.New()
	h.Write([]byte(hdr))
	h.Write(content)
	id := hex.EncodeToString(h.Sum(nil))
	p := filepath.Join(o.Dir, "objects", id[:2], id[2:])
	if _, err := os.Stat(p); err == nil {
		return id
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write([]byte(hdr))
	zw.Write(content)
	if err := zw.Close(); err != nil {
		o.T.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		o.T.Fatal(err)
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o444); err != nil {
		o.T.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		o.T.Fatal(err)
	}
	return id
}

// Blob stores data as a blob.
func (o Objects) Blob(data string) string { return o.Write("blob", []byte(data)) }

// Tree stores the entries (subtrees first, recursively) as one tree in git's order
// (a directory sorts as if its name ended in '/'); duplicates stay, in the given order.
func (o Objects) Tree(entries ...Entry) string {
	o.T.Helper()
	type enc struct {
		mode, name string
		id         []byte
	}
	list := make([]enc, 0, len(entries))
	for _, e := range entries {
		mode := e.Mode
		if mode == "" {
			mode = "100644"
		}
		var id string
		switch {
		case e.Hash != "":
			id = e.Hash
		case mode == "40000":
			id = o.Tree(e.Kids...)
		default:
			id = o.Blob(e.Data)
		}
		raw, err := hex.DecodeString(id)
		if err != nil || len(raw) != 20 {
			o.T.Fatalf("entry %q: bad object id %q", e.Name, id)
		}
		list = append(list, enc{mode, e.Name, raw})
	}
	key := func(e enc) string {
		if e.mode == "40000" {
			return e.name + "/"
		}
		return e.name
	}
	sort.SliceStable(list, func(i, j int) bool { return key(list[i]) < key(list[j]) })
	var b bytes.Buffer
	for _, e := range list {
		b.WriteString(e.mode + " " + e.name + "\x00")
		b.Write(e.id)
	}
	return o.Write("tree", b.Bytes())
}

// Deep stores a chain of depth trees, each holding one directory named name, the last
// holding leaf, and returns the top tree's id. Built bottom up without recursion and
// stored as one pack (git index-pack): thousands of loose objects take seconds to write.
func (o Objects) Deep(depth int, name string, leaf Entry) string {
	o.T.Helper()
	type obj struct {
		typ  byte // 2 tree, 3 blob
		data []byte
	}
	var objs []obj
	enc := func(typ byte, data []byte) []byte {
		objs = append(objs, obj{typ, data})
		h := sha1.New()
		fmt.Fprintf(h, "%s %d\x00", map[byte]string{2: "tree", 3: "blob"}[typ], len(data))
		h.Write(data)
		return h.Sum(nil)
	}
	mode := leaf.Mode
	if mode == "" {
		mode = "100644"
	}
	id := enc(3, []byte(leaf.Data))
	id = enc(2, append([]byte(mode+" "+leaf.Name+"\x00"), id...))
	for i := 1; i < depth; i++ {
		id = enc(2, append([]byte("40000 "+name+"\x00"), id...))
	}
	var pack bytes.Buffer
	pack.WriteString("PACK")
	pack.Write([]byte{0, 0, 0, 2, byte(len(objs) >> 24), byte(len(objs) >> 16), byte(len(objs) >> 8), byte(len(objs))})
	for _, ob := range objs {
		n := len(ob.data)
		b := ob.typ<<4 | byte(n&0x0f)
		n >>= 4
		for n > 0 {
			pack.WriteByte(b | 0x80)
			b = byte(n & 0x7f)
			n >>= 7
		}
		pack.WriteByte(b)
		zw := zlib.NewWriter(&pack)
		zw.Write(ob.data)
		if err := zw.Close(); err != nil {
			o.T.Fatal(err)
		}
	}
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	cmd := exec.Command("git", "--git-dir="+o.Dir, "index-pack", "--stdin")
	cmd.Stdin = &pack
	if out, err := cmd.CombinedOutput(); err != nil {
		o.T.Fatalf("git index-pack: %v\n%s", err, out)
	}
	return hex.EncodeToString(id)
}

// Commit stores a commit of tree with parents and message, by a fixed test identity at
// when, and returns its id.
func (o Objects) Commit(tree string, parents []string, msg string, when time.Time) string {
	o.T.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	stamp := fmt.Sprintf("%d +0000", when.Unix())
	fmt.Fprintf(&b, "author Mallory <mallory@example.com> %s\ncommitter Mallory <mallory@example.com> %s\n\n%s\n", stamp, stamp, msg)
	return o.Write("commit", []byte(b.String()))
}

// SetRef points ref ("refs/heads/main") at id, as a loose ref file.
func (o Objects) SetRef(ref, id string) {
	o.T.Helper()
	p := filepath.Join(o.Dir, filepath.FromSlash(ref))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		o.T.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
		o.T.Fatal(err)
	}
}

// TreeOf lists a commit's tree with `git ls-tree` as Raw entries (for building a hostile
// commit on top of a real one: keep every entry, add or replace some).
func (o Objects) TreeOf(g Git, rev string) []Entry {
	o.T.Helper()
	out, err := g.Run(o.Dir, nil, "ls-tree", "-z", rev)
	if err != nil {
		o.T.Fatal(err)
	}
	var list []Entry
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, name, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			o.T.Fatalf("ls-tree record %q", rec)
		}
		mode := f[0]
		if mode == "040000" {
			mode = "40000"
		}
		list = append(list, TreeRaw(name, mode, f[2]))
	}
	return list
}
