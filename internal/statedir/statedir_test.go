package statedir

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
)

func setup(t *testing.T) (repo, victim, outside string) {
	t.Helper()
	dir := t.TempDir()
	repo, outside = filepath.Join(dir, "repo"), filepath.Join(dir, "outside")
	for _, d := range []string{filepath.Join(repo, ".git"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim = filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo, victim, outside
}

// A link at a state file's name is replaced, never written through: by the durable write,
// the cache write and the in-place open.
func TestStateFilesReplaceLinks(t *testing.T) {
	repo, victim, _ := setup(t)
	state := filepath.Join(repo, ".git", "memd")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"durable", "cache", "inplace"} {
		if err := os.Symlink(victim, filepath.Join(state, n)); err != nil {
			t.Fatal(err)
		}
	}
	sd, err := Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	if err := sd.Ensure(); err != nil {
		t.Fatal(err)
	}
	if err := sd.WriteFile("durable", []byte("d"), 0o600); err != nil {
		t.Fatal(err)
	}
	mt := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	if err := sd.WriteCache("cache", 0o600, mt, func(w io.Writer) error { _, err := w.Write([]byte("c")); return err }); err != nil {
		t.Fatal(err)
	}
	f, err := sd.OpenInPlace("inplace", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, n := range []string{"durable", "cache", "inplace"} {
		if fi, err := os.Lstat(filepath.Join(state, n)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v %v, want a regular file", n, fi, err)
		}
	}
	if fi, _ := os.Stat(filepath.Join(state, "cache")); !fi.ModTime().Equal(mt) {
		t.Errorf("cache mtime %v, want %v", fi.ModTime(), mt)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Fatalf("victim written: %q", b)
	}
}

// A state dir (or .git) that is a symlink is refused, naming it; its target is not chmodded.
func TestStateDirLinkRefused(t *testing.T) {
	for _, link := range []string{".git/memd", ".git"} {
		t.Run(link, func(t *testing.T) {
			repo, _, outside := setup(t)
			p := filepath.Join(repo, filepath.FromSlash(link))
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, p); err != nil {
				t.Fatal(err)
			}
			sd, err := Open(filepath.Join(repo, ".git", "memd"))
			if err != nil {
				t.Fatal(err)
			}
			defer sd.Close()
			err = sd.Ensure()
			if !errors.Is(err, safefs.ErrSymlink) {
				t.Fatalf("Ensure over a linked %s: %v, want ErrSymlink", link, err)
			}
			if err := sd.WriteFile("x", nil, 0o600); err == nil {
				t.Fatal("wrote through the link")
			}
			if _, err := sd.OpenInPlace("memd.pid", 0o600); err == nil {
				t.Fatal("opened memd.pid through the link")
			}
			if fi, _ := os.Stat(outside); fi.Mode().Perm() != 0o755 {
				t.Fatalf("target chmodded to %v", fi.Mode().Perm())
			}
		})
	}
}

// WriteFileAt: durable, and the file carries the time asked for when it appears.
func TestWriteFileAtSetsModTime(t *testing.T) {
	repo := t.TempDir()
	sd, err := Create(memd.StateDir(repo))
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	mt := time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)
	if err := sd.WriteFileAt("status.json", []byte("{}\n"), 0o600, mt); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(memd.StateDir(repo), "status.json"))
	if err != nil || !fi.ModTime().Equal(mt) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("status.json: %v %v, want mode 0600 at %v", fi, err, mt)
	}
	if dir, err := os.Stat(memd.StateDir(repo)); err != nil || dir.Mode().Perm() != 0o700 {
		t.Fatalf("state dir: %v %v, want 0700", dir, err)
	}
}

// RefreshCache of the text a file already holds sets its time and keeps its inode; other
// text replaces it; a link at the name (even to a file holding that text) is replaced,
// its target untouched.
func TestRefreshCacheKeepsUnchangedFile(t *testing.T) {
	repo, victim, _ := setup(t)
	sd, err := Create(memd.StateDir(repo))
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	p := filepath.Join(memd.StateDir(repo), "status.line")
	t1 := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	if err := sd.RefreshCache("status.line", 0o600, t1, []byte("ok\n")); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(p)
	if err != nil || !before.ModTime().Equal(t1) {
		t.Fatalf("first write: %v %v, want mtime %v", before, err, t1)
	}
	t2 := t1.Add(time.Minute)
	if err := sd.RefreshCache("status.line", 0o600, t2, []byte("ok\n")); err != nil {
		t.Fatal(err)
	}
	same, err := os.Stat(p)
	if err != nil || !os.SameFile(before, same) || !same.ModTime().Equal(t2) {
		t.Fatalf("same text: %v %v, want the same file at %v", same, err, t2)
	}
	t3 := t2.Add(time.Minute)
	if err := sd.RefreshCache("status.line", 0o600, t3, []byte("busy\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "busy\n" {
		t.Fatalf("new text: %q", b)
	}
	if fi, _ := os.Stat(p); !fi.ModTime().Equal(t3) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new text: %v, want mode 0600 at %v", fi, t3)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	vfi, _ := os.Stat(victim)
	if err := sd.RefreshCache("status.line", 0o600, t3, []byte("precious\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("link at the name: %v %v, want a regular file", fi, err)
	}
	if fi, _ := os.Stat(victim); !fi.ModTime().Equal(vfi.ModTime()) {
		t.Fatalf("the link's target got a new time: %v", fi.ModTime())
	}
}
