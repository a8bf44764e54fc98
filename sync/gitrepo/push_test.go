package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"

	"github.com/memd-dev/memd/sync/gitremote"
)

// pushProbe records the enumeration statistics of every push a Repo makes.
type pushProbe struct{ stats []gitremote.PushStats }

func probePushes(r *Repo) *pushProbe {
	p := &pushProbe{}
	// Called under r.mu from Sync, which the test drives synchronously.
	r.testPushStats = func(s gitremote.PushStats) { p.stats = append(p.stats, s) }
	return p
}

func (p *pushProbe) last(t *testing.T) gitremote.PushStats {
	t.Helper()
	if len(p.stats) == 0 {
		t.Fatal("no push was made")
	}
	return p.stats[len(p.stats)-1]
}

// reachable is `git rev-list --objects rev` in dir as a set.
func reachable(t testing.TB, dir, rev string) map[string]bool {
	t.Helper()
	m := map[string]bool{}
	for _, line := range strings.Split(testutil.RunGit(t, dir, "rev-list", "--objects", rev), "\n") {
		if h, _, _ := strings.Cut(line, " "); h != "" {
			m[h] = true
		}
	}
	return m
}

// checkPushed asserts the last push of A went through memd's enumeration,
// landed (remote head = A's head, fsck clean on the remote), sent every
// object the remote lacked (per git on the remote afterwards), sent nothing
// outside the pushed history, and at most maxExtra objects the remote
// already had.
func checkPushed(t *testing.T, w *syncWorld, p *pushProbe, maxExtra int) {
	t.Helper()
	st := p.last(t)
	if st.Fallback != "" {
		t.Fatalf("push fell back to go-git: %s", st.Fallback)
	}
	ha := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD"))
	hr := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	if ha != hr || st.New.String() != hr {
		t.Fatalf("remote main %s, A HEAD %s, pushed %s", hr, ha, st.New)
	}
	fsck(t, w.bare)
	newSet := reachable(t, w.bare, st.New.String())
	oldSet := reachable(t, w.bare, st.Old.String())
	sent := map[string]bool{}
	for _, h := range st.Sent {
		sent[h.String()] = true
	}
	if len(sent) != len(st.Sent) {
		t.Errorf("pack lists %d objects, %d distinct", len(st.Sent), len(sent))
	}
	missing := 0
	for h := range newSet {
		if !oldSet[h] {
			missing++
			if !sent[h] {
				t.Errorf("object %s was missing on the remote and not sent", h)
			}
		}
	}
	extra := 0
	for h := range sent {
		if !newSet[h] {
			t.Errorf("sent %s, not reachable from the pushed head", h)
		}
		if oldSet[h] {
			extra++
			t.Logf("sent %s the remote had: %s", h, testutil.RunGit(t, w.bare, "cat-file", "-t", h))
		}
	}
	if extra > maxExtra {
		t.Errorf("sent %d objects the remote had (want ≤ %d); %d sent, %d missing", extra, maxExtra, len(sent), missing)
	}
	if st.Objects != len(st.Sent) || st.NewCommits == 0 {
		t.Errorf("stats inconsistent: %+v", st)
	}
}

var pushSeed = map[string]string{
	"areas/a.html":               "a\n",
	"areas/b.html":               "b, to be archived\n",
	"projects/p/MEMORY.md":       "# p\n",
	"projects/p/notes/n1.html":   "n1\n",
	"projects/p/notes/n2.html":   "n2\n",
	"resources/r.html":           "r\n",
	"resources/deep/x/keep.html": "keep\n",
}

// pushWorld is a syncWorld whose A pushes through the given transport:
// "file" (a local path: git-receive-pack run by go-git's file transport)
// or "http" (git http-backend). Either way the receiver is real git
// receive-pack, which refuses a pack with missing objects.
func pushWorld(t *testing.T, transport string, files map[string]string) *syncWorld {
	t.Helper()
	if transport == "http" {
		_, w := newHTTPWorld(t, "", files)
		return w
	}
	return newSyncWorld(t, files)
}

