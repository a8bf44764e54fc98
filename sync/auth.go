package sync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// ErrOffline wraps network and transport failures (remote unreachable,
// connection refused or reset, timeouts): the caller goes to state offline
// and retries with Backoff. Local commits go on.
var ErrOffline = errors.New("remote unreachable")

// ErrAuth wraps authentication and authorization failures (HTTP 401/403,
// ssh auth refused, unknown host key). Retrying does not help; a person
// must fix the credentials.
var ErrAuth = errors.New("remote authentication failed")

// ErrUnrelatedHistory is returned when the remote branch shares no history
// with the local one. memd never merges such histories silently.
var ErrUnrelatedHistory = errors.New("remote history is unrelated to local history")

// ErrPushRejected says the remote refused a push because its branch moved
// meanwhile (another machine pushed first): contention, not an outage. Sync
// fetches, merges and pushes again; it returns this only when every round
// lost the race.
var ErrPushRejected = errors.New("push rejected: the remote branch moved meanwhile")

// urlUserinfo matches the userinfo part of scheme://user:pass@host URLs.
var urlUserinfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/@\s"'<>]*@`)

// urlSecretParam matches query parameters that commonly carry credentials.
var urlSecretParam = regexp.MustCompile(`(?i)([?&](?:access_token|token|private_token|password|passwd|secret|key|auth|sig|signature)=)[^&\s"'<>#]*`)

// RedactURL strips credentials from every URL inside s: the userinfo of
// scheme://user:token@host URLs and the values of token-like query
// parameters. Linear in len(s) (Go's regexp is an automaton).
func RedactURL(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "=") {
		return s
	}
	s = urlUserinfo.ReplaceAllString(s, "$1")
	s = urlSecretParam.ReplaceAllString(s, "${1}REDACTED")
	return s
}

// remoteError is what every network operation returns: a message already
// redacted, and a chain that exposes only the sentinel kinds (ErrOffline,
// ErrAuth, context errors, ...), never the raw transport error whose text
// might carry a credential.
type remoteError struct {
	msg   string
	kinds []error
}

func (e *remoteError) Error() string   { return e.msg }
func (e *remoteError) Unwrap() []error { return e.kinds }

// classifyRemoteErr wraps a transport error for op ("fetch", "push") on
// the named remote: ErrAuth, ErrOffline or plain, redacted.
func classifyRemoteErr(op, remote, rawURL string, err error) error {
	if err == nil {
		return nil
	}
	var kinds []error
	switch {
	case isAuthErr(err):
		kinds = append(kinds, ErrAuth)
	case isOfflineErr(err):
		kinds = append(kinds, ErrOffline)
	case op == "push" && isRaceRejection(err):
		kinds = append(kinds, ErrPushRejected)
	}
	for _, k := range []error{context.DeadlineExceeded, context.Canceled, transport.ErrRepositoryNotFound, transport.ErrEmptyRemoteRepository} {
		if errors.Is(err, k) {
			kinds = append(kinds, k)
		}
	}
	what := remote
	if rawURL != "" {
		what = fmt.Sprintf("%s (%s)", remote, rawURL)
	}
	msg := fmt.Sprintf("%s %s: %v", op, what, err)
	if len(kinds) > 0 && (kinds[0] == ErrAuth || kinds[0] == ErrOffline) && !strings.Contains(err.Error(), kinds[0].Error()) {
		msg = fmt.Sprintf("%s %s: %v: %v", op, what, kinds[0], err)
	}
	return &remoteError{msg: RedactURL(msg), kinds: kinds}
}

func isAuthErr(err error) bool {
	if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrInvalidAuthMethod) {
		return true
	}
	var he *githttp.Err
	if errors.As(err, &he) && he.Response != nil && (he.Response.StatusCode == 401 || he.Response.StatusCode == 403) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "unable to authenticate") || strings.Contains(s, "knownhosts:") ||
		strings.Contains(s, "key mismatch") || strings.Contains(s, "Permission denied (publickey")
}

