package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

// TestFilePushWritesTheRemote: a push to a bare file remote of this user's, with nothing
// receive-pack would act on, is written into it directly: one pack with every object the
// remote lacked and nothing outside the pushed history (checkPushed, with git's fsck on the
// remote), the branch moved, no lock or temp file left; git's own clone of the remote and B's
// sync then hold A's work.
func TestFilePushWritesTheRemote(t *testing.T) {
	w := pushWorld(t, "file", pushSeed)
	p := probePushes(w.a)
	packs := countPacks(w.bare)
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "from a\n")
	testutil.WriteFile(t, w.aDir, "projects/p/notes/n1.html", "n1 edited\n")
	mustCommit(t, w.a, "areas/from-a.html", "projects/p/notes/n1.html")
	if res := mustSync(t, w.a); !res.Pushed || res.PushAttempts != 1 {
		t.Fatalf("A: %+v", res)
	}
	if st := p.last(t); !st.Direct {
		t.Fatalf("push %+v: want it written into the remote directly", st)
	}
	checkPushed(t, w, p, 0)
	// Below transfer.unpackLimit, loose objects, as receive-pack's unpack-objects keeps them.
	if got := countPacks(w.bare); got != packs {
		t.Errorf("remote packs %d → %d: want the push's objects loose", packs, got)
	}
	for _, h := range p.last(t).Sent {
		if _, err := os.Stat(filepath.Join(w.bare, "objects", h.String()[:2], h.String()[2:])); err != nil {
			t.Errorf("sent object %s is not loose in the remote: %v", h, err)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(w.bare, "memd-lock-*"))
	if locks, _ := filepath.Glob(filepath.Join(w.bare, "refs", "heads", "*.lock")); len(locks)+len(leftovers) > 0 {
		t.Errorf("left in the remote: %v %v", locks, leftovers)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	testutil.RunGit(t, filepath.Dir(clone), "clone", "-q", w.bare, clone)
	if got := readWork(t, clone, "projects/p/notes/n1.html"); got != "n1 edited\n" {
		t.Errorf("git's clone of the remote: n1.html %q", got)
	}
	mustSync(t, w.b)
	w.check(t)
}

// TestFilePushDeclines: a remote where receive-pack has something of its own to do gets the
// push through receive-pack (a hook that runs proves it), and the push lands either way;
// a hook file that is not executable, which git does not run, does not stand in the way.
func TestFilePushDeclines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(t *testing.T, bare string)
		direct bool
	}{
		{"pre-receive hook", func(t *testing.T, bare string) {
			hook := filepath.Join(bare, "hooks", "pre-receive")
			testutil.WriteFile(t, filepath.Dir(hook), "pre-receive", "#!/bin/sh\ntouch \"$GIT_DIR/hook-ran\"\n")
			if err := os.Chmod(hook, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"hook not executable", func(t *testing.T, bare string) {
			testutil.WriteFile(t, filepath.Join(bare, "hooks"), "pre-receive", "#!/bin/sh\nexit 1\n")
		}, true},
		{"receive config", func(t *testing.T, bare string) {
			testutil.RunGit(t, bare, "config", "receive.denyDeletes", "true")
		}, false},
		{"reflog", func(t *testing.T, bare string) {
			testutil.RunGit(t, bare, "config", "core.logAllRefUpdates", "true")
		}, false},
		{"too many packs", func(t *testing.T, bare string) {
			testutil.RunGit(t, bare, "config", "gc.autoPackLimit", "1")
			testutil.RunGit(t, bare, "config", "gc.auto", "0")
			for countPacks(bare) <= 2 {
				testutil.RunGit(t, bare, "repack", "-q") // each a pack of the loose objects there
				if countPacks(bare) <= 2 {
					seed := t.TempDir()
					testutil.RunGit(t, seed, "init", "-q")
					testutil.WriteFile(t, seed, "x", seed)
					testutil.RunGit(t, seed, "add", "x")
					testutil.RunGit(t, seed, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "x")
					testutil.RunGit(t, seed, "push", "-q", bare, "HEAD:refs/heads/other-"+filepath.Base(seed))
				}
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := pushWorld(t, "file", pushSeed)
			tc.setup(t, w.bare)
			p := probePushes(w.a)
			testutil.WriteFile(t, w.aDir, "areas/from-a.html", "from a\n")
			mustCommit(t, w.a, "areas/from-a.html")
			if res := mustSync(t, w.a); !res.Pushed {
				t.Fatalf("A: %+v", res)
			}
			if st := p.last(t); st.Direct != tc.direct {
				t.Fatalf("push %+v: direct %v, want %v", st, st.Direct, tc.direct)
			}
			_, err := os.Stat(filepath.Join(w.bare, "hook-ran"))
			if hookRan := err == nil; hookRan != (tc.name == "pre-receive hook") {
				t.Errorf("the pre-receive hook ran: %v", hookRan)
			}
			checkPushed(t, w, p, 0)
			mustSync(t, w.b)
			w.check(t)
		})
	}
}

// TestFilePushLostRace: the remote branch moved between this round's look at it and the ref
// update (another machine's push), or its lock is held: the push is a lost race
// (ErrPushRejected) and the remote keeps the other push's head. A lock left long ago goes to
// git, which says so. The next sync lands.
func TestFilePushLostRace(t *testing.T) {
	w := pushWorld(t, "file", pushSeed)
	mustSync(t, w.b)
	expect := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")))
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "from a\n")
	local := plumbing.NewHash(mustCommit(t, w.a, "areas/from-a.html").Hash)
	testutil.WriteFile(t, w.bDir, "areas/from-b.html", "from b\n")
	mustCommit(t, w.b, "areas/from-b.html")
	mustSync(t, w.b)
	moved := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))

	push := func() error {
		w.a.mu.Lock()
		defer w.a.mu.Unlock()
		return w.a.pushToFileRemoteLocked(context.Background(), w.bare, expect, local)
	}
	if err := push(); !errors.Is(err, gitremote.ErrPushRejected) {
		t.Fatalf("push over a moved branch: %v, want ErrPushRejected", err)
	}
	if got := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")); got != moved {
		t.Fatalf("remote main %s, want B's %s", got, moved)
	}

	// The branch where the push expects it, its lock held: by another push now, or long ago.
	expect = plumbing.NewHash(moved)
	testutil.RunGit(t, w.aDir, "fetch", "-q", "origin")
	w.a.WaitIndexRefresh() // memd's commit left the index to the refresher: git merges from it
	testutil.RunGit(t, w.aDir, "merge", "-q", "--no-edit", "origin/main")
	local = plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD")))
	lock := filepath.Join(w.bare, "refs", "heads", "main.lock")
	testutil.WriteFile(t, filepath.Dir(lock), "main.lock", "")
	if err := push(); !errors.Is(err, gitremote.ErrPushRejected) {
		t.Fatalf("push with the lock held: %v, want ErrPushRejected", err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(lock, old, old); err != nil {
		t.Fatal(err)
	}
	if err := push(); !errors.Is(err, errPushDeclined) {
		t.Fatalf("push with a stale lock: %v, want it left to git", err)
	}
	if got := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")); got != moved {
		t.Fatalf("remote main %s, want B's %s", got, moved)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if res := mustSync(t, w.a); !res.Pushed {
		t.Fatalf("A: %+v", res)
	}
	mustSync(t, w.b)
	w.check(t)
}

// TestFilePushRunsGC: past the remote's gc.autoPackLimit a direct push runs `git gc --auto`
// there, as receive-pack would, so what pushes write does not pile up.
func TestFilePushRunsGC(t *testing.T) {
	w := pushWorld(t, "file", pushSeed)
	for i := 0; countPacks(w.bare) < 2; i++ {
		if i == 5 {
			t.Fatalf("%d packs in the remote after %d pushes and repacks", countPacks(w.bare), i)
		}
		testutil.WriteFile(t, w.bDir, "areas/from-b.html", fmt.Sprintf("b %d\n", i))
		mustCommit(t, w.b, "areas/from-b.html")
		mustSync(t, w.b)
		testutil.RunGit(t, w.bare, "repack", "-q") // the loose objects there, a pack
	}
	testutil.RunGit(t, w.bare, "config", "gc.autoPackLimit", "1")
	testutil.RunGit(t, w.bare, "config", "gc.autoDetach", "false") // one process to wait for
	p := probePushes(w.a)
	testutil.WriteFile(t, w.aDir, "areas/from-a.html", "a\n")
	mustCommit(t, w.a, "areas/from-a.html")
	mustSync(t, w.a)
	if st := p.last(t); !st.Direct {
		t.Fatalf("push %+v, want it direct", st)
	}
	// gc runs on after the push: done when its pid file is gone and one pack is left.
	var loose string
	if !testutil.Poll(time.Minute, func() bool {
		_, err := os.Stat(filepath.Join(w.bare, "gc.pid"))
		loose = testutil.RunGit(t, w.bare, "count-objects")
		return os.IsNotExist(err) && countPacks(w.bare) == 1 && strings.HasPrefix(loose, "0 objects")
	}) {
		t.Fatalf("remote after the push: %d packs, %s; want gc's one pack", countPacks(w.bare), loose)
	}
	mustSync(t, w.b)
	w.check(t)
}