func TestPushSendsWhatIsNew(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, w *syncWorld, p *pushProbe)
	}{
		{"linear", func(t *testing.T, w *syncWorld, p *pushProbe) {
			testutil.WriteFile(t, w.aDir, "areas/a.html", "a edited\n")
			mustCommit(t, w.a, "areas/a.html")
			testutil.WriteFile(t, w.aDir, "projects/q/new.html", "q\n")
			mustCommit(t, w.a, "projects/q/new.html")
			testutil.WriteFile(t, w.aDir, "projects/p/notes/n1.html", "n1 edited\n")
			mustCommit(t, w.a, "projects/p/notes/n1.html")
			testutil.WriteFile(t, w.aDir, "resources/deep/x/y.html", "y\n")
			mustCommit(t, w.a, "resources/deep/x/y.html")
			mustSync(t, w.a)
			checkPushed(t, w, p, 0)
			if st := p.last(t); st.NewCommits != 4 {
				t.Errorf("new commits %d, want 4", st.NewCommits)
			}
		}},
		{"merge then local work", func(t *testing.T, w *syncWorld, p *pushProbe) {
			testutil.WriteFile(t, w.bDir, "areas/from-b.html", "b\n")
			mustCommit(t, w.b, "areas/from-b.html")
			mustSync(t, w.b)
			testutil.WriteFile(t, w.bDir, "resources/r.html", "r by b\n")
			mustCommit(t, w.b, "resources/r.html")
			mustSync(t, w.b)
			testutil.WriteFile(t, w.aDir, "areas/from-a.html", "from a\n")
			mustCommit(t, w.a, "areas/from-a.html")
			if res := mustSync(t, w.a); !res.Merged || !res.Pushed {
				t.Fatalf("A: %+v", res)
			}
			checkPushed(t, w, p, 0)
			if st := p.last(t); st.NewCommits != 2 {
				t.Errorf("new commits %d, want 2 (A's and the merge)", st.NewCommits)
			}
			testutil.WriteFile(t, w.aDir, "areas/from-b.html", "b, edited by a\n")
			testutil.WriteFile(t, w.aDir, "projects/p/MEMORY.md", "# p\n- more\n")
			mustCommit(t, w.a, "areas/from-b.html", "projects/p/MEMORY.md")
			mustSync(t, w.a)
			checkPushed(t, w, p, 0)
			w.syncAll(t)
			w.check(t)
		}},
		{"move", func(t *testing.T, w *syncWorld, p *pushProbe) {
			renameFile(t, w.aDir, "areas/b.html", "archive/b.html")
			mustCommit(t, w.a, "areas/b.html", "archive/b.html")
			mustSync(t, w.a)
			// The blob is on the remote at its old path; comparing by path
			// sends it again, and that is the only extra.
			checkPushed(t, w, p, 1)
		}},
		{"deletions", func(t *testing.T, w *syncWorld, p *pushProbe) {
			removeFile(t, w.aDir, "projects/p/notes/n1.html")
			removeFile(t, w.aDir, "resources/r.html")
			removeFile(t, w.aDir, "resources/deep/x/keep.html")
			mustCommit(t, w.a, "projects/p/notes/n1.html", "resources/r.html", "resources/deep/x/keep.html")
			mustSync(t, w.a)
			checkPushed(t, w, p, 0)
		}},
		{"subtree deleted and recreated", func(t *testing.T, w *syncWorld, p *pushProbe) {
			gone := []string{"projects/p/MEMORY.md", "projects/p/notes/n1.html", "projects/p/notes/n2.html"}
			for _, f := range gone {
				removeFile(t, w.aDir, f)
			}
			mustCommit(t, w.a, gone...)
			testutil.WriteFile(t, w.aDir, "projects/p/MEMORY.md", "# p\n")
			testutil.WriteFile(t, w.aDir, "projects/p/notes/n1.html", "n1\n")
			testutil.WriteFile(t, w.aDir, "projects/p/notes/n2.html", "n2 rewritten\n")
			mustCommit(t, w.a, gone...)
			// and once more exactly as on the remote: the whole tree is
			// the boundary's.
			testutil.WriteFile(t, w.aDir, "projects/p/notes/n2.html", "n2\n")
			mustCommit(t, w.a, "projects/p/notes/n2.html")
			mustSync(t, w.a)
			checkPushed(t, w, p, 0)
			if st := p.last(t); st.NewCommits != 3 {
				t.Errorf("new commits %d, want 3", st.NewCommits)
			}
		}},
		{"clock skew", func(t *testing.T, w *syncWorld, _ *pushProbe) {
			// B's clock is years ahead, A's runs backwards years behind.
			var nb, na atomic.Int64
			ob := hostOptions("hostb")
			ob.Now = func() time.Time {
				return time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(nb.Add(1)) * time.Minute)
			}
			oa := hostOptions("hosta")
			oa.Now = func() time.Time {
				return time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(na.Add(1)) * time.Hour)
			}
			b := openTest(t, w.bDir, ob)
			a := openTest(t, w.aDir, oa)
			p := probePushes(a)
			testutil.WriteFile(t, w.bDir, "areas/future.html", "f\n")
			mustCommit(t, b, "areas/future.html")
			mustSync(t, b)
			testutil.WriteFile(t, w.aDir, "areas/past1.html", "p1\n")
			mustCommit(t, a, "areas/past1.html")
			testutil.WriteFile(t, w.aDir, "projects/p/notes/n1.html", "n1 from the past\n")
			mustCommit(t, a, "projects/p/notes/n1.html")
			if res := mustSync(t, a); !res.Merged || !res.Pushed {
				t.Fatalf("A: %+v", res)
			}
			checkPushed(t, w, p, 0)
			testutil.WriteFile(t, w.aDir, "areas/past2.html", "p2\n")
			mustCommit(t, a, "areas/past2.html")
			mustSync(t, a)
			checkPushed(t, w, p, 0)
			// B's future-dated side moves on; A, still behind, merges again.
			testutil.WriteFile(t, w.bDir, "resources/r.html", "r future\n")
			mustCommit(t, b, "resources/r.html")
			mustSync(t, b)
			testutil.WriteFile(t, w.aDir, "areas/past3.html", "p3\n")
			mustCommit(t, a, "areas/past3.html")
			mustSync(t, a)
			checkPushed(t, w, p, 0)
		}},
	}
	for _, tr := range []string{"file", "http"} {
		for _, c := range cases {
			t.Run(tr+"/"+c.name, func(t *testing.T) {
				w := pushWorld(t, tr, pushSeed)
				c.run(t, w, probePushes(w.a))
			})
		}
	}
}

