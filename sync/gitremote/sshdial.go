package gitremote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"
	"golang.org/x/net/proxy"
)

// ErrNotSSH: DialSSH was given a target that is not an ssh one.
var ErrNotSSH = errors.New("not an ssh target")

// DialSSH connects to the ssh server of ep with auth (a Target's, for an ssh URL) the way
// go-git's ssh transport does for memd's fetches and pushes: the host, port, user and
// ProxyCommand that ~/.ssh/config resolved (resolvedEndpoint), the Target's keys and its
// strict known_hosts check (sshAuth.ClientConfig), a direct dial otherwise through
// ALL_PROXY as go-git's. The caller runs its own commands on the client (the protocol v2
// look and fetch, sync/gitrepo/sshv2.go) and closes it. ctx bounds the dial and the handshake.
func DialSSH(ctx context.Context, ep *transport.Endpoint, auth transport.AuthMethod) (*ssh.Client, error) {
	a, ok := auth.(*sshAuth)
	if !ok {
		return nil, ErrNotSSH
	}
	rep := resolvedEndpoint(ep, auth)
	cfg, err := a.ClientConfig()
	if err != nil {
		return nil, err
	}
	port := rep.Port
	if port <= 0 {
		port = 22
	}
	addr := net.JoinHostPort(rep.Host, strconv.Itoa(port))
	dctx, cancel := context.WithTimeout(ctx, sshDialTimeout)
	defer cancel()
	var conn net.Conn
	if a.host.ProxyCommand != "" {
		conn, err = commandDialer{cmd: a.host.ProxyCommand}.DialContext(dctx, "tcp", addr)
	} else {
		conn, err = proxy.Dial(dctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	// The handshake has no context of its own: closing the connection ends it.
	stop := context.AfterFunc(dctx, func() { _ = conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if !stop() {
		if err == nil {
			_ = c.Close()
		}
		return nil, fmt.Errorf("ssh handshake with %s: %w", addr, dctx.Err())
	}
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// UploadPackCommand is the command an ssh git server is asked to run for a fetch, as
// go-git and git send it: git-upload-pack and the URL's path in single quotes.
func UploadPackCommand(path string) string {
	return transport.UploadPackServiceName + " " + shellQuote(path)
}
