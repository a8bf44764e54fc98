package gitrepo

// Real servers on loopback (docs/ARCHITECTURE.md §11 "Remotes as git reaches them"): OpenSSH's sshd and
// git's http-backend, reached with only what a user's shell has (~/.ssh, an agent, git's
// config and credential helpers). In each case plain git in the same HOME is the
// reference: where git succeeds memd succeeds, where git refuses memd refuses.
//
// memd (in process) reads $HOME, which the test points at a sandbox; OpenSSH finds ~ in
// the password database, so the reference git gets an explicit GIT_SSH_COMMAND naming the
// sandbox's config, known_hosts and key files. The machine's ~/.ssh is never touched.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

// realWorld is one user's machine: a sandbox HOME, a memd clone (a) of a bare remote, and
// the reference git of that HOME.
type realWorld struct {
	*syncWorld
	home, ssh string // HOME and HOME/.ssh
	sshKeys   []string
	sock      string // SSH_AUTH_SOCK for the reference git ("" = none)
}

func newRealWorld(t *testing.T) *realWorld {
	t.Helper()
	// One clone (a) of a seeded bare remote: what newSyncWorld makes, without b.
	sw := &syncWorld{bare: filepath.Join(t.TempDir(), "remote.git")}
	testutil.RunGit(t, filepath.Dir(sw.bare), "init", "-q", "--bare", "-b", "main", sw.bare)
	sw.aDir = filepath.Join(t.TempDir(), "a")
	testutil.RunGit(t, filepath.Dir(sw.aDir), "clone", "-q", sw.bare, sw.aDir)
	testutil.WriteFile(t, sw.aDir, "seed.txt", "seed\n")
	testutil.RunGit(t, sw.aDir, "add", "-A")
	testutil.RunGit(t, sw.aDir, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, sw.aDir, "push", "-q", "origin", "main")
	sw.a = openTest(t, sw.aDir, hostOptions("hosta"))
	w := &realWorld{syncWorld: sw}
	w.home = t.TempDir()
	w.ssh = filepath.Join(w.home, ".ssh")
	if err := os.MkdirAll(w.ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	w.writeHome(t, ".ssh/config", "")
	w.writeHome(t, ".gitconfig", "")
	for k, v := range map[string]string{
		"HOME": w.home, "GIT_CONFIG_GLOBAL": filepath.Join(w.home, ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1",
		"XDG_CONFIG_HOME": filepath.Join(w.home, ".config"), "XDG_RUNTIME_DIR": filepath.Join(w.home, "run"),
	} {
		t.Setenv(k, v)
	}
	// Unset, not empty: git reads an empty no_proxy as set.
	for _, k := range []string{"SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY",
		"http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	if err := os.MkdirAll(filepath.Join(w.home, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *realWorld) writeHome(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(w.home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// gitRef runs the reference git in the sandbox HOME (in a's clone).
func (w *realWorld) gitRef(args ...string) (string, error) {
	sshCmd := fmt.Sprintf("ssh -F %s -o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes",
		filepath.Join(w.ssh, "config"), filepath.Join(w.ssh, "known_hosts"))
	for _, k := range w.sshKeys {
		sshCmd += " -o IdentityFile=" + k
	}
	env := append(testutil.IsolatedEnv(w.home, filepath.Join(w.home, ".gitconfig")), "GIT_SSH_COMMAND="+sshCmd, "SSH_AUTH_SOCK="+w.sock)
	return testutil.Git{Env: env}.Run(w.aDir, nil, args...)
}

// memdPush commits a change in a and syncs it, returning Sync's error.
func (w *realWorld) memdPush(t *testing.T, ro RemoteOptions) error {
	t.Helper()
	testutil.WriteFile(t, w.aDir, "note.txt", fmt.Sprintf("edit %d\n", time.Now().UnixNano()))
	mustCommit(t, w.a, "note.txt")
	ro.Push, ro.Timeout = true, 30*time.Second
	_, err := w.a.Sync(context.Background(), ro)
	return err
}

// pushedAll reports whether the remote's main is a's HEAD.
func (w *realWorld) pushedAll(t *testing.T) bool {
	t.Helper()
	head, _ := w.a.Head()
	return strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")) == head
}

// agree checks that memd and the reference git (a push of HEAD to a scratch branch) both
// succeed, or both fail.
func (w *realWorld) agree(t *testing.T, url string, wantOK bool, ro RemoteOptions) error {
	t.Helper()
	if err := w.a.SetRemote("origin", url); err != nil {
		t.Fatal(err)
	}
	_, gitErr := w.gitRef("push", "-q", url, "HEAD:refs/heads/reference-git")
	memdErr := w.memdPush(t, ro)
	if (gitErr == nil) != wantOK {
		t.Fatalf("reference git push to %s: err = %v, want ok=%v", url, gitErr, wantOK)
	}
	if (memdErr == nil) != wantOK {
		t.Fatalf("memd sync with %s: err = %v, want ok=%v (git: %v)", url, memdErr, wantOK, gitErr)
	}
	if wantOK && !w.pushedAll(t) {
		t.Fatalf("memd's sync succeeded but the remote lacks a's HEAD")
	}
	return memdErr
}

// sshWorld adds an sshd serving the bare remote that accepts key (a fresh key pair at
// keyPath; "" = none generated), with the server's host key in known_hosts.
func newSSHWorld(t *testing.T, keyPath string) (*realWorld, *testutil.SSHServer, string) {
	t.Helper()
	w := newRealWorld(t)
	var pub string
	if keyPath != "" {
		pub = testutil.SSHKeygen(t, keyPath, "")
		w.sshKeys = append(w.sshKeys, keyPath)
	}
	srv := testutil.NewSSHServer(t, pub)
	w.writeHome(t, ".ssh/known_hosts", srv.KnownHostsLine()+"\n")
	return w, srv, pub
}

func TestRealSSHConfigAliasIdentityFileNoAgent(t *testing.T) {
	w, srv, _ := newSSHWorld(t, filepath.Join(t.TempDir(), "keys", "work_key"))
	// The key lives outside ~/.ssh and only the alias names it (the two-accounts setup).
	key := w.sshKeys[0]
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host work-gh\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  IdentitiesOnly yes\n",
		srv.Host, srv.Port, srv.User, key))
	w.agree(t, "work-gh:"+w.bare, true, RemoteOptions{})

	// User comes from the config: a user sshd does not know fails for both.
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host work-gh\n  HostName %s\n  Port %d\n  User memd-no-such-user\n  IdentityFile %s\n",
		srv.Host, srv.Port, key))
	err := w.agree(t, "work-gh:"+w.bare, false, RemoteOptions{})
	if !errors.Is(err, gitremote.ErrAuth) {
		t.Errorf("unknown user: err = %v, want ErrAuth", err)
	}
}