func TestPushFirstToEmptyRemoteFallsBack(t *testing.T) {
	for _, tr := range []string{"file", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := pushWorld(t, tr, nil)
			p := probePushes(w.a)
			testutil.WriteFile(t, w.aDir, "areas/a.html", "a\n")
			mustCommit(t, w.a, "areas/a.html")
			if res := mustSync(t, w.a); !res.Pushed {
				t.Fatalf("A: %+v", res)
			}
			if st := p.last(t); st.Fallback != "remote branch absent" {
				t.Fatalf("first push: fallback %q, want go-git's push", st.Fallback)
			}
			fsck(t, w.bare)
			if got, want := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")),
				strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD")); got != want {
				t.Fatalf("remote main %s, A HEAD %s", got, want)
			}
			// The second push diffs against the first.
			testutil.WriteFile(t, w.aDir, "areas/b.html", "b\n")
			mustCommit(t, w.a, "areas/b.html")
			mustSync(t, w.a)
			checkPushed(t, w, p, 0)
		})
	}
}

// TestPushWalkLimitFallsBack: a walk longer than the push's walk limit hands the
// push to go-git, and it still lands.
func TestPushWalkLimitFallsBack(t *testing.T) {
	w := pushWorld(t, "file", pushSeed)
	w.a.testPushWalkLimit = 2
	p := probePushes(w.a)
	for i := 0; i < 4; i++ {
		testutil.WriteFile(t, w.aDir, "areas/a.html", fmt.Sprintf("a %d\n", i))
		mustCommit(t, w.a, "areas/a.html")
	}
	if res := mustSync(t, w.a); !res.Pushed {
		t.Fatalf("A: %+v", res)
	}
	if st := p.last(t); !strings.Contains(st.Fallback, "limit") {
		t.Fatalf("fallback %q, want the walk limit", st.Fallback)
	}
	fsck(t, w.bare)
	if got, want := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")),
		strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "HEAD")); got != want {
		t.Fatalf("remote main %s, A HEAD %s", got, want)
	}
}

