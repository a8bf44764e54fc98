package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// eachSwap runs a case with the atomic exchange and with the fallback of a file system
// that has none (noSwap).
func eachSwap(t *testing.T, run func(t *testing.T)) {
	for _, ns := range []bool{false, true} {
		name := "exchange"
		if ns {
			name = "no-exchange"
		}
		t.Run(name, func(t *testing.T) {
			noSwap = ns
			t.Cleanup(func() { noSwap, hookBeforeSwap = false, nil })
			run(t)
		})
	}
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if IsTempName(e.Name()) {
			t.Fatalf("temp left: %s", e.Name())
		}
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

// The finding-11 race: a writer opens the file O_APPEND before the re-stat and writes
// after the rename. Its bytes are in the held version, not lost with the inode.
func TestCommitHoldKeepsLateAppend(t *testing.T) {
	eachSwap(t, func(t *testing.T) {
		base, tr := setup(t)
		abs := filepath.Join(base, "tree", "real", "f")
		want, err := tr.Stamp("real/f")
		must(t, err)
		var w *os.File
		hookBeforeSwap = func(string) {
			w, err = os.OpenFile(abs, os.O_APPEND|os.O_WRONLY, 0)
			must(t, err)
		}
		tm, err := tr.CreateTemp("real/f", 0o644)
		must(t, err)
		_, _ = tm.Write([]byte("theirs"))
		d, err := tm.CommitHold(want)
		must(t, err)
		defer d.Close()
		if got := read(t, abs); got != "theirs" {
			t.Fatalf("target %q", got)
		}
		// Nothing written yet: the held version is the checked one.
		st, err := d.Stat()
		must(t, err)
		if st != d.Held() || !d.Held().SameButCtime(want) {
			t.Fatalf("unchanged version: held %+v now %+v want %+v", d.Held(), st, want)
		}
		_, err = w.WriteString("+late")
		must(t, err)
		w.Close()
		if st, _ := d.Stat(); st == d.Held() {
			t.Fatal("the late append did not change the held version's stamp")
		}
		b, err := d.ReadAll()
		must(t, err)
		if string(b) != "f+late" {
			t.Fatalf("held %q, want the checked content plus the append", b)
		}
		noTemps(t, filepath.Dir(abs))
	})
}

// A writer that renames its own version over the target after the re-stat: the exchange
// takes it off the name and holds it, so it is not clobbered unseen (this is the one case
// the fallback without an exchange leaves open: CommitHold's doc).
func TestCommitHoldKeepsRenamedVersion(t *testing.T) {
	base, tr := setup(t)
	abs := filepath.Join(base, "tree", "real", "f")
	want, err := tr.Stamp("real/f")
	must(t, err)
	hookBeforeSwap = func(string) {
		must(t, os.WriteFile(abs+".w", []byte("writer's"), 0o644))
		must(t, os.Rename(abs+".w", abs))
	}
	t.Cleanup(func() { hookBeforeSwap = nil })
	tm, err := tr.CreateTemp("real/f", 0o644)
	must(t, err)
	_, _ = tm.Write([]byte("theirs"))
	d, err := tm.CommitHold(want)
	must(t, err)
	defer d.Close()
	b, err := d.ReadAll()
	must(t, err)
	if string(b) != "writer's" || d.Held().Ino == want.Ino {
		t.Fatalf("held %q (ino %d, checked %d): want the writer's version", b, d.Held().Ino, want.Ino)
	}
	noTemps(t, filepath.Dir(abs))
}

// Nothing there when checked, a file created before the rename: not replaced.
func TestCommitHoldNoReplace(t *testing.T) {
	base, tr := setup(t)
	abs := filepath.Join(base, "tree", "real", "new")
	hookBeforeSwap = func(string) { must(t, os.WriteFile(abs, []byte("writer's"), 0o644)) }
	t.Cleanup(func() { hookBeforeSwap = nil })
	tm, err := tr.CreateTemp("real/new", 0o644)
	must(t, err)
	_, _ = tm.Write([]byte("theirs"))
	if _, err := tm.CommitHold(Stamp{}); !errors.Is(err, ErrChanged) {
		t.Fatalf("CommitHold over a file created since: %v", err)
	}
	if got := read(t, abs); got != "writer's" {
		t.Fatalf("clobbered: %q", got)
	}
	noTemps(t, filepath.Dir(abs))
}

// A directory put at the target before the swap is swapped back; a target removed
// before the swap is ErrChanged; an edit before the re-stat is ErrChanged.
func TestCommitHoldRefuses(t *testing.T) {
	eachSwap(t, func(t *testing.T) {
		base, tr := setup(t)
		abs := filepath.Join(base, "tree", "real", "f")
		for _, c := range []struct {
			name string
			act  func()
		}{
			{"directory", func() { must(t, os.Remove(abs)); must(t, os.Mkdir(abs, 0o755)) }},
			{"removed", func() { must(t, os.Remove(abs)) }},
		} {
			must(t, os.RemoveAll(abs))
			must(t, os.WriteFile(abs, []byte("f"), 0o644))
			want, err := tr.Stamp("real/f")
			must(t, err)
			hookBeforeSwap = func(string) { c.act() }
			tm, err := tr.CreateTemp("real/f", 0o644)
			must(t, err)
			_, _ = tm.Write([]byte("theirs"))
			if _, err := tm.CommitHold(want); !errors.Is(err, ErrChanged) {
				t.Fatalf("%s: %v, want ErrChanged", c.name, err)
			}
			fi, err := os.Lstat(abs)
			if c.name == "directory" && (err != nil || !fi.IsDir()) {
				t.Fatalf("%s: the directory is not back: %v", c.name, err)
			}
			if c.name == "removed" && !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: something is at the target: %v", c.name, err)
			}
			noTemps(t, filepath.Dir(abs))
		}
		hookBeforeSwap = nil
		must(t, os.RemoveAll(abs))
		must(t, os.WriteFile(abs, []byte("f"), 0o644))
		want, _ := tr.Stamp("real/f")
		must(t, os.WriteFile(abs, []byte("edited"), 0o644))
		tm, err := tr.CreateTemp("real/f", 0o644)
		must(t, err)
		if _, err := tm.CommitHold(want); !errors.Is(err, ErrChanged) {
			t.Fatalf("edited before the re-stat: %v", err)
		}
		if got := read(t, abs); got != "edited" {
			t.Fatalf("clobbered: %q", got)
		}
	})
}