func TestRealSSHTildeAndDefaultIdentity(t *testing.T) {
	// A key at ~/.ssh/id_ed25519, no agent, no config: git's ssh uses it, so does memd.
	w, srv, _ := newSSHWorld(t, "")
	w.sshKeys = nil
	key := filepath.Join(w.ssh, "id_ed25519")
	srv.SetAuthorized(t, testutil.SSHKeygen(t, key, ""))
	w.sshKeys = []string{key}
	url := fmt.Sprintf("ssh://%s@%s:%d%s", srv.User, srv.Host, srv.Port, w.bare)
	w.agree(t, url, true, RemoteOptions{})

	// The same key named as ~/.ssh/... in the config of an alias.
	if err := os.Rename(key, filepath.Join(w.ssh, "other")); err != nil {
		t.Fatal(err)
	}
	w.sshKeys = []string{filepath.Join(w.ssh, "other")}
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host mem\n  HostName %s\n  Port %d\n  IdentityFile ~/.ssh/other\n", srv.Host, srv.Port))
	w.agree(t, "mem:"+w.bare, true, RemoteOptions{})
}

func TestRealSSHKnownHosts(t *testing.T) {
	w, srv, _ := newSSHWorld(t, filepath.Join(t.TempDir(), "k"))
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host mem\n  HostName %s\n  Port %d\n  IdentityFile %s\n", srv.Host, srv.Port, w.sshKeys[0]))
	kh := filepath.Join(w.ssh, "known_hosts")

	// Hashed entries (ssh-keygen -H, what HashKnownHosts writes).
	if out, err := exec.Command("ssh-keygen", "-H", "-f", kh).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -H: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(kh); !strings.HasPrefix(string(b), "|1|") {
		t.Fatalf("known_hosts not hashed: %s", b)
	}
	w.agree(t, "mem:"+w.bare, true, RemoteOptions{})

	// An unknown host: refused by both, and nothing is added to known_hosts.
	other := testutil.SSHKeygen(t, filepath.Join(t.TempDir(), "other_host"), "")
	f := strings.Fields(other)
	w.writeHome(t, ".ssh/known_hosts", "[other.example]:22 "+f[0]+" "+f[1]+"\n")
	before, _ := os.ReadFile(kh)
	err := w.agree(t, "mem:"+w.bare, false, RemoteOptions{})
	if !errors.Is(err, gitremote.ErrAuth) || errors.Is(err, gitremote.ErrOffline) || !strings.Contains(err.Error(), "known_hosts") {
		t.Errorf("unknown host: err = %v, want ErrAuth naming known_hosts", err)
	}
	if after, _ := os.ReadFile(kh); string(after) != string(before) {
		t.Errorf("known_hosts changed:\n%s", after)
	}
	// A changed key for the host (an impostor): refused by both.
	w.writeHome(t, ".ssh/known_hosts", fmt.Sprintf("[%s]:%d %s %s\n", srv.Host, srv.Port, f[0], f[1]))
	if err := w.agree(t, "mem:"+w.bare, false, RemoteOptions{}); !strings.Contains(err.Error(), "mismatch") {
		t.Errorf("changed host key: err = %v", err)
	}
	// @revoked on the server's own key: refused by both.
	w.writeHome(t, ".ssh/known_hosts", srv.KnownHostsLine()+"\n@revoked * "+srv.HostKey+"\n")
	w.agree(t, "mem:"+w.bare, false, RemoteOptions{})
}