// TestPushRemoteMovedIsRejectedThenRetried: a push to a remote head we
// have not fetched (it moved after our fetch) is refused without sending
// anything and without touching the remote; the next Sync fetches, merges
// and pushes through memd's enumeration.
func TestPushRemoteMovedIsRejectedThenRetried(t *testing.T) {
	for _, tr := range []string{"file", "http"} {
		t.Run(tr, func(t *testing.T) {
			w := pushWorld(t, tr, pushSeed)
			p := probePushes(w.a)
			testutil.WriteFile(t, w.aDir, "areas/from-a.html", "from a\n")
			local := plumbing.NewHash(mustCommit(t, w.a, "areas/from-a.html").Hash)
			testutil.WriteFile(t, w.bDir, "areas/from-b.html", "from b\n")
			mustCommit(t, w.b, "areas/from-b.html")
			mustSync(t, w.b)
			remoteBefore := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
			// What Sync does after its fetch, when B pushed in between.
			err := w.a.push(context.Background(), pushOpts().withDefaults(), local)
			if !errors.Is(err, gitremote.ErrPushRejected) {
				t.Fatalf("push over an unfetched remote head: %v, want ErrPushRejected", err)
			}
			if tr == "file" {
				// The remote's ref file already says it moved: receive-pack is not started.
				if !errors.Is(err, errRemoteMovedUnasked) || len(p.stats) != 0 {
					t.Fatalf("push to a file remote that moved: %v, %d sessions; want none", err, len(p.stats))
				}
			} else if st := p.last(t); !strings.Contains(err.Error(), "non-fast-forward") || !strings.Contains(st.Fallback, "rejected") || len(st.Sent) != 0 {
				t.Fatalf("push %v, stats %+v, want a non-fast-forward rejection that sent nothing", err, st)
			}
			if got := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")); got != remoteBefore {
				t.Fatalf("remote moved %s → %s on a rejected push", remoteBefore, got)
			}
			if res := mustSync(t, w.a); !res.Merged || !res.Pushed {
				t.Fatalf("A: %+v", res)
			}
			checkPushed(t, w, p, 0)
			mustSync(t, w.b)
			w.check(t)
		})
	}
}

