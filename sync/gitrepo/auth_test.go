package gitrepo

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

func TestSyncHTTPWithToken(t *testing.T) {
	_, w := newHTTPWorld(t, "s3cret-token", map[string]string{"areas/a.html": "a\n"})
	t.Setenv("MEMD_TEST_TOKEN", "s3cret-token")
	testutil.WriteFile(t, w.aDir, "areas/http.html", "over http\n")
	mustCommit(t, w.a, "areas/http.html")
	ro := RemoteOptions{Push: true, TokenEnv: "MEMD_TEST_TOKEN", Timeout: 30 * time.Second}
	res, err := w.a.Sync(context.Background(), ro)
	if err != nil {
		t.Fatalf("Sync over HTTP: %v", err)
	}
	if !res.Pushed || res.Ahead != 0 {
		t.Errorf("result %+v", res)
	}
	if got := testutil.RunGit(t, w.bare, "show", "main:areas/http.html"); got != "over http\n" {
		t.Errorf("remote has %q", got)
	}
	fsck(t, w.bare)
}

func TestSyncHTTPWrongTokenIsErrAuth(t *testing.T) {
	srv, w := newHTTPWorld(t, "right-token", map[string]string{"areas/a.html": "a\n"})
	tokFile := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tokFile, []byte("WRONG-TOKEN-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.aDir, "areas/local.html", "local\n")
	mustCommit(t, w.a, "areas/local.html")
	head, _ := w.a.Head()
	ro := RemoteOptions{Push: true, TokenFile: tokFile, Timeout: 30 * time.Second}
	_, err := w.a.Sync(context.Background(), ro)
	if !errors.Is(err, gitremote.ErrAuth) {
		t.Fatalf("err = %v, want gitremote.ErrAuth", err)
	}
	msg := err.Error()
	t.Logf("auth error: %s", msg)
	if strings.Contains(msg, "WRONG-TOKEN") || !strings.Contains(msg, "origin") || !strings.Contains(msg, srv.Addr()) {
		t.Errorf("error message %q: must name the remote and its URL, never the token", msg)
	}
	if errors.Is(err, gitremote.ErrOffline) {
		t.Errorf("auth failure also classified offline: %v", err)
	}
	if h, _ := w.a.Head(); h != head {
		t.Errorf("local head moved %s → %s", head, h)
	}
	if readWork(t, w.aDir, "areas/local.html") != "local\n" {
		t.Error("local file lost")
	}

	// Credentials inside the URL are redacted too.
	url := "http://x-access-token:URL-SECRET-9@" + srv.Addr() + "/git/remote.git"
	if err := w.a.SetRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	_, err = w.a.Sync(context.Background(), RemoteOptions{Push: true, Timeout: 30 * time.Second})
	if !errors.Is(err, gitremote.ErrAuth) || strings.Contains(err.Error(), "URL-SECRET") {
		t.Errorf("URL credentials: err = %v", err)
	}

	// The token file is re-read on every attempt: fixing it fixes sync.
	if err := os.WriteFile(tokFile, []byte("right-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := w.a.SetRemote("origin", srv.URL("remote.git")); err != nil {
		t.Fatal(err)
	}
	res, err := w.a.Sync(context.Background(), ro)
	if err != nil || !res.Pushed {
		t.Fatalf("after fixing the token: %+v, %v", res, err)
	}
}

func TestSyncHTTPOfflineThenBack(t *testing.T) {
	srv, w := newHTTPWorld(t, "tok", map[string]string{"areas/a.html": "a\n"})
	t.Setenv("MEMD_TEST_TOKEN", "tok")
	ro := RemoteOptions{Push: true, TokenEnv: "MEMD_TEST_TOKEN", Timeout: 10 * time.Second}
	srv.Stop()
	for i := 0; i < 3; i++ {
		p := "areas/offline-" + string(rune('a'+i)) + ".html"
		testutil.WriteFile(t, w.aDir, p, "written offline\n")
		mustCommit(t, w.a, p)
		res, err := w.a.Sync(context.Background(), ro)
		if i == 0 {
			t.Logf("offline error: %v", err)
		}
		if !errors.Is(err, gitremote.ErrOffline) {
			t.Fatalf("offline sync %d: err = %v, want gitremote.ErrOffline", i, err)
		}
		if errors.Is(err, gitremote.ErrAuth) {
			t.Fatalf("offline classified as auth: %v", err)
		}
		if res.Ahead != i+1 {
			t.Errorf("offline sync %d: ahead %d, want %d", i, res.Ahead, i+1)
		}
	}
	srv.Start()
	res, err := w.a.Sync(context.Background(), ro)
	if err != nil || !res.Pushed || res.Ahead != 0 {
		t.Fatalf("back online: %+v, %v", res, err)
	}
	for i := 0; i < 3; i++ {
		p := "areas/offline-" + string(rune('a'+i)) + ".html"
		if got := testutil.RunGit(t, w.bare, "show", "main:"+p); got != "written offline\n" {
			t.Errorf("remote %s = %q", p, got)
		}
	}
	fsck(t, w.bare)
}

func TestSyncHTTPTimeoutIsOffline(t *testing.T) {
	srv, w := newHTTPWorld(t, "", map[string]string{"areas/a.html": "a\n"})
	srv.SetHang()
	start := time.Now()
	_, err := w.a.Sync(context.Background(), RemoteOptions{Push: true, Timeout: 500 * time.Millisecond})
	t.Logf("timeout error: %v", err)
	if !errors.Is(err, gitremote.ErrOffline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want gitremote.ErrOffline and DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("timeout not honoured: %v", d)
	}
}

// sshGitServer is a real ssh server on loopback (x/crypto/ssh) that runs
// the git binary's upload-pack / receive-pack for exec requests.
type sshGitServer struct {
	addr    string
	hostKey ssh.PublicKey
}

func newSSHGitServer(t *testing.T, accept ssh.PublicKey) *sshGitServer {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if accept != nil && bytes.Equal(k.Marshal(), accept.Marshal()) {
			return &ssh.Permissions{}, nil
		}
		return nil, errors.New("key not authorized")
	}}
	cfg.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSSHConn(c, cfg)
		}
	}()
	return &sshGitServer{addr: ln.Addr().String(), hostKey: signer.PublicKey()}
}

