package gitrepo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/memd-dev/memd/internal/testutil"
)

// sshRefsWorld is a's clone reaching its bare remote over sshd (with or without AcceptEnv
// GIT_PROTOCOL), the remote holding 2000 refs besides main and a commit a lacks.
func sshRefsWorld(t *testing.T, acceptEnv bool) (*realWorld, *testutil.SSHServer, string, string) {
	t.Helper()
	w := newRealWorld(t)
	key := filepath.Join(t.TempDir(), "keys", "k")
	pub := testutil.SSHKeygen(t, key, "")
	w.sshKeys = []string{key}
	srv := testutil.NewSSHServerV0(t, pub)
	if acceptEnv {
		srv = testutil.NewSSHServer(t, pub)
	}
	w.writeHome(t, ".ssh/known_hosts", srv.KnownHostsLine()+"\n")
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host mem\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n",
		srv.Host, srv.Port, srv.User, key))
	url := "mem:" + w.bare
	if err := w.a.SetRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	seed := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
	f, err := os.Create(filepath.Join(w.bare, "packed-refs"))
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	fmt.Fprintln(bw, "# pack-refs with: peeled fully-peeled sorted ")
	for i := range 2000 {
		fmt.Fprintf(bw, "%s refs/pull/%07d/head\n", seed, i)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	other := filepath.Join(t.TempDir(), "other")
	testutil.RunGit(t, filepath.Dir(other), "clone", "-q", w.bare, other)
	testutil.WriteFile(t, other, "new.md", "from elsewhere\n")
	testutil.RunGit(t, other, "add", "-A")
	testutil.RunGit(t, other, "commit", "-q", "-m", "new")
	testutil.RunGit(t, other, "push", "-q", "origin", "main")
	return w, srv, url, strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
}

// sentOnNextConn runs op and returns what sshd sent on the connection it made.
func sentOnNextConn(t *testing.T, srv *testutil.SSHServer, op func()) int64 {
	t.Helper()
	before := len(srv.Transferred())
	op()
	if !testutil.Poll(10*time.Second, func() bool { return len(srv.Transferred()) > before }) {
		t.Fatalf("sshd logged no ended connection; log:\n%s", srv.Log())
	}
	tr := srv.Transferred()
	var sum int64
	for _, n := range tr[before:] {
		sum += n
	}
	return sum
}

func TestSSHV2LookAndFetchOneRef(t *testing.T) {
	w, srv, url, want := sshRefsWorld(t, true)
	ctx := context.Background()
	var head string
	look := sentOnNextConn(t, srv, func() {
		h, err := w.a.RemoteHead(ctx, RemoteOptions{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("RemoteHead: %v", err)
		}
		head = h.String()
	})
	if head != want {
		t.Fatalf("look = %s, want %s", head, want)
	}
	// 2000 refs are ~136 KiB of v0 advertisement; the v2 look is the ssh handshake and
	// one ref.
	if look > 8<<10 {
		t.Errorf("the look over ssh received %d bytes, want < 8 KiB (one ref)", look)
	}
	var res SyncResult
	fetch := sentOnNextConn(t, srv, func() {
		var err error
		if res, err = w.a.Sync(ctx, RemoteOptions{Timeout: 30 * time.Second}); err != nil {
			t.Fatalf("Sync: %v", err)
		}
	})
	if h, _ := w.a.Head(); h != want || !res.FastForward {
		t.Fatalf("after Sync: head %s (%+v), want a fast-forward to %s", h, res, want)
	}
	if fetch > 12<<10 {
		t.Errorf("the fetch over ssh received %d bytes, want < 12 KiB (one ref and a one-commit pack)", fetch)
	}
	t.Logf("over ssh with 2000 refs: look %d bytes, fetch %d bytes (sshd's count, handshake included)", look, fetch)
	// Plain git in the same HOME sees the same head.
	if _, err := w.gitRef("fetch", "-q", url, "main"); err != nil {
		t.Fatalf("reference git fetch: %v", err)
	}
	if got, _ := w.gitRef("rev-parse", "FETCH_HEAD"); strings.TrimSpace(got) != want {
		t.Errorf("reference git fetched %q, want %s", got, want)
	}
}

func TestSSHV0ServerFallsBack(t *testing.T) {
	// sshd without AcceptEnv GIT_PROTOCOL: upload-pack answers in v0, every ref first.
	w, srv, _, want := sshRefsWorld(t, false)
	ctx := context.Background()
	var head string
	look := sentOnNextConn(t, srv, func() {
		h, err := w.a.RemoteHead(ctx, RemoteOptions{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("RemoteHead: %v", err)
		}
		head = h.String()
	})
	if head != want {
		t.Fatalf("look = %s, want %s", head, want)
	}
	if look < 100<<10 {
		t.Errorf("the look at a v0 server received %d bytes, want the whole advertisement (> 100 KiB)", look)
	}
	// The look found v0: the fetch is go-git's alone (one connection, one advertisement),
	// not a v2 attempt and then go-git's.
	before := srv.Logins()
	res, err := w.a.Sync(ctx, RemoteOptions{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if h, _ := w.a.Head(); h != want || !res.FastForward {
		t.Fatalf("after Sync: head %s (%+v), want a fast-forward to %s", h, res, want)
	}
	if n := srv.Logins() - before; n != 1 {
		t.Errorf("the fetch from a v0 server made %d ssh connections, want 1 (go-git's)", n)
	}
	t.Logf("v0 server, 2000 refs: look %d bytes", look)
}

func TestSSHV0FetchWithoutLook(t *testing.T) {
	// No look first: the fetch asks for v2, gets v0 (read to its end, so that the server
	// ends in order), and leaves it to go-git; the next fetch goes to go-git at once.
	w, srv, _, want := sshRefsWorld(t, false)
	ctx := context.Background()
	for i := range 2 {
		before := srv.Logins()
		res, err := w.a.Sync(ctx, RemoteOptions{Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("Sync %d: %v", i, err)
		}
		if h, _ := w.a.Head(); h != want || (i == 0 && !res.FastForward) {
			t.Fatalf("after Sync %d: head %s (%+v), want %s", i, h, res, want)
		}
		if n, wantConns := srv.Logins()-before, []int{2, 1}[i]; n != wantConns {
			t.Errorf("Sync %d: %d ssh connections, want %d", i, n, wantConns)
		}
	}
}

func TestSSHV2MissingRepository(t *testing.T) {
	// A path the server has no repository at: the look names it, and says not found.
	w, _, _, _ := sshRefsWorld(t, true)
	if err := w.a.SetRemote("origin", "mem:"+w.bare+"-missing"); err != nil {
		t.Fatal(err)
	}
	_, err := w.a.RemoteHead(context.Background(), RemoteOptions{Timeout: 30 * time.Second})
	if !errors.Is(err, transport.ErrRepositoryNotFound) || !strings.Contains(err.Error(), "-missing") {
		t.Fatalf("RemoteHead of a missing repository: err = %v, want ErrRepositoryNotFound naming the path", err)
	}
}
