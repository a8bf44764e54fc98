package gitremote

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// sshDialTimeout bounds the TCP connect (or the proxy command's start) of one attempt;
// the whole operation is bounded by the caller's context.
const sshDialTimeout = 30 * time.Second

func init() {
	// memd resolves ~/.ssh/config itself (resolveSSH, re-read on every attempt, $HOME's);
	// go-git must not apply its own cached reading of it a second time to the host that
	// resolution already produced.
	gitssh.DefaultSSHConfig = nil
	client.InstallProtocol("ssh", sshTransport{inner: gitssh.NewClient(nil)})
}

// sshTransport is go-git's ssh transport with the endpoint replaced by what sshAuth
// resolved (HostName, Port, the ProxyCommand as a proxy dialer), so the remote URL keeps
// its alias and its path exactly as written (scp-like paths stay relative).
type sshTransport struct{ inner transport.Transport }

func (t sshTransport) NewUploadPackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.UploadPackSession, error) {
	return t.inner.NewUploadPackSession(resolvedEndpoint(ep, auth), auth)
}

func (t sshTransport) NewReceivePackSession(ep *transport.Endpoint, auth transport.AuthMethod) (transport.ReceivePackSession, error) {
	return t.inner.NewReceivePackSession(resolvedEndpoint(ep, auth), auth)
}

func resolvedEndpoint(ep *transport.Endpoint, auth transport.AuthMethod) *transport.Endpoint {
	a, ok := auth.(*sshAuth)
	if !ok {
		return ep
	}
	cp := *ep
	cp.Host, cp.Port, cp.User = a.host.HostName, a.host.Port, a.host.User
	if a.host.ProxyCommand != "" {
		cp.Proxy = transport.ProxyOptions{URL: proxyCommandURL(a.host.ProxyCommand)}
	}
	return &cp
}

// sshAuth is one attempt's ssh credentials, as OpenSSH would pick them: the agent (dialled
// now, from SSH_AUTH_SOCK or a well-known socket), then the identity files; host keys
// checked against known_hosts strictly.
type sshAuth struct {
	host       sshHost
	keyFiles   []string   // sync.ssh_key when set: the only key, no agent
	knownHosts []string   // the files to check host keys against
	agentConns []net.Conn // one per connection of the attempt (a push may open two)
}

func (a *sshAuth) Name() string { return gitssh.PublicKeysCallbackName }
func (a *sshAuth) String() string {
	return fmt.Sprintf("user: %s, name: %s", a.host.User, a.Name())
}

// Close ends the agent connection this attempt opened.
func (a *sshAuth) Close() {
	for _, c := range a.agentConns {
		_ = c.Close()
	}
	a.agentConns = nil
}

// ClientConfig is called by go-git once per connection.
func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	signers, err := a.signers()
	if err != nil {
		return nil, err
	}
	hkcb, algos, err := a.hostKeyCheck()
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{
		User: a.host.User,
		Auth: []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			if len(signers) == 0 {
				return nil, errors.New("unable to authenticate: no ssh key (no agent with keys, no readable identity file)")
			}
			return signers, nil
		})},
		HostKeyCallback:   hkcb,
		HostKeyAlgorithms: algos,
		Timeout:           sshDialTimeout,
	}, nil
}

// signers: the agent's keys (only those of the identity files with IdentitiesOnly), then
// the identity files that load without a passphrase (memd never prompts; a key with one
// must be in the agent).
func (a *sshAuth) signers() ([]ssh.Signer, error) {
	files := a.host.IdentityFiles
	only := a.host.IdentitiesOnly
	if len(a.keyFiles) > 0 {
		files, only = a.keyFiles, true
	}
	var out []ssh.Signer
	wanted := map[string]bool{}
	var fileSigners []ssh.Signer
	for _, f := range files {
		s, pub, err := loadIdentity(f)
		if err != nil && len(a.keyFiles) > 0 {
			return nil, fmt.Errorf("ssh key %s: %w", f, err)
		}
		if pub != nil {
			wanted[string(pub.Marshal())] = true
		}
		if s != nil {
			fileSigners = append(fileSigners, s)
		}
	}
	if len(a.keyFiles) == 0 {
		for _, s := range a.agentSigners() {
			if !only || wanted[string(s.PublicKey().Marshal())] {
				out = append(out, s)
			}
		}
	}
	return append(out, fileSigners...), nil
}

