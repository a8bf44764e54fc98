package gitrepair

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// fixture is a work repo with history pushed to a bare remote.
type fixture struct {
	t                testing.TB
	work, remote, gd string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{t: t, work: filepath.Join(base, "w"), remote: filepath.Join(base, "r.git")}
	f.gd = filepath.Join(f.work, ".git")
	testutil.RunGit(t, base, "init", "-q", "--bare", "-b", "main", f.remote)
	testutil.RunGit(t, base, "init", "-q", "-b", "main", f.work)
	for i, c := range []string{"one", "two", "three"} {
		testutil.WriteFile(t, f.work, "projects/"+c+".md", "# "+c+"\n")
		testutil.WriteFile(t, f.work, "areas/notes.md", strings.Repeat("note\n", i+1))
		f.git("add", "-A")
		f.git("commit", "-q", "-m", c)
	}
	f.git("remote", "add", "origin", f.remote)
	f.git("push", "-q", "origin", "main")
	return f
}

func (f *fixture) git(args ...string) string {
	f.t.Helper()
	return strings.TrimSpace(testutil.RunGit(f.t, f.work, args...))
}

func (f *fixture) opts() Options {
	return Options{GitDir: f.gd, WorkDir: f.work, Branch: "main", Remote: "origin", Deep: true}
}

// loose is the loose file of the object rev names.
func (f *fixture) loose(rev string) string {
	id := f.git("rev-parse", rev)
	return filepath.Join(f.gd, "objects", id[:2], id[2:])
}

// tree is the work tree's files and their contents, .git aside.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// heal diagnoses, repairs, and checks the repo is whole, the work tree untouched and the
// problem kinds found.
func (f *fixture) heal(want ...Kind) Report {
	f.t.Helper()
	before := tree(f.t, f.work)
	ps, err := Diagnose(context.Background(), f.opts())
	if err != nil {
		f.t.Fatalf("diagnose: %v", err)
	}
	kinds := map[Kind]bool{}
	for _, p := range ps {
		kinds[p.Kind] = true
	}
	for _, k := range want {
		if !kinds[k] {
			f.t.Fatalf("diagnose found %v, want a %s problem", ps, k)
		}
	}
	rep, err := Repair(context.Background(), f.opts(), ps)
	if err != nil {
		f.t.Fatalf("repair %v: %v (done %v)", ps, err, rep.Done)
	}
	f.git("fsck", "--full", "--strict")
	if ps, err := Diagnose(context.Background(), f.opts()); err != nil || len(ps) != 0 {
		f.t.Fatalf("after repair: %v %v", ps, err)
	}
	after := tree(f.t, f.work)
	if len(before) != len(after) {
		f.t.Fatalf("work tree changed: %v → %v", before, after)
	}
	for k, v := range before {
		if after[k] != v {
			f.t.Fatalf("work tree %s changed", k)
		}
	}
	if st := f.git("status", "--porcelain"); st != "" {
		f.t.Fatalf("git status after repair: %q", st)
	}
	return rep
}

func TestEmptyLooseTreeFetchedFromRemote(t *testing.T) {
	f := newFixture(t)
	if err := os.Truncate(f.loose("HEAD:projects"), 0); err != nil {
		t.Fatal(err)
	}
	rep := f.heal(KindObject)
	if rep.Quarantine == "" {
		t.Fatal("no quarantine")
	}
	if _, err := os.Stat(filepath.Join(rep.Quarantine, "objects")); err != nil {
		t.Fatalf("the bad file is not kept: %v", err)
	}
}

