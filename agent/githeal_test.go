package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepair"
)

// healRepo is a memory repo with memories pushed to a bare remote and one written since
// (committed by memd later): the repo a damage case starts from.
func healRepo(t *testing.T) (dir, remote string) {
	t.Helper()
	dir = newRepo(t)
	remote = filepath.Join(t.TempDir(), "r.git")
	testutil.RunGit(t, dir, "init", "-q", "--bare", "-b", "main", remote)
	testutil.RunGit(t, dir, "remote", "add", "origin", remote)
	for _, n := range []string{"a", "b", "c"} {
		testutil.WriteFile(t, dir, "areas/before/"+n+".html", "before "+n+"\n")
		testutil.RunGit(t, dir, "add", "-A")
		testutil.RunGit(t, dir, "commit", "-q", "-m", "before "+n)
	}
	testutil.RunGit(t, dir, "push", "-q", "origin", "main")
	return dir, remote
}

func loosePath(t *testing.T, dir, rev string) string {
	id := strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", rev))
	return filepath.Join(dir, ".git", "objects", id[:2], id[2:])
}

// tree is the work tree's files and contents, .git and memd's state aside, and memd's own
// temp files (safefs.IsTempName): a write in flight when the snapshot is taken, never a
// file of the tree.
func workTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() && d.Name() != memd.DefaultLockFile && !safefs.IsTempName(d.Name()) {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			m[rel] = string(b)
		}
		return nil
	})
	return m
}