// loadIdentity reads a private key file. A missing file is no key (nil, nil, nil); one
// with a passphrase gives only its public key (from the key or its .pub), for matching the
// agent's.
func loadIdentity(path string) (ssh.Signer, ssh.PublicKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	s, err := ssh.ParsePrivateKey(b)
	if err == nil {
		return s, s.PublicKey(), nil
	}
	var pm *ssh.PassphraseMissingError
	if errors.As(err, &pm) {
		pub := pm.PublicKey
		if pub == nil {
			if pb, rerr := os.ReadFile(path + ".pub"); rerr == nil {
				pub, _, _, _, _ = ssh.ParseAuthorizedKey(pb)
			}
		}
		return nil, pub, fmt.Errorf("%s needs a passphrase: memd never asks for one (add the key to the ssh agent)", path)
	}
	return nil, nil, err
}

// agentSocket is where the agent listens now: SSH_AUTH_SOCK as the process sees it at this
// attempt, else the sockets desktop sessions and systemd's ssh-agent.socket use, so an
// agent that started after memd is found.
func agentSocket() string {
	if s := os.Getenv("SSH_AUTH_SOCK"); s != "" {
		return s
	}
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" {
		return ""
	}
	for _, p := range []string{"ssh-agent.socket", "gcr/ssh", "keyring/ssh", "openssh_agent"} {
		s := filepath.Join(rt, p)
		if fi, err := os.Stat(s); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return s
		}
	}
	return ""
}

// agentSigners dials the agent (if any) and lists its keys; no agent is no keys.
func (a *sshAuth) agentSigners() []ssh.Signer {
	sock := agentSocket()
	if sock == "" {
		return nil
	}
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return nil
	}
	a.agentConns = append(a.agentConns, c)
	ss, err := agent.NewClient(c).Signers()
	if err != nil {
		return nil
	}
	return ss
}

// hostKeyCheck is the strict known_hosts check: a host whose key is not listed is refused
// and nothing is ever written; hashed entries, @cert-authority and @revoked are read as
// OpenSSH reads them (x/crypto's knownhosts, through skeema/knownhosts for the algorithms
// to ask the server for).
func (a *sshAuth) hostKeyCheck() (ssh.HostKeyCallback, []string, error) {
	var files []string
	for _, f := range a.knownHosts {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	where := strings.Join(a.knownHosts, ", ")
	hostPort := net.JoinHostPort(a.host.HostName, strconv.Itoa(a.host.Port))
	if len(files) == 0 {
		return func(string, net.Addr, ssh.PublicKey) error {
			return fmt.Errorf("knownhosts: host key of %s not checked: no known_hosts file (%s); memd never adds one", hostPort, where)
		}, nil, nil
	}
	db, err := knownhosts.NewDB(files...)
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts %s: %w", strings.Join(files, ", "), err)
	}
	cb := db.HostKeyCallback()
	check := func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(host, remote, key)
		switch {
		case err == nil:
			return nil
		case knownhosts.IsHostUnknown(err):
			return fmt.Errorf("knownhosts: host %s is not in known_hosts (%s): memd never adds one; check its key and add it (ssh %s once, or ssh-keyscan)", host, where, a.host.Alias)
		case knownhosts.IsHostKeyChanged(err):
			return fmt.Errorf("knownhosts: key mismatch: the host key of %s differs from known_hosts (%s): refused", host, where)
		}
		return fmt.Errorf("knownhosts: %s: %w", host, err)
	}
	return check, db.HostKeyAlgorithms(hostPort), nil
}