// isRaceRejection: the remote answered and refused the update because the
// branch is not where the push expected it (someone pushed first), as
// opposed to a refusal that will not change by retrying (a hook, a full disk).
func isRaceRejection(err error) bool {
	if errors.Is(err, git.ErrForceNeeded) {
		return true
	}
	s := err.Error()
	// A ref lock refused for lack of space is not a race: only "File exists"
	// (another push holds it) and "but expected" (it moved) are. git's
	// receive-pack reports a lost race on the ref update as just "failed to
	// update ref"; a full disk fails the unpack before that (and the agent
	// stops treating a rejection as contention after a few in a row).
	for _, frag := range []string{"non-fast-forward", "fetch first", "but expected", "File exists",
		"reference has changed concurrently", "stale info", "failed to update ref"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

func isOfflineErr(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ETIMEDOUT) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return true
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return true
	}
	var he *githttp.Err
	if errors.As(err, &he) && he.Response != nil && he.Response.StatusCode >= 500 {
		return true // the server is up but failing: retry later
	}
	s := err.Error()
	for _, frag := range []string{"connection refused", "connection reset", "no route to host", "i/o timeout",
		"network is unreachable", "no such host", "broken pipe", "EOF", "Could not resolve host"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

// readToken returns the https token: the env var first, else the file
// (trimmed). Both are re-read on every attempt so a rotated token is used
// at once. A configured file that cannot be read is an error naming it.
func (ro RemoteOptions) readToken() (string, error) {
	if ro.TokenEnv != "" {
		if v := strings.TrimSpace(os.Getenv(ro.TokenEnv)); v != "" {
			return v, nil
		}
	}
	if ro.TokenFile != "" {
		b, err := os.ReadFile(ro.TokenFile)
		if err != nil {
			return "", fmt.Errorf("token file %s: %w", ro.TokenFile, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return "", nil
}

// authFor picks the go-git auth method for a remote URL. Nothing here can
// prompt: go-git never asks on a terminal, and ssh without a key or agent
// simply fails with ErrAuth.
func (ro RemoteOptions) authFor(rawURL string) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(rawURL)
	if err != nil {
		return nil, fmt.Errorf("remote URL %s: %w", RedactURL(rawURL), err)
	}
	switch ep.Protocol {
	case "http", "https":
		tok, err := ro.readToken()
		if err != nil {
			return nil, err
		}
		if tok == "" {
			if ep.User != "" { // credentials in the URL itself
				return &githttp.BasicAuth{Username: ep.User, Password: ep.Password}, nil
			}
			return nil, nil
		}
		user := ep.User
		if user == "" {
			user = "x-access-token"
		}
		return &githttp.BasicAuth{Username: user, Password: tok}, nil
	case "ssh":
		user := ep.User
		if user == "" {
			user = "git"
		}
		var auth interface {
			transport.AuthMethod
		}
		if ro.SSHKey != "" {
			pk, err := gitssh.NewPublicKeysFromFile(user, ro.SSHKey, "")
			if err != nil {
				return nil, fmt.Errorf("ssh key %s: %w", ro.SSHKey, err)
			}
			if ro.KnownHosts != "" {
				cb, err := gitssh.NewKnownHostsCallback(ro.KnownHosts)
				if err != nil {
					return nil, fmt.Errorf("known_hosts %s: %w", ro.KnownHosts, err)
				}
				pk.HostKeyCallback = cb
			}
			auth = pk
		} else {
			ag, err := gitssh.NewSSHAgentAuth(user)
			if err != nil {
				return nil, fmt.Errorf("ssh agent for %s: %w: %w", RedactURL(rawURL), ErrAuth, err)
			}
			if ro.KnownHosts != "" {
				cb, err := gitssh.NewKnownHostsCallback(ro.KnownHosts)
				if err != nil {
					return nil, fmt.Errorf("known_hosts %s: %w", ro.KnownHosts, err)
				}
				ag.HostKeyCallback = cb
			}
			auth = ag
		}
		return auth, nil
	default: // file:// and local paths
		return nil, nil
	}
}