// Each damage a crash of git or of the machine leaves is healed by memd run: every memory
// written before and after is on the remote at the end, git fsck --full is clean, and the
// repair changed nothing in the work tree.
func TestRunHealsDamagedGitDir(t *testing.T) {
	for _, c := range damageCases() {
		t.Run(c.name, func(t *testing.T) {
			isolateGit(t)
			dir, remote := healRepo(t)
			// A memory written while memd was down, not yet committed.
			testutil.WriteFile(t, dir, "areas/before/offline.html", "offline\n")
			// The last run did not stop cleanly: the deep look runs at start.
			must(t, statusline.Write(memd.StateDir(dir), statusline.Compose(statusline.Facts{Now: time.Now(), Repo: dir})))
			c.damage(t, dir)
			before := workTree(t, dir)
			cfg := memd.DefaultConfig()
			cfg.Repo = dir
			cfg.Watch.Quiet = memd.Duration(50 * time.Millisecond)
			cfg.Watch.MaxDelay = memd.Duration(500 * time.Millisecond)
			cfg.Sleep.CatchUp = false
			a, logs, stop := startAgent(t, cfg)
			if got := workTree(t, dir); len(got) != len(before) {
				t.Fatalf("work tree changed by the repair: %v → %v", before, got)
			}
			testutil.WriteFile(t, dir, "areas/after/new.html", "after\n")
			onRemote := func(rel string) bool {
				_, err := hostGit.Run(remote, nil, "cat-file", "-e", "main:"+rel)
				return err == nil
			}
			testutil.WaitFor(t, "every memory on the remote", 30*time.Second, func() bool {
				a.KickSync()
				return onRemote("areas/before/a.html") && onRemote("areas/before/c.html") &&
					onRemote("areas/before/offline.html") && onRemote("areas/after/new.html")
			}, logs.String)
			stop()
			if out, err := hostGit.Run(dir, nil, "fsck", "--full", "--no-dangling"); err != nil {
				t.Fatalf("fsck after repair: %v\n%s\n%s", err, out, logs.String())
			}
			if out, err := hostGit.Run(dir, nil, "status", "--porcelain"); err != nil || out != "" {
				t.Fatalf("git status after repair: %q %v", out, err)
			}
			if !strings.Contains(logs.String(), "git repair: ") {
				t.Fatalf("no repair logged\n%s", logs.String())
			}
			doc, err := statusline.Read(memd.StateDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range doc.Events {
				found = found || strings.HasPrefix(e.Text, "git repaired:")
			}
			if !found {
				t.Fatalf("no repair event: %+v", doc.Events)
			}
		})
	}
}

// A commit only this machine had, gone (its object lost, the remote never got it): memd does
// not start, the status document says state error with the one line of what is lost and
// what is kept, and the work tree is as it was.
func TestRunStopsOnLostLocalCommit(t *testing.T) {
	isolateGit(t)
	dir, _ := healRepo(t)
	testutil.WriteFile(t, dir, "areas/local.html", "local\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "local only")
	must(t, os.Remove(loosePath(t, dir, "HEAD")))
	before := workTree(t, dir)
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	_, err := New(Options{Config: cfg, Version: "test"})
	if !errors.Is(err, gitrepair.ErrLost) {
		t.Fatalf("New: %v, want ErrLost", err)
	}
	doc, rerr := statusline.Read(memd.StateDir(dir))
	if rerr != nil {
		t.Fatal(rerr)
	}
	if doc.State != statusline.StateError || !strings.Contains(doc.Error, "lost: ") || !strings.Contains(doc.Error, "kept: the work tree") {
		t.Fatalf("status: %s %q", doc.State, doc.Error)
	}
	if got := workTree(t, dir); len(got) != len(before) || got["areas/local.html"] != "local\n" {
		t.Fatal("work tree changed")
	}
	// A restart meets the same loss, never an unborn branch it would commit anew.
	if _, err := New(Options{Config: cfg, Version: "test"}); !errors.Is(err, gitrepair.ErrLost) {
		t.Fatalf("second start: %v, want ErrLost", err)
	}
}

// Damage met while memd runs (trees a commit must read, gone; the start-up look, a shallow
// one after a clean stop, does not see a missing object): the failing job asks for the deep
// repair, and the memories go on reaching the remote.
func TestRunHealsDamageMetDuringWork(t *testing.T) {
	isolateGit(t)
	dir, remote := healRepo(t)
	testutil.WriteFile(t, dir, "projects/p/x.html", "x\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "by git")
	testutil.RunGit(t, dir, "push", "-q", "origin", "main")
	must(t, os.Remove(loosePath(t, dir, "HEAD:projects/p")))
	must(t, os.Remove(loosePath(t, dir, "HEAD:projects")))
	cfg := memd.DefaultConfig()
	cfg.Repo = dir
	cfg.Watch.Quiet = memd.Duration(50 * time.Millisecond)
	cfg.Watch.MaxDelay = memd.Duration(500 * time.Millisecond)
	cfg.Sleep.CatchUp = false
	a, logs, stop := startAgent(t, cfg)
	testutil.WriteFile(t, dir, "projects/p/y.html", "y\n")
	onRemote := func(rel string) bool {
		_, err := hostGit.Run(remote, nil, "cat-file", "-e", "main:"+rel)
		return err == nil
	}
	testutil.WaitFor(t, "y.html on the remote", 60*time.Second, func() bool {
		a.KickSync()
		return onRemote("projects/p/y.html") && onRemote("projects/p/x.html")
	}, logs.String)
	stop()
	if out, err := hostGit.Run(dir, nil, "fsck", "--full", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v\n%s\n%s", err, out, logs.String())
	}
	if !strings.Contains(logs.String(), "git repair: fetched") {
		t.Fatalf("no repair during work\n%s", logs.String())
	}
}

// What asks for the deep repair: a read of this repo that met damage, not the network's words.
func TestDamagedErrors(t *testing.T) {
	for msg, want := range map[string]bool{
		"commit 1 paths: read tree 7dcd: loose object 7dcd: zlib reading error: unexpected EOF": true,
		"read tree 7dcd: object not found":     true,
		"open index: bad index file signature": true,
		"fetch: unexpected EOF":                false,
		"push: rejected":                       false,
	} {
		if got := damaged(errors.New(msg)); got != want {
			t.Errorf("damaged(%q) = %v", msg, got)
		}
	}
	if damaged(fmt.Errorf("fetch: object not found: %w", gitremote.ErrOffline)) {
		t.Error("an offline error asked for a repair")
	}
}

// damageCase is one damage a crash of git or of the machine leaves.
type damageCase struct {
	name   string
	damage func(t *testing.T, dir string)
}

func damageCases() []damageCase {
	return []damageCase{
		{"empty loose tree", func(t *testing.T, dir string) { must(t, os.Truncate(loosePath(t, dir, "HEAD:areas"), 0)) }},
		{"truncated loose commit", func(t *testing.T, dir string) {
			p := loosePath(t, dir, "HEAD")
			st, _ := os.Stat(p)
			must(t, os.Truncate(p, st.Size()/2))
		}},
		{"deleted loose commit", func(t *testing.T, dir string) { must(t, os.Remove(loosePath(t, dir, "HEAD~1"))) }},
		{"truncated pack", func(t *testing.T, dir string) {
			testutil.RunGit(t, dir, "repack", "-a", "-d", "-q")
			packs, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/*.pack"))
			st, _ := os.Stat(packs[0])
			must(t, os.Truncate(packs[0], st.Size()/2))
		}},
		{"deleted pack", func(t *testing.T, dir string) {
			testutil.RunGit(t, dir, "repack", "-a", "-d", "-q")
			packs, _ := filepath.Glob(filepath.Join(dir, ".git/objects/pack/*"))
			for _, p := range packs {
				must(t, os.Remove(p))
			}
		}},
		{"corrupt index", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ".git/index")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x5a
			must(t, os.WriteFile(p, b, 0o644))
		}},
		{"empty HEAD", func(t *testing.T, dir string) { must(t, os.WriteFile(filepath.Join(dir, ".git/HEAD"), nil, 0o644)) }},
		{"ref pointing nowhere", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, ".git/refs/heads/main"), []byte(strings.Repeat("0f", 20)+"\n"), 0o644))
		}},
	}
}