func serveSSHConn(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go func() {
			for req := range creqs {
				if req.Type != "exec" {
					_ = req.Reply(false, nil)
					continue
				}
				var p struct{ Command string }
				if ssh.Unmarshal(req.Payload, &p) != nil {
					_ = req.Reply(false, nil)
					continue
				}
				_ = req.Reply(true, nil)
				svc, arg, _ := strings.Cut(p.Command, " ")
				cmd := exec.Command("git", strings.TrimPrefix(svc, "git-"), strings.Trim(arg, "'"))
				cmd.Env = testutil.GitEnv()
				cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
				in, _ := cmd.StdinPipe()
				status := uint32(0)
				if err := cmd.Start(); err != nil {
					status = 127
				} else {
					go func() { _, _ = io.Copy(in, ch); _ = in.Close() }()
					if err := cmd.Wait(); err != nil {
						status = 1
					}
				}
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
				_ = ch.Close()
				return
			}
		}()
	}
}

func writeSSHKey(t *testing.T) (path string, pub ssh.PublicKey) {
	t.Helper()
	pubKey, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	pub, err = ssh.NewPublicKey(pubKey)
	if err != nil {
		t.Fatal(err)
	}
	return path, pub
}

func writeKnownHosts(t *testing.T, addr string, key ssh.PublicKey) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(p, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSyncSSH(t *testing.T) {
	keyFile, pub := writeSSHKey(t)
	srv := newSSHGitServer(t, pub)
	w := newSyncWorld(t, map[string]string{"areas/a.html": "a\n"})
	if err := w.a.SetRemote("origin", "ssh://git@"+srv.addr+w.bare); err != nil {
		t.Fatal(err)
	}
	testutil.WriteFile(t, w.aDir, "areas/ssh.html", "over ssh\n")
	mustCommit(t, w.a, "areas/ssh.html")
	good := RemoteOptions{Push: true, SSHKey: keyFile, KnownHosts: writeKnownHosts(t, srv.addr, srv.hostKey), Timeout: 30 * time.Second}
	res, err := w.a.Sync(context.Background(), good)
	if err != nil || !res.Pushed {
		t.Fatalf("Sync over ssh: %+v, %v", res, err)
	}
	if got := testutil.RunGit(t, w.bare, "show", "main:areas/ssh.html"); got != "over ssh\n" {
		t.Errorf("remote has %q", got)
	}

	// A key the server does not accept.
	otherKey, _ := writeSSHKey(t)
	bad := good
	bad.SSHKey = otherKey
	_, err = w.a.Sync(context.Background(), bad)
	if !errors.Is(err, gitremote.ErrAuth) {
		t.Errorf("unauthorized key: err = %v, want gitremote.ErrAuth", err)
	}
	// A host key that does not match known_hosts.
	_, wrongHost := writeSSHKey(t)
	mism := good
	mism.KnownHosts = writeKnownHosts(t, srv.addr, wrongHost)
	_, err = w.a.Sync(context.Background(), mism)
	if !errors.Is(err, gitremote.ErrAuth) {
		t.Errorf("host key mismatch: err = %v, want gitremote.ErrAuth", err)
	}
	t.Logf("mismatch error: %v", err)
}
