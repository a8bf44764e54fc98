package gitstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/memd-dev/memd/internal/testutil"
)

type gitObject struct {
	hash plumbing.Hash
	typ  plumbing.ObjectType
	data []byte
}

// allObjects is every object in dir as git itself reads it (`cat-file --batch-all-objects`).
func allObjects(t testing.TB, g testutil.Git, dir string) []gitObject {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "--batch-all-objects", "--batch")
	cmd.Dir, cmd.Env = dir, g.Env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file --batch-all-objects: %v", err)
	}
	var objs []gitObject
	r := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return objs
		}
		f := strings.Fields(line)
		if err != nil || len(f) != 3 {
			t.Fatalf("cat-file header %q: %v", line, err)
		}
		typ, _ := plumbing.ParseObjectType(f[1])
		n, _ := strconv.Atoi(f[2])
		data := make([]byte, n+1)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, gitObject{plumbing.NewHash(f[0]), typ, data[:n]})
	}
}

func readAll(t testing.TB, obj plumbing.EncodedObject) []byte {
	t.Helper()
	rd, err := obj.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkObjects reads every object git has through s and compares type, size and bytes.
func checkObjects(t *testing.T, s *Storage, objs []gitObject) {
	t.Helper()
	for _, o := range objs {
		got, err := s.EncodedObject(plumbing.AnyObject, o.hash)
		if err != nil {
			t.Fatalf("EncodedObject(%s): %v", o.hash, err)
		}
		if got.Type() != o.typ || got.Size() != int64(len(o.data)) || !bytes.Equal(readAll(t, got), o.data) {
			t.Fatalf("object %s: %s of %d bytes, git has a %s of %d", o.hash, got.Type(), got.Size(), o.typ, len(o.data))
		}
		if size, err := s.EncodedObjectSize(o.hash); err != nil || size != int64(len(o.data)) {
			t.Fatalf("EncodedObjectSize(%s) = %d, %v; git says %d", o.hash, size, err, len(o.data))
		}
		if err := s.HasEncodedObject(o.hash); err != nil {
			t.Fatalf("HasEncodedObject(%s): %v", o.hash, err)
		}
		other := plumbing.BlobObject
		if o.typ == plumbing.BlobObject {
			other = plumbing.TreeObject
		}
		if _, err := s.EncodedObject(other, o.hash); !errors.Is(err, plumbing.ErrObjectNotFound) {
			t.Fatalf("EncodedObject(%s, %s) of a %s: %v", other, o.hash, o.typ, err)
		}
	}
}

// TestStorageReadsWhatGitHas: packed objects (most of them deltas) and loose ones read
// through Storage are byte for byte what git reads, and absent ones are ErrObjectNotFound
// in every method.
func TestStorageReadsWhatGitHas(t *testing.T) {
	dir, g, _ := packedRepo(t, 300, false)
	for i := range 5 {
		cmd := exec.Command("git", "hash-object", "-w", "--stdin")
		cmd.Dir, cmd.Env, cmd.Stdin = dir, g.Env, strings.NewReader(fmt.Sprintf("a loose blob %d\n", i))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git hash-object: %v\n%s", err, out)
		}
	}
	s := NewStorage(filepath.Join(dir, ".git"), cache.NewObjectLRU(64*cache.KiByte), 1<<20)
	objs := allObjects(t, g, dir)
	checkObjects(t, s, objs)

	absent := plumbing.NewHash("0123456789abcdef0123456789abcdef01234567")
	if _, err := s.EncodedObject(plumbing.AnyObject, absent); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Fatalf("EncodedObject(absent): %v", err)
	}
	if err := s.HasEncodedObject(absent); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Fatalf("HasEncodedObject(absent): %v", err)
	}
	if _, err := s.EncodedObjectSize(absent); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Fatalf("EncodedObjectSize(absent): %v", err)
	}

	it, err := s.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := it.ForEach(func(plumbing.EncodedObject) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != len(objs) {
		t.Fatalf("IterEncodedObjects saw %d objects, git has %d", n, len(objs))
	}
	prefix := objs[3].hash[:1]
	want := 0
	for _, o := range objs {
		if o.hash[0] == prefix[0] {
			want++
		}
	}
	if got, err := s.HashesWithPrefix(prefix); err != nil || len(got) != want {
		t.Fatalf("HashesWithPrefix(%x): %d, %v; want %d", prefix, len(got), err, want)
	}
}

// TestStorageFetchesAndReadsBack: a go-git fetch into a Storage writes its pack through
// PackfileWriter, and every fetched object then reads back as git has it.
func TestStorageFetchesAndReadsBack(t *testing.T) {
	src, g, _ := packedRepo(t, 120, false)
	dst := t.TempDir()
	if _, err := g.Run(dst, nil, "init", "-q", "-b", "main"); err != nil {
		t.Fatal(err)
	}
	s := NewStorage(filepath.Join(dst, ".git"), cache.NewObjectLRU(cache.MiByte), 1<<20)
	repo, err := git.Open(s, osfs.New(dst))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: "src", URLs: []string{src}}); err != nil {
		t.Fatal(err)
	}
	if err := repo.Fetch(&git.FetchOptions{RemoteName: "src", RefSpecs: []config.RefSpec{"refs/heads/main:refs/remotes/src/main"}}); err != nil {
		t.Fatalf("fetch: %v", err)
	}
	checkObjects(t, s, allObjects(t, g, src))
	if _, err := g.Run(dst, nil, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("git fsck after a fetch through Storage: %v", err)
	}
}