func TestRealSSHCertAuthority(t *testing.T) {
	// known_hosts trusts a CA, not the host's key: the host's certificate is what is checked.
	w := newRealWorld(t)
	key := filepath.Join(t.TempDir(), "k")
	pub := testutil.SSHKeygen(t, key, "")
	w.sshKeys = []string{key}
	ca := filepath.Join(t.TempDir(), "host_ca")
	caPub := testutil.SSHKeygen(t, ca, "")
	srv := testutil.NewSSHServerCertified(t, ca, pub)
	f := strings.Fields(caPub)
	w.writeHome(t, ".ssh/known_hosts", fmt.Sprintf("@cert-authority [%s]:%d %s %s\n", srv.Host, srv.Port, f[0], f[1]))
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host mem\n  HostName %s\n  Port %d\n  IdentityFile %s\n", srv.Host, srv.Port, key))
	w.agree(t, "mem:"+w.bare, true, RemoteOptions{})
	// The CA revoked: refused by both.
	w.writeHome(t, ".ssh/known_hosts", fmt.Sprintf("@cert-authority [%s]:%d %s %s\n@revoked * %s %s\n", srv.Host, srv.Port, f[0], f[1], f[0], f[1]))
	w.agree(t, "mem:"+w.bare, false, RemoteOptions{})
}

