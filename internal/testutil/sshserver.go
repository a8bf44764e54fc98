package testutil

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SSHServer is OpenSSH's sshd on a loopback port, started by the test with its own config,
// host key and authorized_keys: git over it runs git-upload-pack/git-receive-pack on bare
// repos by absolute path, as on any ssh git host.
//
// It logs in the user running the test, only with a public key (no passwords, no PAM, no
// keyboard-interactive). As root (CI containers) sshd needs its privilege-separation
// directory /run/sshd, which the helper creates when missing (the openssh-server package
// creates it at boot); StrictModes is off because the test's temp directories and keys are
// not laid out as a home directory is. A machine without sshd fails the test under CI=true
// and skips it otherwise.
type SSHServer struct {
	Host string // "127.0.0.1"
	Port int
	User string // who may log in: the user running the test
	// HostKey is the server's public host key line ("ssh-ed25519 AAAA...").
	HostKey string
	dir     string
	cmd     *exec.Cmd
}

// SSHD is the sshd binary.
const SSHD = "/usr/sbin/sshd"

// NeedTool skips the test (fails under CI=true) when path is not executable.
func NeedTool(t testing.TB, path string) {
	t.Helper()
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required under CI (install it in .ci/run): %v", path, err)
		}
		t.Skipf("%s not available: %v", path, err)
	}
}

// SSHKeygen makes an ed25519 key pair at path (and path.pub), with passphrase ("" =
// none), and returns the public key line.
func SSHKeygen(t testing.TB, path, passphrase string) string {
	t.Helper()
	NeedTool(t, "ssh-keygen")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "memd-test", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen %s: %v\n%s", path, err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(pub))
}

// NewSSHServer starts sshd accepting the public keys authorized (lines as in
// authorized_keys) and stops it when the test ends.
func NewSSHServer(t testing.TB, authorized ...string) *SSHServer {
	t.Helper()
	return newSSHServer(t, "", true, authorized)
}

// NewSSHServerV0 is NewSSHServer without "AcceptEnv GIT_PROTOCOL" (sshd's default, and many
// self-hosted servers'): git-upload-pack never sees GIT_PROTOCOL=version=2 and answers in
// protocol v0, every ref first.
func NewSSHServerV0(t testing.TB, authorized ...string) *SSHServer {
	t.Helper()
	return newSSHServer(t, "", false, authorized)
}

// NewSSHServerCertified is NewSSHServer presenting a host certificate signed by the CA key
// at caKey (for 127.0.0.1), for known_hosts' @cert-authority.
func NewSSHServerCertified(t testing.TB, caKey string, authorized ...string) *SSHServer {
	t.Helper()
	return newSSHServer(t, caKey, true, authorized)
}

func newSSHServer(t testing.TB, caKey string, acceptEnv bool, authorized []string) *SSHServer {
	t.Helper()
	NeedTool(t, SSHD)
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	s := &SSHServer{Host: "127.0.0.1", User: u.Username, dir: t.TempDir()}
	hostKey := filepath.Join(s.dir, "host_ed25519")
	s.HostKey = SSHKeygen(t, hostKey, "")
	if f := strings.Fields(s.HostKey); len(f) >= 2 {
		s.HostKey = f[0] + " " + f[1]
	}
	extra := ""
	if caKey != "" {
		if out, err := exec.Command("ssh-keygen", "-q", "-s", caKey, "-I", "memd-test-host", "-h", "-n", "127.0.0.1", hostKey+".pub").CombinedOutput(); err != nil {
			t.Fatalf("sign the host key: %v\n%s", err, out)
		}
		extra = "HostCertificate " + hostKey + "-cert.pub\n"
	}
	if acceptEnv {
		// As GitHub's and GitLab's servers: git's protocol v2 asks for it in the env.
		extra += "AcceptEnv GIT_PROTOCOL\n"
	}
	s.SetAuthorized(t, authorized...)
	if os.Geteuid() == 0 {
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatalf("sshd's privilege separation directory: %v", err)
		}
	}
	s.Port = FreePort(t)
	cfg := filepath.Join(s.dir, "sshd_config")
	conf := fmt.Sprintf(`ListenAddress %s:%d
HostKey %s
AuthorizedKeysFile %s
PidFile none
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowUsers %s
AllowTcpForwarding yes
MaxAuthTries 10
LogLevel VERBOSE
%s`, s.Host, s.Port, hostKey, filepath.Join(s.dir, "authorized_keys"), s.User, extra)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command(SSHD, "-D", "-f", cfg, "-E", filepath.Join(s.dir, "sshd.log"))
	if out, err := exec.Command(SSHD, "-t", "-f", cfg).CombinedOutput(); err != nil {
		t.Fatalf("sshd -t: %v\n%s", err, out)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start sshd: %v", err)
	}
	t.Cleanup(func() { _ = s.cmd.Process.Kill(); _ = s.cmd.Wait() })
	if !Poll(10*time.Second, s.answers) {
		t.Fatalf("sshd on %s:%d did not answer; log:\n%s", s.Host, s.Port, s.Log())
	}
	return s
}

// answers reports whether sshd sends its banner.
func (s *SSHServer) answers() bool {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// SetAuthorized replaces the accepted public keys (read by sshd at each login).
func (s *SSHServer) SetAuthorized(t testing.TB, keys ...string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Addr is host:port.
func (s *SSHServer) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// KnownHostsLine is the known_hosts line for the server, as ssh writes it for a
// non-default port.
func (s *SSHServer) KnownHostsLine() string {
	return fmt.Sprintf("[%s]:%d %s", s.Host, s.Port, s.HostKey)
}

// Transferred is what sshd logged of the connections that ended so far (LogLevel VERBOSE's
// "Transferred: sent N, received M bytes", one line per connection): the bytes it sent.
func (s *SSHServer) Transferred() []int64 {
	var out []int64
	for _, l := range strings.Split(s.Log(), "\n") {
		_, rest, ok := strings.Cut(l, "Transferred: sent ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.Fields(rest)[0], ","), 10, 64)
		if err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Logins is how many connections sshd let in so far ("Accepted publickey", logged before
// the client runs anything).
func (s *SSHServer) Logins() int { return strings.Count(s.Log(), "Accepted publickey for ") }

// Log is sshd's log so far (for failure messages).
func (s *SSHServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "sshd.log"))
	return string(b)
}

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