func TestTruncatedLooseBlobRebuiltFromWorkTree(t *testing.T) {
	f := newFixture(t)
	// A blob the remote never had: only the work tree can give it back.
	testutil.WriteFile(t, f.work, "areas/local.md", strings.Repeat("local only\n", 200))
	f.git("add", "areas/local.md")
	f.git("commit", "-q", "-m", "local")
	p := f.loose(":areas/local.md")
	st, _ := os.Stat(p)
	if err := os.Truncate(p, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	rep := f.heal(KindObject)
	if !strings.Contains(strings.Join(rep.Done, "\n"), "from the work tree") {
		t.Fatalf("not rebuilt from the work tree: %v", rep.Done)
	}
}

func TestDeletedCommitFetched(t *testing.T) {
	f := newFixture(t)
	if err := os.Remove(f.loose("HEAD~1")); err != nil {
		t.Fatal(err)
	}
	f.heal(KindMissing)
}

func TestCorruptPackFetched(t *testing.T) {
	f := newFixture(t)
	f.git("repack", "-a", "-d", "-q")
	packs, _ := filepath.Glob(filepath.Join(f.gd, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	st, _ := os.Stat(packs[0])
	if err := os.Truncate(packs[0], st.Size()-30); err != nil {
		t.Fatal(err)
	}
	f.heal(KindPack)
}

func TestCorruptIndexRebuilt(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.gd, "index")
	b, _ := os.ReadFile(p)
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f.heal(KindIndex)
}

func TestEmptyHEADRewritten(t *testing.T) {
	f := newFixture(t)
	if err := os.WriteFile(filepath.Join(f.gd, "HEAD"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.heal(KindHead)
}

func TestRefPointingNowhereRepointedFromReflog(t *testing.T) {
	f := newFixture(t)
	head := f.git("rev-parse", "HEAD")
	if err := os.WriteFile(filepath.Join(f.gd, "refs/heads/main"), []byte(strings.Repeat("ab", 20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.heal(KindRef)
	if got := f.git("rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD %s, want %s", got, head)
	}
}

func TestEmptyRefAndMissingCommitFetched(t *testing.T) {
	f := newFixture(t)
	head := f.git("rev-parse", "HEAD")
	if err := os.Remove(f.loose("HEAD")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.gd, "refs/heads/main"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.heal(KindRef)
	if got := f.git("rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD %s, want %s", got, head)
	}
}

func TestLocalOnlyCommitGoneIsLost(t *testing.T) {
	f := newFixture(t)
	testutil.WriteFile(t, f.work, "areas/later.md", "later\n")
	f.git("add", "-A")
	f.git("commit", "-q", "-m", "local only")
	head := f.git("rev-parse", "HEAD")
	if err := os.Remove(f.loose("HEAD")); err != nil {
		t.Fatal(err)
	}
	before := tree(t, f.work)
	ps, err := Diagnose(context.Background(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	_, err = Repair(context.Background(), f.opts(), ps)
	if !errors.Is(err, ErrLost) || !strings.Contains(err.Error(), "kept: the work tree") {
		t.Fatalf("repair of a gone local commit: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(f.gd, "refs/heads/main")); err != nil || strings.TrimSpace(string(b)) != head {
		t.Fatalf("the ref is not as it was: %q %v", b, err)
	}
	if got := tree(t, f.work); len(got) != len(before) || got["areas/later.md"] != "later\n" {
		t.Fatal("work tree changed")
	}
}

func TestStaleLockRemoved(t *testing.T) {
	f := newFixture(t)
	p := filepath.Join(f.gd, "HEAD.lock")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := f.opts()
	then := time.Now().Add(-time.Minute)
	if err := os.Chtimes(p, then, then); err != nil {
		t.Fatal(err)
	}
	ps, _ := Diagnose(context.Background(), old)
	if len(ps) != 1 || ps[0].Kind != KindLock {
		t.Fatalf("diagnose %v", ps)
	}
	if _, err := Repair(context.Background(), old, ps); err != nil {
		t.Fatal(err)
	}
}

// The shallow look (every start after a clean stop) finds an empty object by its size alone;
// a truncated one needs the deep look, which reads it whole.
func TestShallowFindsEmptyDeepFindsTruncated(t *testing.T) {
	f := newFixture(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Truncate(f.loose("HEAD:projects"), 0))
	p := f.loose("HEAD:areas/notes.md")
	st, _ := os.Stat(p)
	must(os.Truncate(p, st.Size()-4))
	o := f.opts()
	o.Deep = false
	ps, err := Diagnose(context.Background(), o)
	must(err)
	if len(ps) != 1 || ps[0].Detail != "empty" {
		t.Fatalf("shallow: %v", ps)
	}
	ps, err = Diagnose(context.Background(), f.opts())
	must(err)
	if len(ps) != 2 {
		t.Fatalf("deep: %v", ps)
	}
}

// Layouts git makes: a linked worktree (its HEAD and index its own, objects and refs in the
// common dir) and a clone sharing objects through alternates are whole as they are, and a
// linked worktree's damage is healed where it lives.
func TestLayouts(t *testing.T) {
	f := newFixture(t)
	wt := filepath.Join(filepath.Dir(f.work), "wt2")
	f.git("worktree", "add", "-q", "-b", "side", wt)
	wo := Options{GitDir: filepath.Join(f.gd, "worktrees", "wt2"), WorkDir: wt, Branch: "side", Remote: "origin", Deep: true}
	if ps, err := Diagnose(context.Background(), wo); err != nil || len(ps) != 0 {
		t.Fatalf("linked worktree: %v %v", ps, err)
	}
	shared := filepath.Join(filepath.Dir(f.work), "shared")
	testutil.RunGit(t, filepath.Dir(f.work), "clone", "-q", "--shared", f.work, shared)
	so := Options{GitDir: filepath.Join(shared, ".git"), WorkDir: shared, Remote: "origin", Deep: true}
	if ps, err := Diagnose(context.Background(), so); err != nil || len(ps) != 0 {
		t.Fatalf("clone --shared: %v %v", ps, err)
	}
	// Damage seen from the linked worktree: an object of the common dir, its own index.
	if err := os.Truncate(f.loose("HEAD:projects"), 0); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(wo.GitDir, "index")
	b, _ := os.ReadFile(idx)
	b[len(b)-3] ^= 1
	if err := os.WriteFile(idx, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := Diagnose(context.Background(), wo)
	if err != nil || len(ps) != 2 {
		t.Fatalf("linked worktree damage: %v %v", ps, err)
	}
	if _, err := Repair(context.Background(), wo, ps); err != nil {
		t.Fatal(err)
	}
	f.git("fsck", "--full", "--strict")
	if st := testutil.RunGit(t, wt, "status", "--porcelain"); st != "" {
		t.Fatalf("worktree status: %q", st)
	}
}

// The remote out of reach: the damage stays (ErrNotHealed, not ErrLost: nothing is lost),
// and a later repair with the remote back heals it.
func TestRemoteAwayNotHealedYet(t *testing.T) {
	f := newFixture(t)
	if err := os.Remove(f.loose("HEAD~1")); err != nil {
		t.Fatal(err)
	}
	away := f.remote + ".away"
	if err := os.Rename(f.remote, away); err != nil {
		t.Fatal(err)
	}
	ps, err := Diagnose(context.Background(), f.opts())
	if err != nil || len(ps) == 0 {
		t.Fatalf("diagnose: %v %v", ps, err)
	}
	if _, err := Repair(context.Background(), f.opts(), ps); !errors.Is(err, ErrNotHealed) || errors.Is(err, ErrLost) {
		t.Fatalf("repair with the remote away: %v", err)
	}
	if err := os.Rename(away, f.remote); err != nil {
		t.Fatal(err)
	}
	f.heal(KindMissing)
}

// A folder that is no repo is not one to heal: nothing found, nothing written.
func TestNotARepo(t *testing.T) {
	dir := t.TempDir()
	ps, err := Diagnose(context.Background(), Options{GitDir: filepath.Join(dir, ".git"), WorkDir: dir, Deep: true})
	if err != nil || len(ps) != 0 {
		t.Fatalf("%v %v", ps, err)
	}
	if _, err := os.Stat(filepath.Join(dir, ".git")); err == nil {
		t.Fatal(".git made")
	}
}

// The look at every open checks a pack's idx by its shape, not its hash (an idx grows with
// the history): a truncated idx, or one whose fan-out goes down, is found and healed; a
// flipped byte among the names is found by the deep look, which hashes it.
func TestCorruptIdxFound(t *testing.T) {
	for _, c := range []struct {
		name  string
		deep  bool
		spoil func(b []byte) []byte
	}{
		{"truncated", false, func(b []byte) []byte { return append(b[:len(b)-41], b[len(b)-40:]...) }},
		{"fan-out goes down", false, func(b []byte) []byte { binary.BigEndian.PutUint32(b[8+4*100:], 1<<30); return b }},
		{"a name flipped, deep", true, func(b []byte) []byte { b[8+256*4+5] ^= 0xff; return b }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.git("repack", "-a", "-d", "-q")
			idxs, _ := filepath.Glob(filepath.Join(f.gd, "objects", "pack", "*.idx"))
			if len(idxs) != 1 {
				t.Fatalf("idx files %v", idxs)
			}
			b, err := os.ReadFile(idxs[0])
			if err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(idxs[0], 0o644)
			if err := os.WriteFile(idxs[0], c.spoil(b), 0o644); err != nil {
				t.Fatal(err)
			}
			o := f.opts()
			o.Deep = c.deep
			ps, err := Diagnose(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) == 0 || ps[0].Kind != KindPack {
				t.Fatalf("diagnose (deep %v) found %v, want the pack", c.deep, ps)
			}
			if !c.deep {
				f.heal(KindPack)
			}
		})
	}
}