// startAgent runs ssh-agent on sock in the foreground until the test ends and adds key.
func startAgent(t *testing.T, sock, key string) {
	t.Helper()
	testutil.NeedTool(t, "ssh-agent")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testutil.WaitFor(t, "ssh-agent socket", 10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }, nil)
	add := exec.Command("ssh-add", key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v\n%s", err, out)
	}
}

func TestRealSSHAgentAppearsLater(t *testing.T) {
	// The key is in no file memd or ssh would read: only an agent can offer it.
	w, srv, _ := newSSHWorld(t, filepath.Join(t.TempDir(), "agent_only"))
	key := w.sshKeys[0]
	w.sshKeys = nil
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host mem\n  HostName %s\n  Port %d\n", srv.Host, srv.Port))
	sock := filepath.Join(t.TempDir(), "agent.sock")
	t.Setenv("SSH_AUTH_SOCK", sock) // set as a service unit sets it, before the agent runs
	w.sock = sock
	if err := w.agree(t, "mem:"+w.bare, false, RemoteOptions{}); !errors.Is(err, gitremote.ErrAuth) {
		t.Errorf("no agent yet: err = %v, want ErrAuth", err)
	}
	startAgent(t, sock, key)
	w.agree(t, "mem:"+w.bare, true, RemoteOptions{})

	// With no SSH_AUTH_SOCK at all, the agent at $XDG_RUNTIME_DIR/ssh-agent.socket (systemd's
	// ssh-agent.socket) is found when it appears.
	t.Setenv("SSH_AUTH_SOCK", "")
	w.sock = filepath.Join(w.home, "run", "ssh-agent.socket")
	startAgent(t, w.sock, key)
	if err := w.memdPush(t, RemoteOptions{}); err != nil {
		t.Fatalf("agent at the systemd socket: %v", err)
	}
}

func TestRealSSHProxyCommand(t *testing.T) {
	// ProxyJump through the same sshd (sshd allows forwarding): memd hands the connection to
	// the system ssh, as OpenSSH does.
	w, srv, _ := newSSHWorld(t, filepath.Join(t.TempDir(), "k"))
	key := w.sshKeys[0]
	jumpCfg := filepath.Join(w.home, "jump_config")
	w.writeHome(t, "jump_config", fmt.Sprintf("Host jump\n  HostName %s\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  BatchMode yes\n",
		srv.Host, srv.Port, srv.User, key, filepath.Join(w.ssh, "known_hosts")))
	// The target's name is one no resolver knows: only the proxy's -W reaches it.
	w.writeHome(t, ".ssh/known_hosts", fmt.Sprintf("[%s]:%d %s\n[memd-behind-jump.invalid]:%d %s\n", srv.Host, srv.Port, srv.HostKey, srv.Port, srv.HostKey))
	w.writeHome(t, ".ssh/config", fmt.Sprintf("Host behind\n  HostName memd-behind-jump.invalid\n  Port %d\n  IdentityFile %s\n  ProxyCommand ssh -F %s -W %s:%%p jump\n",
		srv.Port, key, jumpCfg, srv.Host))
	w.agree(t, "behind:"+w.bare, true, RemoteOptions{})
}

// newHTTPRealWorld serves the remote over git http-backend behind basic auth (user alice,
// password token).
func newHTTPRealWorld(t *testing.T, token string, tls bool) (*realWorld, *testutil.GitHTTPServer) {
	t.Helper()
	w := newRealWorld(t)
	testutil.RunGit(t, w.bare, "config", "http.receivepack", "true")
	var srv *testutil.GitHTTPServer
	if tls {
		srv = testutil.NewGitHTTPSServer(t, filepath.Dir(w.bare), token)
	} else {
		srv = testutil.NewGitHTTPServer(t, filepath.Dir(w.bare), token)
	}
	srv.SetUser("alice")
	return w, srv
}

