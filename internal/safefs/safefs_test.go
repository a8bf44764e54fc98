package safefs

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// setup makes base/{tree,outside}: tree holds a real dir, links inside and
// outside, a dangling link and a link to "..".
func setup(t testing.TB) (base string, tr *Tree) {
	base = t.TempDir()
	in := filepath.Join(base, "tree")
	out := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(in, "real", "sub"), out} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(out, "victim"), []byte("victim"), 0o644))
	must(t, os.WriteFile(filepath.Join(in, "real", "f"), []byte("f"), 0o644))
	must(t, os.Symlink(out, filepath.Join(in, "abs")))                            // outside, absolute
	must(t, os.Symlink("../outside", filepath.Join(in, "rel")))                   // outside, relative
	must(t, os.Symlink("real", filepath.Join(in, "inlink")))                      // inside
	must(t, os.Symlink("nowhere", filepath.Join(in, "dangling")))                 // dangling
	must(t, os.Symlink("..", filepath.Join(in, "up")))                            // the parent
	must(t, os.Symlink(filepath.Join(out, "victim"), filepath.Join(in, "vlink"))) // final link to a file outside
	tr, err := Open(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return base, tr
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot lists every name under dir with mode, size and content hash.
func snapshot(t testing.TB, dir string) string {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func TestRefusesThroughSymlinks(t *testing.T) {
	base, tr := setup(t)
	outside := filepath.Join(base, "outside")
	before := snapshot(t, outside)
	for _, dir := range []string{"abs", "rel", "inlink", "dangling", "up", "real/../abs"} {
		rel := dir + "/x"
		check := func(op string, err error, want error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s %s: no error", op, rel)
				return
			}
			if !errors.Is(err, want) {
				t.Errorf("%s %s: %v, want %v", op, rel, err, want)
			}
			if !strings.Contains(err.Error(), dir) {
				t.Errorf("%s %s: error %q does not name the path", op, rel, err)
			}
		}
		want := ErrSymlink
		if strings.Contains(dir, "..") {
			want = ErrEscape
		}
		check("write", tr.WriteFileAtomic(rel, []byte("pwned"), 0o644), want)
		check("mkdirall", tr.MkdirAll(rel+"/y", 0o755), want)
		check("symlink", tr.Symlink("/etc/passwd", rel), want)
		check("remove", tr.Remove(dir+"/victim"), want)
		check("removeall", tr.RemoveAll(dir+"/victim"), want)
		check("chmod", tr.Chmod(dir+"/victim", 0o777), want)
		check("rename-to", tr.Rename("real/f", dir+"/victim"), want)
		check("rename-from", tr.Rename(dir+"/victim", "real/g"), want)
		_, err := tr.ReadFile(dir + "/victim")
		check("read", err, want)
		_, err = tr.Lstat(dir + "/victim")
		check("lstat", err, want)
		_, err = tr.CreateTemp(rel, 0o644)
		check("createtemp", err, want)
	}
	if got := snapshot(t, outside); got != before {
		t.Fatalf("outside changed:\n%s\n---\n%s", before, got)
	}
	if _, err := os.Stat(filepath.Join(base, "tree", "real", "f")); err != nil {
		t.Fatalf("real/f moved: %v", err)
	}
}

func TestFinalSymlinkReplacedNotFollowed(t *testing.T) {
	base, tr := setup(t)
	outside := filepath.Join(base, "outside")
	before := snapshot(t, outside)
	must(t, tr.WriteFileAtomic("vlink", []byte("mine"), 0o644))
	fi, err := os.Lstat(filepath.Join(base, "tree", "vlink"))
	must(t, err)
	if !fi.Mode().IsRegular() {
		t.Fatalf("vlink is %v, want a regular file", fi.Mode())
	}
	must(t, tr.Symlink("elsewhere", "dangling"))
	if l, _ := os.Readlink(filepath.Join(base, "tree", "dangling")); l != "elsewhere" {
		t.Fatalf("dangling -> %q", l)
	}
	// Reading or chmodding a final symlink is refused, removing it removes the link.
	if _, err := tr.ReadFile("abs"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("read abs: %v", err)
	}
	if err := tr.Chmod("abs", 0o700); !errors.Is(err, ErrSymlink) {
		t.Fatalf("chmod abs: %v", err)
	}
	must(t, tr.Remove("abs"))
	must(t, tr.RemoveAll("rel"))
	must(t, tr.Rename("real/f", "up"))
	if got := snapshot(t, outside); got != before {
		t.Fatalf("outside changed:\n%s\n---\n%s", before, got)
	}
	if b, err := os.ReadFile(filepath.Join(base, "tree", "up")); err != nil || string(b) != "f" {
		t.Fatalf("up = %q, %v", b, err)
	}
}

func TestEscapeNames(t *testing.T) {
	_, tr := setup(t)
	for _, rel := range []string{"", "/etc/x", "../x", "a/../../x", "a//b", "a/./b", "./a", "a/", "a\x00b", "..", "real/.."} {
		if err := tr.WriteFileAtomic(rel, []byte("x"), 0o644); !errors.Is(err, ErrEscape) {
			t.Errorf("write %q: %v, want ErrEscape", rel, err)
		}
		if err := tr.MkdirAll(rel, 0o755); !errors.Is(err, ErrEscape) {
			t.Errorf("mkdirall %q: %v, want ErrEscape", rel, err)
		}
	}
}

func TestWriteLongNameAndTemps(t *testing.T) {
	base, tr := setup(t)
	name := strings.Repeat("記", 81) + "ab" // 245 bytes
	if len(name) != 245 {
		t.Fatal(len(name))
	}
	long255 := strings.Repeat("x", 255)
	for _, n := range []string{name, long255} {
		must(t, tr.MkdirAll("areas/deep", 0o755))
		must(t, tr.WriteFileAtomic("areas/deep/"+n, []byte(n), 0o600))
		b, err := tr.ReadFile("areas/deep/" + n)
		if err != nil || string(b) != n {
			t.Fatalf("read back %d-byte name: %v", len(n), err)
		}
	}
	ents, err := os.ReadDir(filepath.Join(base, "tree", "areas", "deep"))
	must(t, err)
	if len(ents) != 2 {
		t.Fatalf("temp files left: %v", ents)
	}
	// Streaming temp: invisible until committed, removed on abort.
	tm, err := tr.CreateTemp("areas/deep/s", 0o644)
	must(t, err)
	if !IsTempName(filepath.Base(tm.Path())) || len(filepath.Base(tm.Path())) != 26 {
		t.Fatalf("temp name %q", tm.Path())
	}
	_, err = tm.ReadFrom(strings.NewReader("streamed"))
	must(t, err)
	must(t, tm.Close())
	if _, err := tr.Lstat("areas/deep/s"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target visible before commit: %v", err)
	}
	must(t, tm.Commit())
	if b, _ := tr.ReadFile("areas/deep/s"); string(b) != "streamed" {
		t.Fatalf("s = %q", b)
	}
	tm, err = tr.CreateTemp("areas/deep/s", 0o644)
	must(t, err)
	tmpAbs := filepath.Join(base, "tree", filepath.FromSlash(tm.Path()))
	tm.Abort()
	if _, err := os.Lstat(tmpAbs); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("aborted temp still there: %v", err)
	}
	// A directory at the target is never replaced.
	must(t, tr.MkdirAll("areas/dir/x", 0o755))
	if err := tr.WriteFileAtomic("areas/dir", []byte("x"), 0o644); err == nil {
		t.Fatal("wrote over a directory")
	}
}