// TestPushPackBuiltAhead: a push whose round fetched the remote head it finds sends a pack
// built before receive-pack started (gitremote.prebuildPack); over http, one whose tracking
// ref is older than the advertised head (a head it has) builds against the advertised head
// after all; a file remote, whose head is read first, is not pushed to then, and the next
// round's is. Both land complete (checkPushed: fsck on
// the remote, every missing object sent, nothing the remote had).
func TestPushPackBuiltAhead(t *testing.T) {
	for _, tr := range []string{"file", "http"} {
		t.Run(tr, func(t *testing.T) {
			directFilePushes = false // receive-pack's session is what this is about (filepush.go)
			defer func() { directFilePushes = true }()
			w := pushWorld(t, tr, pushSeed)
			p := probePushes(w.a)
			testutil.WriteFile(t, w.aDir, "areas/from-a.html", "from a\n")
			mustCommit(t, w.a, "areas/from-a.html")
			if res := mustSync(t, w.a); !res.Pushed {
				t.Fatalf("A: %+v", res)
			}
			if st := p.last(t); !st.Prebuilt {
				t.Fatalf("push after this round's fetch: %+v, want a pack built ahead", st)
			}
			checkPushed(t, w, p, 0)

			// The tracking ref left one commit behind the remote, whose head A has.
			track := w.a.trackingRef(pushOpts().withDefaults())
			stale := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main~1"))
			testutil.WriteFile(t, w.aDir, "areas/again.html", "again\n")
			local := plumbing.NewHash(mustCommit(t, w.a, "areas/again.html").Hash)
			if err := w.a.repo.Storer.SetReference(plumbing.NewHashReference(track, plumbing.NewHash(stale))); err != nil {
				t.Fatal(err)
			}
			err := w.a.push(context.Background(), pushOpts().withDefaults(), local)
			if tr == "file" {
				// A file remote's head is read first: not where the tracking ref says, so
				// not pushed; the next round fetches and pushes (one round more, no harm).
				if !errors.Is(err, errRemoteMovedUnasked) {
					t.Fatalf("push to a file remote with a stale tracking ref: %v, want it not made", err)
				}
				if res := mustSync(t, w.a); !res.Pushed || !p.last(t).Prebuilt {
					t.Fatalf("sync after: %+v, push %+v", res, p.last(t))
				}
			} else {
				if err != nil {
					t.Fatalf("push with a stale tracking ref: %v", err)
				}
				if st := p.last(t); st.Prebuilt || st.Fallback != "" {
					t.Fatalf("push with a stale tracking ref: %+v, want the pack built for the advertised head", st)
				}
			}
			checkPushed(t, w, p, 0)
			mustSync(t, w.b)
			w.check(t)
		})
	}
}

// TestPushObjectsNotFastForward: a remote head that is known locally but
// not an ancestor of the local head is refused before anything is sent.
func TestPushObjectsNotFastForward(t *testing.T) {
	dir := newGitDir(t)
	testutil.WriteFile(t, dir, "a.html", "a\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "base")
	testutil.RunGit(t, dir, "checkout", "-q", "-b", "other")
	testutil.WriteFile(t, dir, "b.html", "b\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "other")
	testutil.RunGit(t, dir, "checkout", "-q", "main")
	testutil.WriteFile(t, dir, "c.html", "c\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "mine")
	r := openTest(t, dir, testOptions())
	local := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "main")))
	other := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "other")))
	base := plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", "main~1")))
	r.mu.Lock()
	defer r.mu.Unlock()
	var st gitremote.PushStats
	if _, ff, err := gitremote.PushObjects(r.repo.Storer, local, other, 0, &st); err != nil || ff {
		t.Fatalf("diverged: ff %v err %v, want not a fast-forward", ff, err)
	}
	objs, ff, err := gitremote.PushObjects(r.repo.Storer, local, base, 0, &st)
	if err != nil || !ff {
		t.Fatalf("ancestor: ff %v err %v", ff, err)
	}
	// mine: the commit, its root tree, c.html's blob.
	if len(objs) != 3 {
		t.Errorf("sent %d objects, want 3: %v", len(objs), objs)
	}
}