func TestRealHTTPCredentialHelperAndRotation(t *testing.T) {
	w, srv := newHTTPRealWorld(t, "tok-1", false)
	url := srv.URL(filepath.Base(w.bare))
	store := filepath.Join(w.home, ".git-credentials")
	w.writeHome(t, ".gitconfig", "[credential]\n\thelper = store\n")
	// No helper has it yet: git would prompt, memd never does; both fail.
	if err := w.agree(t, url, false, RemoteOptions{}); !errors.Is(err, gitremote.ErrAuth) {
		t.Errorf("no credential: err = %v, want ErrAuth", err)
	}
	line := fmt.Sprintf("http://alice:tok-1@%s\n", srv.Addr())
	w.writeHome(t, ".git-credentials", line)
	err := w.agree(t, url, true, RemoteOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The token is rotated on the server: both fail, and both tell the helper (git's reject
	// drops the stale line from the store), so the user's new token is what the next try
	// uses; the old one never reaches a message.
	srv.SetToken("tok-2")
	err = w.agree(t, url, false, RemoteOptions{})
	if !errors.Is(err, gitremote.ErrAuth) || strings.Contains(err.Error(), "tok-1") {
		t.Errorf("rotated: err = %v", err)
	}
	if b, _ := os.ReadFile(store); strings.Contains(string(b), "tok-1") {
		t.Errorf("the rejected credential is still stored: %q", b)
	}
	w.writeHome(t, ".git-credentials", fmt.Sprintf("http://alice:tok-2@%s\n", srv.Addr()))
	w.agree(t, url, true, RemoteOptions{})

	// memd's own sync.token_file overrides the helper, re-read on each attempt.
	tf := filepath.Join(w.home, "token")
	w.writeHome(t, "token", "tok-3\n")
	srv.SetToken("tok-3")
	if err := w.memdPush(t, RemoteOptions{TokenFile: tf}); err == nil {
		t.Fatal("token file with user x-access-token: the server wants alice")
	}
	srv.SetUser("")
	if err := w.memdPush(t, RemoteOptions{TokenFile: tf}); err != nil {
		t.Fatalf("token file: %v", err)
	}
	srv.SetToken("tok-4")
	if err := w.memdPush(t, RemoteOptions{TokenFile: tf}); !errors.Is(err, gitremote.ErrAuth) {
		t.Fatalf("token rotated on the server: %v", err)
	}
	w.writeHome(t, "token", "tok-4\n")
	if err := w.memdPush(t, RemoteOptions{TokenFile: tf}); err != nil || !w.pushedAll(t) {
		t.Fatalf("rotated token file: %v", err)
	}
}

func TestRealHTTPInsteadOf(t *testing.T) {
	w, srv := newHTTPRealWorld(t, "tok", false)
	w.writeHome(t, ".gitconfig", fmt.Sprintf("[url \"http://alice:tok@%s/git/\"]\n\tinsteadOf = https://memory.example.invalid/\n", srv.Addr()))
	w.agree(t, "https://memory.example.invalid/"+filepath.Base(w.bare), true, RemoteOptions{})
	// pushInsteadOf: fetch from one place, push to another (here: a push URL without the
	// password, which the server refuses; both refuse).
	w.writeHome(t, ".gitconfig", fmt.Sprintf("[url \"http://alice:tok@%s/git/\"]\n\tinsteadOf = https://memory.example.invalid/\n[url \"http://%s/git/\"]\n\tpushInsteadOf = https://memory.example.invalid/\n", srv.Addr(), srv.Addr()))
	err := w.agree(t, "https://memory.example.invalid/"+filepath.Base(w.bare), false, RemoteOptions{})
	if !errors.Is(err, gitremote.ErrAuth) || !strings.HasPrefix(err.Error(), "push") {
		t.Errorf("pushInsteadOf: err = %v, want a push ErrAuth", err)
	}
}

func TestRealHTTPProxyAndCAInfo(t *testing.T) {
	w, srv := newHTTPRealWorld(t, "tok", false)
	var hits atomic.Int64
	proxy := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !r.URL.IsAbs() {
			http.Error(rw, "not a proxy request", http.StatusBadRequest)
			return
		}
		r.RequestURI = ""
		resp, err := (&http.Transport{}).RoundTrip(r)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			rw.Header()[k] = v
		}
		rw.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(rw, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	url := strings.Replace(srv.URL(filepath.Base(w.bare)), "http://", "http://alice:tok@", 1)
	w.writeHome(t, ".gitconfig", "[http]\n\tproxy = "+proxy.URL+"\n")
	w.agree(t, url, true, RemoteOptions{})
	if hits.Load() == 0 {
		t.Fatal("http.proxy: nothing went through the proxy")
	}
	// NO_PROXY names the host: direct, for git (curl) and memd alike.
	t.Setenv("NO_PROXY", "127.0.0.1")
	n := hits.Load()
	w.agree(t, url, true, RemoteOptions{})
	if hits.Load() != n {
		t.Errorf("NO_PROXY: %d requests still went through the proxy", hits.Load()-n)
	}

	// https with a CA no system trusts: refused by both until http.sslCAInfo names it.
	w2, tsrv := newHTTPRealWorld(t, "tok", true)
	turl := strings.Replace(tsrv.URL(filepath.Base(w2.bare)), "https://", "https://alice:tok@", 1)
	w2.agree(t, turl, false, RemoteOptions{})
	ca := tsrv.CAFile(t, w2.home)
	w2.writeHome(t, ".gitconfig", "[http]\n\tsslCAInfo = "+ca+"\n")
	w2.agree(t, turl, true, RemoteOptions{})
}

// A pre-receive hook that answers as GitHub's push protection does.
const pushProtectionHook = `#!/bin/sh
cat >/dev/null
echo "error: GH013: Repository rule violations found for refs/heads/main." >&2
echo "- Push cannot contain secrets" >&2
exit 1
`

func TestRealPushRefusedByHook(t *testing.T) {
	for _, proto := range []string{"http", "ssh"} {
		t.Run(proto, func(t *testing.T) {
			var w *realWorld
			var url string
			if proto == "http" {
				var srv *testutil.GitHTTPServer
				w, srv = newHTTPRealWorld(t, "tok", false)
				url = strings.Replace(srv.URL(filepath.Base(w.bare)), "http://", "http://alice:tok@", 1)
			} else {
				var srv *testutil.SSHServer
				w, srv, _ = newSSHWorld(t, filepath.Join(t.TempDir(), "k"))
				url = fmt.Sprintf("ssh://%s:%d%s", srv.Host, srv.Port, w.bare)
				w.writeHome(t, ".ssh/config", fmt.Sprintf("Host %s\n  IdentityFile %s\n", srv.Host, w.sshKeys[0]))
			}
			hook := filepath.Join(w.bare, "hooks", "pre-receive")
			if err := os.WriteFile(hook, []byte(pushProtectionHook), 0o755); err != nil {
				t.Fatal(err)
			}
			before := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main"))
			err := w.agree(t, url, false, RemoteOptions{})
			if !errors.Is(err, gitremote.ErrPushRefused) || errors.Is(err, gitremote.ErrOffline) || errors.Is(err, gitremote.ErrPushRejected) {
				t.Fatalf("err = %v, want ErrPushRefused only", err)
			}
			for _, want := range []string{"GH013: Repository rule violations found", "pre-receive hook declined"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q lacks the remote's %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "tok") {
				t.Errorf("credential in the error: %v", err)
			}
			// The local commit stays; the remote did not move.
			if after := strings.TrimSpace(testutil.RunGit(t, w.bare, "rev-parse", "main")); after != before {
				t.Errorf("remote moved from %s to %s", before, after)
			}
			if ahead := strings.TrimSpace(testutil.RunGit(t, w.aDir, "rev-list", "--count", "origin/main..main")); ahead == "0" {
				t.Errorf("local commit lost: ahead %s", ahead)
			}
		})
	}
}