// TestStorageSurvivesARepackBehindIt: git replaces the packs Storage has open; the next
// read lists them again instead of failing.
func TestStorageSurvivesARepackBehindIt(t *testing.T) {
	dir, g, _ := packedRepo(t, 200, false)
	s := NewStorage(filepath.Join(dir, ".git"), cache.NewObjectLRU(0), 1<<20)
	objs := allObjects(t, g, dir)
	if _, err := s.EncodedObject(plumbing.AnyObject, objs[0].hash); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(dir, nil, "-c", "pack.writeReverseIndex=true", "repack", "-adfq", "--window=5"); err != nil {
		t.Fatal(err)
	}
	checkObjects(t, s, objs)
}

// TestStorageConcurrentReadsAndReindex reads from several goroutines while another
// reindexes and collects garbage, so the mappings of dropped indexes are released while
// reads run (the race detector and a fault would catch a mapping freed under a reader).
func TestStorageConcurrentReadsAndReindex(t *testing.T) {
	dir, g, _ := packedRepo(t, 200, false)
	s := NewStorage(filepath.Join(dir, ".git"), cache.NewObjectLRU(16*cache.KiByte), 1<<20)
	objs := allObjects(t, g, dir)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range 1500 {
				o := objs[rng.IntN(len(objs))]
				got, err := s.EncodedObject(plumbing.AnyObject, o.hash)
				if err != nil {
					errs <- err
					return
				}
				rd, _ := got.Reader()
				b, _ := io.ReadAll(rd)
				rd.Close()
				if !bytes.Equal(b, o.data) {
					errs <- fmt.Errorf("object %s read wrong", o.hash)
					return
				}
			}
		}()
	}
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				s.Reindex()
				runtime.GC()
			}
		}
	}()
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestStorageHeapDoesNotGrowWithObjects is issue 17's soak in miniature: after every object
// of a repository was read once, go-git's storage holds ~90 bytes an object on the heap
// (its decoded indexes and offset map); Storage holds at most the 4-byte offset order of a
// pack without a .rev file. Bytes an object are the slope between a small and a big
// repository, so what either storage allocates once does not count.
func TestStorageHeapDoesNotGrowWithObjects(t *testing.T) {
	type repo struct {
		gitDir string
		objs   []gitObject
	}
	var repos []repo
	for _, commits := range []int{200, 1500} {
		dir, g, _ := packedRepo(t, commits, false)
		repos = append(repos, repo{filepath.Join(dir, ".git"), allObjects(t, g, dir)})
	}
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// kept is what a storage still holds after reading every object of r once.
	kept := func(r repo, open func(gitDir string) storer.EncodedObjectStorer) float64 {
		before := heap()
		st := open(r.gitDir)
		for _, o := range r.objs {
			obj, err := st.EncodedObject(plumbing.AnyObject, o.hash)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, obj)
		}
		after := heap()
		runtime.KeepAlive(st)
		runtime.KeepAlive(r.objs) // git's copy of every object, the same in both
		return float64(after) - float64(before)
	}
	perObject := func(open func(gitDir string) storer.EncodedObjectStorer) float64 {
		small, big := kept(repos[0], open), kept(repos[1], open)
		return (big - small) / float64(len(repos[1].objs)-len(repos[0].objs))
	}
	theirs := perObject(func(gitDir string) storer.EncodedObjectStorer {
		return filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(0), filesystem.Options{LargeObjectThreshold: 1 << 20})
	})
	ours := perObject(func(gitDir string) storer.EncodedObjectStorer {
		return NewStorage(gitDir, cache.NewObjectLRU(0), 1<<20)
	})
	t.Logf("go-git's storage keeps %.1f bytes an object on the heap, Storage %.1f", theirs, ours)
	if theirs < 40 {
		t.Fatalf("go-git's storage kept only %.1f bytes an object: the measurement does not see the indexes", theirs)
	}
	if ours > 6 {
		t.Fatalf("Storage keeps %.1f bytes an object on the heap (the 4-byte offset order expected)", ours)
	}
}

// TestStorageReindexKeepsOpenPacks: a Reindex maps only the packs that are new; a pack that
// is still there keeps its one mapping (a daemon reindexes after every fetch).
func TestStorageReindexKeepsOpenPacks(t *testing.T) {
	dir, g, _ := packedRepo(t, 50, false)
	s := NewStorage(filepath.Join(dir, ".git"), cache.NewObjectLRU(0), 1<<20)
	before, err := s.packIndexes()
	if err != nil || len(before) != 1 {
		t.Fatalf("packs %d, %v", len(before), err)
	}
	if _, err := g.Run(dir, nil, "commit", "-q", "--allow-empty", "-m", "one more"); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Run(dir, nil, "repack", "-dq"); err != nil { // a second pack, of the new commit
		t.Fatal(err)
	}
	s.Reindex()
	after, err := s.packIndexes()
	if err != nil || len(after) != 2 {
		t.Fatalf("packs after the repack %d, %v", len(after), err)
	}
	if after[0] != before[0] {
		t.Fatal("the pack that stayed was mapped again")
	}
	if err := s.HasEncodedObject(plumbing.NewHash(g.Rev(dir, "HEAD"))); err != nil {
		t.Fatalf("the new pack's commit: %v", err)
	}
}