// historyRemote makes a bare repo whose main has n commits (git
// fast-import), each rewriting one of 50 files in areas/d0..d4, and returns
// its path.
func historyRemote(t testing.TB, n int) string {
	t.Helper()
	bare := filepath.Join(t.TempDir(), fmt.Sprintf("hist%d.git", n))
	testutil.RunGit(t, filepath.Dir(bare), "init", "-q", "--bare", "-b", "main", bare)
	var in bytes.Buffer
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for i := 1; i <= n; i++ {
		msg := fmt.Sprintf("c%d\n", i)
		body := fmt.Sprintf("<p>version %d</p>\n", i)
		fmt.Fprintf(&in, "commit refs/heads/main\nmark :%d\ncommitter t <t@t> %d +0000\ndata %d\n%s", i, base+int64(i)*60, len(msg), msg)
		if i > 1 {
			fmt.Fprintf(&in, "from :%d\n", i-1)
		}
		j := i % 50
		fmt.Fprintf(&in, "M 100644 inline areas/d%d/f%02d.html\ndata %d\n%s\n", j/10, j, len(body), body)
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Env, cmd.Stdin = bare, testutil.GitEnv(), &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fast-import: %v\n%s", err, out)
	}
	return bare
}

// cloneHistory clones a historyRemote of n commits and opens the clone.
func cloneHistory(t testing.TB, n int) (*Repo, string, string) {
	t.Helper()
	bare := historyRemote(t, n)
	dir := filepath.Join(t.TempDir(), "clone")
	testutil.RunGit(t, filepath.Dir(dir), "clone", "-q", bare, dir)
	return openTest(t, dir, hostOptions("hosta")), dir, bare
}

// TestPushCostFlatInHistory: pushing one new commit visits the same few
// commits and trees after 100 or 2,000 commits of history.
func TestPushCostFlatInHistory(t *testing.T) {
	var got []gitremote.PushStats
	for _, n := range []int{100, 2000} {
		r, dir, bare := cloneHistory(t, n)
		p := probePushes(r)
		testutil.WriteFile(t, dir, "areas/d0/f00.html", "<p>new</p>\n")
		mustCommit(t, r, "areas/d0/f00.html")
		if res := mustSync(t, r); !res.Pushed {
			t.Fatalf("n=%d: %+v", n, res)
		}
		st := p.last(t)
		if st.Fallback != "" {
			t.Fatalf("n=%d: fell back: %s", n, st.Fallback)
		}
		fsck(t, bare)
		t.Logf("history %d: walked %d commits, read %d trees, sent %d objects", n, st.Walked, st.Trees, st.Objects)
		got = append(got, st)
	}
	short, long := got[0], got[1]
	// One commit popped (the new one; then only the remote head is
	// queued); trees root, areas, areas/d0 on both sides; the commit, its
	// three trees and one blob sent.
	if short.Walked != 1 || short.Trees != 6 || short.Objects != 5 || short.NewCommits != 1 {
		t.Errorf("short history: %+v", short)
	}
	if long.Walked != short.Walked || long.Trees != short.Trees || long.Objects != short.Objects {
		t.Errorf("cost grows with history: 100 commits %+v, 2000 commits %+v", short, long)
	}
}

// BenchmarkPushAfterHistory: one new commit pushed after 100 or 2,000
// commits of history, to a bare remote by path (file) or through git
// http-backend (http), through memd's enumeration (gitremote.SendPack) and through
// go-git's PushContext (gogit).
func BenchmarkPushAfterHistory(b *testing.B) {
	for _, tr := range []string{"file", "http"} {
		for _, n := range []int{100, 2000} {
			for _, path := range []string{"memd", "gogit"} {
				b.Run(fmt.Sprintf("%s/history=%d/%s", tr, n, path), func(b *testing.B) {
					benchPush(b, tr, n, path)
				})
			}
		}
	}
}

