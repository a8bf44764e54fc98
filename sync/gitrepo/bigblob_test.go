package gitrepo

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"

	"github.com/memd-dev/memd/internal/gitpath"
	"github.com/memd-dev/memd/internal/testutil"
)

// zeroChunk is the unit of zeroZlib's stream.
const zeroChunk = 1 << 20

// zeroZlib writes a zlib stream (level 9) of size zero bytes, a multiple of zeroChunk,
// without compressing them all: after the first chunk, every flushed chunk of zeros
// compresses to the same bytes (the window is all zeros), so one is repeated. The adler32
// of n zeros is (n mod 65521)<<16 | 1.
func zeroZlib(w io.Writer, size int64) error {
	if size < zeroChunk || size%zeroChunk != 0 {
		return fmt.Errorf("zeroZlib: size %d is not a multiple of %d", size, zeroChunk)
	}
	var buf bytes.Buffer
	fw, _ := flate.NewWriter(&buf, flate.BestCompression)
	zeros := make([]byte, zeroChunk)
	var parts [2][]byte
	for i := range parts {
		start := buf.Len()
		fw.Write(zeros)
		fw.Flush()
		parts[i] = append([]byte(nil), buf.Bytes()[start:]...)
	}
	start := buf.Len()
	fw.Close()
	tail := append([]byte(nil), buf.Bytes()[start:]...)
	if _, err := w.Write([]byte{0x78, 0xda}); err != nil {
		return err
	}
	if _, err := w.Write(parts[0]); err != nil {
		return err
	}
	for range size/zeroChunk - 1 {
		if _, err := w.Write(parts[1]); err != nil {
			return err
		}
	}
	if _, err := w.Write(tail); err != nil {
		return err
	}
	return binary.Write(w, binary.BigEndian, uint32(size%65521)<<16|1)
}

// zeroBlobHash is the object id of a blob of size zeros.
func zeroBlobHash(size int64) plumbing.Hash {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", size)
	zeros := make([]byte, zeroChunk)
	for n := size; n > 0; n -= zeroChunk {
		h.Write(zeros[:min(n, zeroChunk)])
	}
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}

// addZeroBlob puts a blob of size zeros into the bare repo as a pack of its own with its
// index, without git inflating or hashing it (the pack is ~size/1000 bytes; nothing of size
// touches the disk), and returns its id.
func addZeroBlob(t testing.TB, bare string, size int64) plumbing.Hash {
	t.Helper()
	id := zeroBlobHash(size)
	var pack bytes.Buffer
	pack.WriteString("PACK")
	binary.Write(&pack, binary.BigEndian, uint32(2))
	binary.Write(&pack, binary.BigEndian, uint32(1))
	const entry = 12
	hdr := []byte{byte(plumbing.BlobObject)<<4 | byte(size&0x0f)}
	for s := size >> 4; s > 0; s >>= 7 {
		hdr[len(hdr)-1] |= 0x80
		hdr = append(hdr, byte(s&0x7f))
	}
	pack.Write(hdr)
	if err := zeroZlib(&pack, size); err != nil {
		t.Fatal(err)
	}
	crc := crc32.ChecksumIEEE(pack.Bytes()[entry:])
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])

	iw := new(idxfile.Writer)
	iw.OnHeader(1)
	iw.OnInflatedObjectHeader(plumbing.BlobObject, size, entry)
	iw.OnInflatedObjectContent(id, entry, crc, nil)
	iw.OnFooter(plumbing.Hash(sum))
	idx, err := iw.Index()
	if err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(bare, "objects", "pack", fmt.Sprintf("pack-%x", sum))
	var ib bytes.Buffer
	if _, err := idxfile.NewEncoder(&ib).Encode(idx); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".pack", pack.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".idx", ib.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	return id
}

// commitZeroBlob commits, on the bare repo's main, a file rel holding the blob of size
// zeros next to what main has; git reads only the blob's header.
func commitZeroBlob(t testing.TB, bare, rel string, size int64) {
	t.Helper()
	id := addZeroBlob(t, bare, size)
	idx := filepath.Join(t.TempDir(), "index")
	env := append(testutil.GitEnv(), "GIT_INDEX_FILE="+idx)
	run := func(args ...string) string {
		t.Helper()
		cmd := execGit(bare, env, args...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	run("read-tree", "main")
	run("update-index", "--add", "--cacheinfo", "100644,"+id.String()+","+rel)
	tree := run("write-tree")
	c := run("commit-tree", tree, "-p", "main", "-m", "a big file")
	run("update-ref", "refs/heads/main", c)
}

// TestFetchRefusesBlobOverMaxFileSize: a fetched commit with a file over sync.max_file_size
// is refused by the blob's size alone (ErrBlobTooLarge, an unsafe tree: state error),
// naming the path and the size; nothing is checked out, local commits go on, and a second
// sync (a restart) fetches nothing again: the pack is kept and the refusal found again.
func TestFetchRefusesBlobOverMaxFileSize(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"a.md": "one\n"})
	const size = 64 << 20
	commitZeroBlob(t, w.bare, "areas/huge.bin", size)
	w.a.SetMaxFileSize(1 << 20)

	_, err := w.a.Sync(context.Background(), pushOpts())
	var big *gitpath.BlobTooLargeError
	if !errors.As(err, &big) || !errors.Is(err, gitpath.ErrUnsafeTree) {
		t.Fatalf("Sync = %v; want a gitpath.BlobTooLargeError that is an gitpath.ErrUnsafeTree", err)
	}
	if big.Path != "areas/huge.bin" || big.Size != size || !strings.Contains(err.Error(), "areas/huge.bin") ||
		!strings.Contains(err.Error(), "64MiB") {
		t.Fatalf("error %q (%+v) does not name the path and the size", err, big)
	}
	if _, err := os.Stat(filepath.Join(w.aDir, "areas", "huge.bin")); !os.IsNotExist(err) {
		t.Fatalf("huge.bin checked out: %v", err)
	}
	// Local work goes on: a commit is made (the push is refused with the rest of the sync).
	testutil.WriteFile(t, w.aDir, "b.md", "two\n")
	if res := mustCommit(t, w.a, "b.md"); res.Hash == "" {
		t.Fatal("no local commit while the remote is refused")
	}
	// A restart: the same refusal, without fetching the pack again. (The first memd's index
	// refresh after its commit is let finish, as a stopped memd's is: its index.lock would
	// make the new one stand aside.)
	w.a.WaitIndexRefresh()
	packs := w.a.packCount()
	r2 := openTest(t, w.aDir, hostOptions("hosta"))
	r2.SetMaxFileSize(1 << 20)
	if _, err := r2.Sync(context.Background(), pushOpts()); !errors.Is(err, gitpath.ErrBlobTooLarge) {
		t.Fatalf("after a restart Sync = %v; want gitpath.ErrBlobTooLarge", err)
	}
	if r2.packCount() != packs {
		t.Fatalf("the refused pack was fetched again: %d packs, had %d", r2.packCount(), packs)
	}
}

