package gitremote

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// Target is how one attempt (one fetch or one push) reaches a remote, resolved as git and
// OpenSSH resolve it (docs/ARCHITECTURE.md §11 "Remotes as git reaches them"): the URL after
// url.<base>.insteadOf, the credentials, the proxy and CA bundle. Resolve it again for the
// next attempt (keys, agents, helpers and config are re-read each time), and call Done
// with the attempt's outcome.
type Target struct {
	URL             string // the URL to dial (rewritten); log it only through RedactURL
	Auth            transport.AuthMethod
	Proxy           transport.ProxyOptions
	CABundle        []byte
	InsecureSkipTLS bool

	cred *helperCred
	ssh  *sshAuth
}

// Apply sets the transport options of t on an endpoint opened by hand (a receive-pack
// session outside go-git's Remote).
func (t *Target) Apply(ep *transport.Endpoint) {
	ep.Proxy, ep.CaBundle, ep.InsecureSkipTLS = t.Proxy, t.CABundle, t.InsecureSkipTLS
}

// Done reports the attempt's outcome to git's credential helpers (approve on success,
// reject on 401, as git does) and closes the agent connection.
func (t *Target) Done(ctx context.Context, err error) {
	if t == nil {
		return
	}
	if t.ssh != nil {
		t.ssh.Close()
	}
	if t.cred == nil {
		return
	}
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate):
		t.cred.approve(ctx)
	case errors.Is(err, transport.ErrAuthenticationRequired):
		t.cred.reject(ctx)
	}
}

// Resolve is the Target for op ("fetch" or "push") on rawURL from the repo at dir (whose
// git config counts; "" = none beyond the user's). memd's own keys (c's fields) override
// what git and ssh would find; nothing here can prompt.
func (c Credentials) Resolve(ctx context.Context, dir, op, rawURL string) (*Target, error) {
	u, err := rewriteURL(ctx, dir, op, rawURL)
	if err != nil {
		return nil, err
	}
	ep, err := transport.NewEndpoint(u)
	if err != nil {
		// The parse error quotes the URL (or a piece of its password, "invalid URL escape
		// %rd"): with credentials in it, say only that it does not parse.
		if red := RedactURL(u); red != u {
			return nil, &remoteError{msg: fmt.Sprintf("remote URL %s: not a valid URL (its credentials are not shown)", red)}
		}
		return nil, fmt.Errorf("remote URL %s: %w", u, err)
	}
	t := &Target{URL: u}
	switch ep.Protocol {
	case "http", "https":
		err = c.resolveHTTP(ctx, dir, u, ep, t)
	case "ssh":
		err = c.resolveSSH(u, ep, t)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (c Credentials) resolveHTTP(ctx context.Context, dir, raw string, ep *transport.Endpoint, t *Target) error {
	pu, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("remote URL %s: not a valid URL", RedactURL(raw))
	}
	hc, err := readHTTPConfig(ctx, dir, raw)
	if err != nil {
		return err
	}
	if hc.CAInfo != "" {
		if t.CABundle, err = os.ReadFile(hc.CAInfo); err != nil {
			return fmt.Errorf("http.sslCAInfo %s: %w", hc.CAInfo, err)
		}
	}
	t.InsecureSkipTLS = !hc.SSLVerify
	if p := httpProxyFor(pu, hc.Proxy); p != "" {
		t.Proxy = transport.ProxyOptions{URL: p}
	}
	tok, err := c.readToken()
	switch {
	case err != nil:
		return err
	case tok != "": // memd's own token: an override
		user := ep.User
		if user == "" {
			user = "x-access-token"
		}
		t.Auth = &githttp.BasicAuth{Username: user, Password: tok}
	case ep.User != "" && ep.Password != "": // credentials in the URL itself
		t.Auth = &githttp.BasicAuth{Username: ep.User, Password: ep.Password}
	default:
		clean := *pu
		clean.User = nil
		if ep.User != "" {
			clean.User = url.User(ep.User)
		}
		if t.cred = fillCredential(ctx, dir, &clean); t.cred != nil {
			t.Auth = &githttp.BasicAuth{Username: t.cred.user, Password: t.cred.pw}
		}
	}
	return nil
}

func (c Credentials) resolveSSH(raw string, ep *transport.Endpoint, t *Target) error {
	port := 0 // scp-like remotes have none; go-git's 22 there is its default, not the user's
	if strings.Contains(raw, "://") {
		if pu, err := url.Parse(raw); err == nil && pu.Port() != "" {
			port, _ = strconv.Atoi(pu.Port())
		}
	}
	h, err := resolveSSH(ep.Host, ep.User, port)
	if err != nil {
		return err
	}
	a := &sshAuth{host: h, knownHosts: h.KnownHosts}
	if c.SSHKey != "" {
		if _, err := os.Stat(c.SSHKey); err != nil {
			return fmt.Errorf("ssh key %s: %w", c.SSHKey, err)
		}
		a.keyFiles = []string{c.SSHKey}
	}
	if c.KnownHosts != "" {
		if _, err := os.Stat(c.KnownHosts); err != nil {
			return fmt.Errorf("known_hosts %s: %w", c.KnownHosts, err)
		}
		a.knownHosts = []string{c.KnownHosts}
	}
	t.Auth, t.ssh = a, a
	return nil
}

// AuthFor is the auth method alone for rawURL (Resolve without a repo).
func (c Credentials) AuthFor(rawURL string) (transport.AuthMethod, error) {
	t, err := c.Resolve(context.Background(), "", "fetch", rawURL)
	if err != nil {
		return nil, err
	}
	return t.Auth, nil
}