func benchPush(b *testing.B, tr string, n int, path string) {
	r, dir, bare := cloneHistory(b, n)
	if tr == "http" {
		testutil.RunGit(b, bare, "config", "http.receivepack", "true")
		srv := testutil.NewGitHTTPServer(b, filepath.Dir(bare), "")
		if err := r.SetRemote("origin", srv.URL(filepath.Base(bare))); err != nil {
			b.Fatal(err)
		}
	}
	ro := pushOpts().withDefaults()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		testutil.WriteFile(b, dir, "areas/d0/f00.html", fmt.Sprintf("<p>bench %d</p>\n", i))
		res, err := r.CommitPaths([]string{"areas/d0/f00.html"})
		if err != nil || res.Hash == "" {
			b.Fatalf("commit: %+v %v", res, err)
		}
		local := plumbing.NewHash(res.Hash)
		b.StartTimer()
		if path == "memd" {
			err = r.push(ctx, ro, local)
		} else {
			err = r.pushGoGitForBench(ctx, ro)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// pushGoGitForBench is the push before gitremote.SendPack: go-git's PushContext,
// whose object enumeration walks the remote's whole history.
func (r *Repo) pushGoGitForBench(ctx context.Context, ro RemoteOptions) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rem, err := r.repo.Remote(ro.Remote)
	if err != nil {
		return err
	}
	br := r.BranchRef()
	err = rem.PushContext(ctx, &git.PushOptions{
		RemoteName: ro.Remote,
		RefSpecs:   []config.RefSpec{config.RefSpec(br.String() + ":" + br.String())},
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return err
	}
	return nil
}

// TestPushRandomHistories: random edits, additions (some duplicating
// another file's content), deletions, moves and whole-folder deletions and
// re-creations on two clones with skewed clocks, merged and pushed in turn;
// every push of A goes through memd's enumeration and sends every object
// the remote lacked.
func TestPushRandomHistories(t *testing.T) {
	w := pushWorld(t, "file", pushSeed)
	var nb, na atomic.Int64
	ob := hostOptions("hostb")
	ob.Now = func() time.Time { return testNow.Add(time.Duration(nb.Add(1)) * time.Hour) }
	oa := hostOptions("hosta")
	oa.Now = func() time.Time { return testNow.Add(-time.Duration(na.Add(1)) * time.Minute) }
	a, b := openTest(t, w.aDir, oa), openTest(t, w.bDir, ob)
	p := probePushes(a)
	rng := rand.New(rand.NewPCG(11, 12))
	dirs := []string{"areas", "projects/p/notes", "projects/q", "resources/deep/x", "archive/y"}
	pushes := 0
	for round := 0; round < 30; round++ {
		r, dir := a, w.aDir
		if rng.IntN(3) == 0 {
			r, dir = b, w.bDir
		}
		var files []string
		for _, line := range strings.Split(testutil.RunGit(t, dir, "ls-files"), "\n") {
			if line != "" {
				files = append(files, line)
			}
		}
		var touched []string
		for op := 0; op < 1+rng.IntN(3); op++ {
			pick := func() string {
				if len(files) == 0 {
					return ""
				}
				f := files[rng.IntN(len(files))]
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					return ""
				}
				return f
			}
			switch rng.IntN(5) {
			case 0: // edit
				if f := pick(); f != "" {
					testutil.WriteFile(t, dir, f, fmt.Sprintf("edit %d %d\n", round, op))
					touched = append(touched, f)
				}
			case 1: // add, sometimes a copy of another file's content
				f := fmt.Sprintf("%s/r%d-%d.html", dirs[rng.IntN(len(dirs))], round, op)
				content := fmt.Sprintf("new %d %d\n", round, op)
				if g := pick(); g != "" && rng.IntN(2) == 0 {
					content = readWork(t, dir, g)
				}
				testutil.WriteFile(t, dir, f, content)
				touched = append(touched, f)
			case 2: // delete
				if f := pick(); f != "" {
					removeFile(t, dir, f)
					touched = append(touched, f)
				}
			case 3: // move to another folder
				if f := pick(); f != "" {
					to := fmt.Sprintf("%s/m%d-%d-%s", dirs[rng.IntN(len(dirs))], round, op, filepath.Base(f))
					renameFile(t, dir, f, to)
					touched = append(touched, f, to)
				}
			case 4: // delete a whole folder (re-created by later adds)
				d := dirs[rng.IntN(len(dirs))]
				for _, f := range files {
					if strings.HasPrefix(f, d+"/") && !strings.Contains(strings.TrimPrefix(f, d+"/"), "/") {
						if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
							removeFile(t, dir, f)
							touched = append(touched, f)
						}
					}
				}
			}
		}
		if len(touched) > 0 {
			mustCommit(t, r, touched...)
		}
		before := len(p.stats)
		res := mustSync(t, r)
		if r == a && res.Pushed {
			if len(p.stats) != before+1 {
				t.Fatalf("round %d: %d pushes recorded, want 1", round, len(p.stats)-before)
			}
			checkPushed(t, w, p, 1<<20) // extras (moved or copied blobs) are allowed
			pushes++
		}
	}
	if pushes < 10 {
		t.Fatalf("only %d pushes of A checked", pushes)
	}
	mustSync(t, b)
	mustSync(t, a)
	fsck(t, w.bare)
}