func TestCommitIfChanged(t *testing.T) {
	base, tr := setup(t)
	abs := filepath.Join(base, "tree", "real", "f")
	st, err := tr.Stamp("real/f")
	must(t, err)
	if !st.Exists || st.Ino == 0 {
		t.Fatalf("stamp %+v", st)
	}
	// Append meanwhile: size and ctime change.
	f, err := os.OpenFile(abs, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, _ = f.WriteString("more")
	f.Close()
	tm, err := tr.CreateTemp("real/f", 0o644)
	must(t, err)
	_, _ = tm.Write([]byte("theirs"))
	if err := tm.CommitIf(st); !errors.Is(err, ErrChanged) {
		t.Fatalf("CommitIf after an edit: %v", err)
	}
	if b, _ := os.ReadFile(abs); string(b) != "fmore" {
		t.Fatalf("clobbered: %q", b)
	}
	st, _ = tr.Stamp("real/f")
	tm, err = tr.CreateTemp("real/f", 0o644)
	must(t, err)
	_, _ = tm.Write([]byte("theirs"))
	must(t, tm.CommitIf(st))
	// A file that appears where none was checked.
	none, _ := tr.Stamp("real/new")
	if none.Exists {
		t.Fatal("stamp of a missing file exists")
	}
	must(t, os.WriteFile(filepath.Join(base, "tree", "real", "new"), []byte("w"), 0o644))
	tm, err = tr.CreateTemp("real/new", 0o644)
	must(t, err)
	if err := tm.CommitIf(none); !errors.Is(err, ErrChanged) {
		t.Fatalf("CommitIf over a new file: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(base, "tree", "real"))
	for _, e := range ents {
		if IsTempName(e.Name()) {
			t.Fatalf("temp left: %s", e.Name())
		}
	}
}

// FuzzNoEscape: whatever names an attacker picks, no operation writes or
// removes anything outside the root.
func FuzzNoEscape(f *testing.F) {
	for _, s := range []string{"a", "../x", "abs/x", "rel/x", "up/outside/victim", "inlink/x", "real/../../outside/victim", "/tmp/x", "vlink", "a/b/c"} {
		f.Add(s, "x", uint8(0))
	}
	f.Fuzz(func(t *testing.T, rel, rel2 string, op uint8) {
		base, tr := setup(t)
		outside := filepath.Join(base, "outside")
		before := snapshot(t, outside)
		switch op % 9 {
		case 0:
			_ = tr.WriteFileAtomic(rel, []byte("pwned"), 0o644)
		case 1:
			_ = tr.MkdirAll(rel, 0o755)
		case 2:
			_ = tr.Symlink(rel2, rel)
		case 3:
			_ = tr.Rename(rel, rel2)
		case 4:
			_ = tr.Remove(rel)
		case 5:
			_ = tr.RemoveAll(rel)
		case 6:
			_ = tr.Chmod(rel, 0o777)
		case 7:
			_ = tr.Link(rel, rel2)
		case 8:
			if f, err := tr.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
				f.WriteString("pwned")
				f.Close()
			}
		}
		if got := snapshot(t, outside); got != before {
			t.Fatalf("op %d %q %q changed outside:\n%s\n---\n%s", op%9, rel, rel2, before, got)
		}
		if _, err := os.Lstat(filepath.Join(base, "pwned")); err == nil {
			t.Fatal("wrote beside the root")
		}
		ents, _ := os.ReadDir(base)
		if len(ents) != 2 {
			t.Fatalf("new entries beside the root: %v", ents)
		}
	})
}

// BenchmarkCommitIfWindow times what CommitIf does between its re-stat of the target and
// the end of its rename (an lstat, the comparison, a rename in the verified parent): the
// window in which a writer's edit of the target can still be replaced unseen
// (docs/RELIABILITY.md). Each iteration renames a file back and forth, as CommitIf would.
func BenchmarkCommitIfWindow(b *testing.B) {
	dir := b.TempDir()
	r, err := os.OpenRoot(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	must(b, os.WriteFile(filepath.Join(dir, "x"), []byte("v"), 0o644))
	from, to := "x", "t"
	var want Stamp
	for b.Loop() {
		fi, err := r.Lstat(to)
		if err == nil && stampOf(fi) == want {
			b.Fatal("impossible")
		}
		must(b, r.Rename(from, to))
		from, to = to, from
	}
}

func TestLinkAndOpenFile(t *testing.T) {
	base, tr := setup(t)
	before := snapshot(t, filepath.Join(base, "outside"))
	must(t, tr.WriteFileAtomic("lock.tmp", []byte("pid: 1\n"), 0o644))
	must(t, tr.Link("lock.tmp", "lock"))
	if err := tr.Link("lock.tmp", "lock"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("link over an existing file: %v", err)
	}
	if err := tr.Link("lock.tmp", "abs/lock"); !errors.Is(err, ErrSymlink) {
		t.Fatalf("link through a symlink: %v", err)
	}
	f, err := tr.OpenFile("real/log", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	must(t, err)
	f.Close()
	for _, rel := range []string{"vlink", "abs/x", "inlink/f"} {
		if _, err := tr.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); !errors.Is(err, ErrSymlink) {
			t.Errorf("OpenFile %s: %v, want ErrSymlink", rel, err)
		}
	}
	if got := snapshot(t, filepath.Join(base, "outside")); got != before {
		t.Fatal("outside changed")
	}
}

// NoSync and SetModTime: the file lands under its name with the content and the time asked
// for (to the microsecond), and no temp file is left beside it.
func TestTempNoSyncModTime(t *testing.T) {
	base, tr := setup(t)
	mt := time.Date(2026, 11, 30, 3, 0, 0, 123456000, time.UTC)
	tm, err := tr.CreateTemp("real/cache", 0o600)
	must(t, err)
	tm.NoSync()
	tm.SetModTime(mt)
	_, err = tm.Write([]byte("c"))
	must(t, err)
	must(t, tm.Commit())
	fi, err := os.Lstat(filepath.Join(base, "tree", "real", "cache"))
	must(t, err)
	if !fi.Mode().IsRegular() || !fi.ModTime().Equal(mt) {
		t.Fatalf("cache: %v %v, want a regular file at %v", fi.Mode(), fi.ModTime(), mt)
	}
	ents, err := os.ReadDir(filepath.Join(base, "tree", "real"))
	must(t, err)
	for _, e := range ents {
		if IsTempName(e.Name()) {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}