func execGit(dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// TestFetchBigBlobRSS (MEMD_LONG=1; ~1 min): a sync of a remote holding a 2 GiB blob (a
// 2 MiB pack at compression 9) stays under 100 MiB of RSS: the fetch streams the blob
// through the index's hash, and the refusal reads its size only. The sync runs in a child
// process (this test binary again) so its peak RSS is its own.
func TestFetchBigBlobRSS(t *testing.T) {
	if dir := os.Getenv("MEMD_BIGBLOB_CHILD"); dir != "" {
		r, err := Open(dir, hostOptions("hosta"))
		if err != nil {
			t.Fatal(err)
		}
		r.SetMaxFileSize(100 << 20)
		_, err = r.Sync(context.Background(), RemoteOptions{Push: true, Timeout: 10 * time.Minute})
		fmt.Printf("child sync: %v\n", err)
		if !errors.Is(err, gitpath.ErrBlobTooLarge) {
			t.Fatalf("Sync = %v; want gitpath.ErrBlobTooLarge", err)
		}
		return
	}
	if os.Getenv("MEMD_LONG") != "1" {
		t.Skip("MEMD_LONG=1: a 2 GiB blob takes a minute of CPU")
	}
	w := newSyncWorld(t, map[string]string{"a.md": "one\n"})
	commitZeroBlob(t, w.bare, "huge.bin", bigBlobSize())
	w.a.Close()
	start := time.Now()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFetchBigBlobRSS$", "-test.count=1")
	cmd.Env = append(os.Environ(), "MEMD_BIGBLOB_CHILD="+w.aDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	t.Logf("sync of a 2 GiB blob: %s, peak RSS %.1f MiB\n%s", time.Since(start).Round(time.Millisecond), float64(rss)/(1<<20), out)
	if rss > 100<<20 {
		t.Fatalf("peak RSS %.1f MiB, want under 100 MiB", float64(rss)/(1<<20))
	}
}

// bigBlobSize is 2 GiB, or MEMD_BIGBLOB_MIB when set (profiling a smaller one).
func bigBlobSize() int64 {
	if n, err := strconv.Atoi(os.Getenv("MEMD_BIGBLOB_MIB")); err == nil && n > 0 {
		return int64(n) << 20
	}
	return 2 << 30
}

// TestCommitHoldsFileOverMaxFileSize: a local file over sync.max_file_size is held: not
// committed, left on disk, listed by HeldFiles, while the rest of the batch commits; under
// the limit again it is committed and no longer held.
func TestCommitHoldsFileOverMaxFileSize(t *testing.T) {
	dir := newGitDir(t)
	r := openTest(t, dir, testOptions())
	r.SetMaxFileSize(1024)
	testutil.WriteFile(t, dir, "small.md", "small\n")
	testutil.WriteFile(t, dir, "big.md", strings.Repeat("x", 2048))
	mustCommit(t, r, "small.md", "big.md")
	tree := lsTree(t, dir)
	if _, ok := tree["small.md"]; !ok {
		t.Fatalf("small.md not committed: %v", tree)
	}
	if _, ok := tree["big.md"]; ok {
		t.Fatalf("big.md committed over the limit: %v", tree)
	}
	if got := r.HeldFiles(); len(got) != 1 || got[0] != (HeldFile{Path: "big.md", Size: 2048}) {
		t.Fatalf("HeldFiles = %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "big.md")); err != nil || len(b) != 2048 {
		t.Fatalf("big.md on disk: %d bytes, %v", len(b), err)
	}
	testutil.WriteFile(t, dir, "big.md", "now small\n")
	mustCommit(t, r, "big.md")
	if _, ok := lsTree(t, dir)["big.md"]; !ok || len(r.HeldFiles()) != 0 {
		t.Fatalf("big.md under the limit: committed %v, held %+v", ok, r.HeldFiles())
	}
}
