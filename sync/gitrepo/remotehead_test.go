package gitrepo

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

// TestRemoteHeadHTTPOneSmallRequest: the look over smart HTTP is one request of a few hundred
// bytes however many refs the remote has, and it sees the branch move.
func TestRemoteHeadHTTPOneSmallRequest(t *testing.T) {
	srv, w := newHTTPWorld(t, "", map[string]string{"a.md": "one\n"})
	// 200 other refs, as a forge's pull-request refs would be.
	var script string
	head := testutil.RunGit(t, w.bare, "rev-parse", "main")
	for i := 0; i < 200; i++ {
		script += fmt.Sprintf("create refs/pull/%d/head %s\n", i, head[:40])
	}
	runGitStdin(t, w.bare, script, "update-ref", "--stdin")

	ro := pushOpts()
	n0, b0 := srv.Served()
	h, err := w.a.RemoteHead(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	n1, b1 := srv.Served()
	if h != plumbing.NewHash(head[:40]) {
		t.Fatalf("RemoteHead = %s, want %s", h, head[:40])
	}
	if n1-n0 != 1 || b1-b0 > 1024 {
		t.Fatalf("one look cost %d requests and %d bytes; want 1 request under 1 KiB", n1-n0, b1-b0)
	}
	// B pushes: the look sees the new head.
	testutil.WriteFile(t, w.bDir, "b.md", "two\n")
	mustCommit(t, w.b, "b.md")
	mustSync(t, w.b)
	moved := testutil.RunGit(t, w.bare, "rev-parse", "main")[:40]
	if h, err := w.a.RemoteHead(context.Background(), ro); err != nil || h.String() != moved {
		t.Fatalf("after B's push RemoteHead = %s, %v; want %s", h, err, moved)
	}
}

// TestLookKeepsTargetUntilGitConfigChanges: the looks reuse the credentials they resolved
// (resolving runs git processes, each a burst of wakeups for an idle daemon) until one of
// git's config files changes; then the next look resolves again.
func TestLookKeepsTargetUntilGitConfigChanges(t *testing.T) {
	_, w := newHTTPWorld(t, "", map[string]string{"a.md": "one\n"})
	ro := pushOpts()
	look := func() *gitremote.Target {
		t.Helper()
		if _, err := w.a.RemoteHead(context.Background(), ro); err != nil {
			t.Fatal(err)
		}
		return w.a.cachedOf("fetch")
	}
	first := look()
	if first == nil || look() != first {
		t.Fatal("the second look resolved its target again; want the first one's reused")
	}
	testutil.RunGit(t, w.aDir, "config", "http.lowSpeedTime", "600") // any change to .git/config
	if look() == first {
		t.Fatal("after a .git/config change the look kept its old target; want it resolved again")
	}
}

// cachedOf is op's cached target (nil: none).
func (r *Repo) cachedOf(op string) *gitremote.Target {
	r.look.mu.Lock()
	defer r.look.mu.Unlock()
	if e := r.look.ents[op]; e != nil {
		return e.tgt
	}
	return nil
}

// TestFetchAndPushReuseTheLooksTarget: the fetch and the push that follow a look resolve no
// credentials again (each resolve is three git processes on the way of every write to the
// other machines): the fetch takes the look's target, the push keeps its own from one push to
// the next, and a change to git's config resolves both again.
func TestFetchAndPushReuseTheLooksTarget(t *testing.T) {
	_, w := newHTTPWorld(t, "", map[string]string{"a.md": "one\n"})
	ro := pushOpts()
	ctx := context.Background()
	if _, err := w.a.RemoteHead(ctx, ro); err != nil {
		t.Fatal(err)
	}
	looked := w.a.cachedOf("fetch")
	if looked == nil {
		t.Fatal("no target kept after the look")
	}
	if err := w.a.Fetch(ctx, ro); err != nil {
		t.Fatal(err)
	}
	if w.a.cachedOf("fetch") != looked {
		t.Fatal("the fetch resolved its target again; want the look's reused")
	}
	testutil.WriteFile(t, w.aDir, "a2.md", "two\n")
	mustCommit(t, w.a, "a2.md")
	mustSync(t, w.a)
	pushed := w.a.cachedOf("push")
	if pushed == nil || pushed == looked {
		t.Fatalf("push target %p (look's %p): want one of its own (pushInsteadOf), kept", pushed, looked)
	}
	testutil.WriteFile(t, w.aDir, "a3.md", "three\n")
	mustCommit(t, w.a, "a3.md")
	mustSync(t, w.a)
	if w.a.cachedOf("push") != pushed || w.a.cachedOf("fetch") != looked {
		t.Fatal("the second sync resolved its targets again; want them reused")
	}
	testutil.RunGit(t, w.aDir, "config", "http.lowSpeedTime", "600")
	testutil.WriteFile(t, w.aDir, "a4.md", "four\n")
	mustCommit(t, w.a, "a4.md")
	mustSync(t, w.a)
	if w.a.cachedOf("push") == pushed || w.a.cachedOf("fetch") == looked {
		t.Fatal("after a .git/config change a sync kept its old targets; want them resolved again")
	}
}

// TestFetchAfterMovedLookAsksNoRefAgain: the fetch a look kicked (the look saw the branch
// move) starts with the pack: one request, not the ls-refs again. Only once: the next fetch
// asks where the branch is.
func TestFetchAfterMovedLookAsksNoRefAgain(t *testing.T) {
	srv, w := newHTTPWorld(t, "", map[string]string{"a.md": "one\n"})
	ro := pushOpts()
	ctx := context.Background()
	testutil.WriteFile(t, w.bDir, "b.md", "two\n")
	mustCommit(t, w.b, "b.md")
	mustSync(t, w.b)
	moved := testutil.RunGit(t, w.bare, "rev-parse", "main")[:40]
	if h, err := w.a.RemoteHead(ctx, ro); err != nil || h.String() != moved {
		t.Fatalf("RemoteHead = %s, %v; want %s", h, err, moved)
	}
	n0, _ := srv.Served()
	if err := w.a.Fetch(ctx, ro); err != nil {
		t.Fatal(err)
	}
	n1, _ := srv.Served()
	if h, err := w.a.TrackingHead(ro); err != nil || h.String() != moved {
		t.Fatalf("tracking ref %s, %v; want %s", h, err, moved)
	}
	if n1-n0 != 1 {
		t.Fatalf("fetch after a look that saw the move: %d requests, want 1 (the pack)", n1-n0)
	}
	if err := w.a.Fetch(ctx, ro); err != nil {
		t.Fatal(err)
	}
	if n2, _ := srv.Served(); n2-n1 != 1 {
		t.Fatalf("the next fetch: %d requests, want 1 (its own ls-refs)", n2-n1)
	}
	// A look that finds the branch where the tracking ref is leaves the fetch its ls-refs.
	if _, err := w.a.RemoteHead(ctx, ro); err != nil {
		t.Fatal(err)
	}
	n3, _ := srv.Served()
	if err := w.a.Fetch(ctx, ro); err != nil {
		t.Fatal(err)
	}
	if n4, _ := srv.Served(); n4-n3 != 1 {
		t.Fatalf("fetch after a look that saw no move: %d requests, want 1 (its own ls-refs)", n4-n3)
	}
}

// TestRemoteHeadFileAndAbsent: a file remote is read in place; a branch the remote lacks is
// the zero hash, not an error.
func TestRemoteHeadFileAndAbsent(t *testing.T) {
	w := newSyncWorld(t, map[string]string{"a.md": "one\n"})
	want := testutil.RunGit(t, w.bare, "rev-parse", "main")[:40]
	testutil.RunGit(t, w.bare, "pack-refs", "--all") // packed-refs, as a gc'd remote has
	h, err := w.a.RemoteHead(context.Background(), pushOpts())
	if err != nil || h.String() != want {
		t.Fatalf("RemoteHead = %s, %v; want %s", h, err, want)
	}
	testutil.RunGit(t, w.bare, "update-ref", "-d", "refs/heads/main")
	if h, err := w.a.RemoteHead(context.Background(), pushOpts()); err != nil || !h.IsZero() {
		t.Fatalf("absent branch: RemoteHead = %s, %v; want zero, nil", h, err)
	}
}

// runGitStdin runs git in dir with stdin.
func runGitStdin(t testing.TB, dir, stdin string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testutil.GitEnv()
	cmd.Stdin = strings.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestFetchOneRefV2: a fetch over smart HTTP asks for the one branch (v2 ls-refs, then one
// fetch): two requests, and none of the remote's 2000 other refs is sent; the new commit
// arrives and the tracking ref points at it. With the commit already here (a push of ours),
// the fetch is the look alone.
func TestFetchOneRefV2(t *testing.T) {
	srv, w := newHTTPWorld(t, "", map[string]string{"a.md": "one\n"})
	head := testutil.RunGit(t, w.bare, "rev-parse", "main")[:40]
	var script strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&script, "create refs/pull/%d/head %s\n", i, head)
	}
	runGitStdin(t, w.bare, script.String(), "update-ref", "--stdin")
	testutil.WriteFile(t, w.bDir, "b.md", "two\n")
	mustCommit(t, w.b, "b.md")
	mustSync(t, w.b)
	moved := testutil.RunGit(t, w.bare, "rev-parse", "main")[:40]

	n0, b0 := srv.Served()
	if err := w.a.Fetch(context.Background(), pushOpts()); err != nil {
		t.Fatal(err)
	}
	n1, b1 := srv.Served()
	if h, err := w.a.TrackingHead(pushOpts()); err != nil || h.String() != moved {
		t.Fatalf("tracking ref %s, %v; want %s", h, err, moved)
	}
	testutil.RunGit(t, w.aDir, "cat-file", "-e", moved+"^{tree}")
	// A v0 advertisement of 2000 refs alone is ~110 KiB.
	if n1-n0 != 2 || b1-b0 > 8<<10 {
		t.Fatalf("fetch of one new commit: %d requests, %d bytes; want 2 requests under 8 KiB", n1-n0, b1-b0)
	}
	if err := w.a.Fetch(context.Background(), pushOpts()); err != nil {
		t.Fatal(err)
	}
	if n2, _ := srv.Served(); n2-n1 != 1 {
		t.Fatalf("fetch with nothing new: %d requests, want 1", n2-n1)
	}
}