// TestPushToFileRemoteRunsToItsEnd: a push to a file remote is not cut off by its context's
// cancellation (a daemon stopping mid-push): go-git would SIGKILL the git receive-pack it
// runs, which can leave HEAD.lock or the branch's lock in the remote and refuse every later
// push. With the context already cancelled the push still lands, and no lock is left.
func TestPushToFileRemoteRunsToItsEnd(t *testing.T) {
	w := pushWorld(t, "file", pushSeed)
	testutil.WriteFile(t, w.aDir, "areas/late.html", "pushed as memd stops\n")
	res := mustCommit(t, w.a, "areas/late.html")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.a.push(ctx, pushOpts().withDefaults(), plumbing.NewHash(res.Hash)); err != nil {
		t.Fatalf("push with a cancelled context to a file remote: %v", err)
	}
	if got := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")); got != res.Hash {
		t.Fatalf("remote main %s, want the pushed %s", got, res.Hash)
	}
	locks, _ := filepath.Glob(filepath.Join(w.bare, "*.lock"))
	refLocks, _ := filepath.Glob(filepath.Join(w.bare, "refs", "heads", "*.lock"))
	if len(locks)+len(refLocks) > 0 {
		t.Fatalf("locks left in the remote: %v %v", locks, refLocks)
	}
}

// TestTrackingRefReplacedWhole: the remote-tracking ref is left alone by a fetch that found
// the remote unmoved (same file, same time) and replaced by rename when it moves, as git
// fetch does, never truncated and rewritten in place, where a person's git (or `git fsck`)
// reading it during a pull found it empty.
func TestTrackingRefReplacedWhole(t *testing.T) {
	w := newSyncWorld(t, pushSeed)
	n := 0
	bPushes := func() {
		t.Helper()
		n++
		rel := fmt.Sprintf("areas/from-b-%d.html", n)
		testutil.WriteFile(t, w.bDir, rel, "from b\n")
		mustCommit(t, w.b, rel)
		mustSync(t, w.b)
	}
	bPushes() // the clone's tracking ref is in packed-refs: the fetch writes the loose one
	mustSync(t, w.a)
	path := filepath.Join(w.aDir, ".git", "refs", "remotes", "origin", "main")
	stat := func() os.FileInfo {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	before := stat()
	mustSync(t, w.a)
	if after := stat(); !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("an unmoved remote rewrote the tracking ref: %v → %v", before.ModTime(), after.ModTime())
	}
	bPushes()
	mustSync(t, w.a)
	after := stat()
	if os.SameFile(before, after) {
		t.Fatal("the tracking ref was rewritten in place, not replaced")
	}
	want := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	if got := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-parse", "origin/main")); got != want {
		t.Fatalf("origin/main %s, remote main %s", got, want)
	}
	if _, err := os.Lstat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock left behind: %v", err)
	}
	fsck(t, w.aDir)
}