// RemoveHold: an append by a writer that opened the file before the removal is held;
// an edit before the re-stat is ErrChanged and nothing is removed.
func TestRemoveHold(t *testing.T) {
	eachSwap(t, func(t *testing.T) {
		base, tr := setup(t)
		abs := filepath.Join(base, "tree", "real", "f")
		want, err := tr.Stamp("real/f")
		must(t, err)
		var w *os.File
		hookBeforeSwap = func(string) {
			w, err = os.OpenFile(abs, os.O_APPEND|os.O_WRONLY, 0)
			must(t, err)
		}
		d, err := tr.RemoveHold("real/f", want)
		must(t, err)
		defer d.Close()
		if _, err := os.Lstat(abs); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("not removed: %v", err)
		}
		_, _ = w.WriteString("+late")
		w.Close()
		b, err := d.ReadAll()
		must(t, err)
		if string(b) != "f+late" {
			t.Fatalf("held %q", b)
		}
		noTemps(t, filepath.Dir(abs))
		hookBeforeSwap = nil
		must(t, os.WriteFile(abs, []byte("f"), 0o644))
		want, _ = tr.Stamp("real/f")
		must(t, os.WriteFile(abs, []byte("edited"), 0o644))
		if _, err := tr.RemoveHold("real/f", want); !errors.Is(err, ErrChanged) {
			t.Fatalf("edited before the re-stat: %v", err)
		}
		if got := read(t, abs); got != "edited" {
			t.Fatalf("removed: %q", got)
		}
	})
}

// A symlink replaced is held as its target.
func TestCommitHoldSymlink(t *testing.T) {
	_, tr := setup(t)
	want, err := tr.Stamp("dangling")
	must(t, err)
	tm, err := tr.CreateTemp("dangling", 0o644)
	must(t, err)
	d, err := tm.CommitHold(want)
	must(t, err)
	if l, ok := d.Link(); !ok || l != "nowhere" || d.Regular() {
		t.Fatalf("held link %q %v", l, ok)
	}
	if b, _ := d.ReadAll(); string(b) != "nowhere" {
		t.Fatalf("ReadAll of a link: %q", b)
	}
}

// BenchmarkReplace is the price of holding the replaced version: one replacement of a
// small file by CommitIf (re-stat, rename) and by CommitHold (re-stat, exchange, open
// and unlink of what was displaced, fstat), temp file creation and fsync included.
func BenchmarkReplace(b *testing.B) {
	for _, hold := range []bool{false, true} {
		name := "CommitIf"
		if hold {
			name = "CommitHold"
		}
		b.Run(name, func(b *testing.B) {
			_, tr := setup(b)
			must(b, tr.WriteFileAtomic("real/x", []byte("v"), 0o644))
			for b.Loop() {
				want, err := tr.Stamp("real/x")
				must(b, err)
				tm, err := tr.CreateTemp("real/x", 0o644)
				must(b, err)
				_, _ = tm.Write([]byte("v"))
				if hold {
					d, err := tm.CommitHold(want)
					must(b, err)
					d.Close()
				} else {
					must(b, tm.CommitIf(want))
				}
			}
		})
	}
}
