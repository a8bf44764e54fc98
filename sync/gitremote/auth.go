// Package gitremote is what memd knows about a git remote apart from any work tree
// (docs/ARCHITECTURE.md §4 and §11 "Remotes as git reaches them"): how one attempt
// reaches a remote URL, resolved as git and OpenSSH resolve it (Target: ~/.ssh/config, the
// default keys, the agent dialled again each time, strict known_hosts, git's
// url.<base>.insteadOf, proxies, CA files and credential helpers; memd's own keys as
// overrides; never a prompt), the kinds a remote's failure is sorted into (ErrOffline,
// ErrAuth, ErrPushRejected, ErrPushRefused), the redaction that keeps credentials out of
// every message, and the backoff between attempts; and the history walks that need only
// an object store: the push protocol (push.go) and the merge base (mergebase.go).
// Fetching, merging and the sync round, which need the work tree, are sync/gitrepo's
// (remote.go).
package gitremote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// ErrOffline wraps network and transport failures (remote unreachable,
// connection refused or reset, timeouts): the caller goes to state offline
// and retries with Backoff. Local commits go on.
var ErrOffline = errors.New("remote unreachable")

// ErrAuth wraps authentication and authorization failures (HTTP 401/403,
// ssh auth refused, unknown host key). Retrying does not help; a person
// must fix the credentials.
var ErrAuth = errors.New("remote authentication failed")

// secretParams are query parameters that commonly carry credentials; their values are
// redacted wherever a URL's query appears.
var secretParams = map[string]bool{"access_token": true, "token": true, "private_token": true, "password": true,
	"passwd": true, "secret": true, "key": true, "auth": true, "sig": true, "signature": true}

// ErrPushRejected says the remote refused a push because its branch moved
// meanwhile (another machine pushed first): contention, not an outage. Sync
// fetches, merges and pushes again; it returns this only when every round
// lost the race.
var ErrPushRejected = errors.New("push rejected: the remote branch moved meanwhile")

// RedactURL strips credentials from every URL inside s: the userinfo of
// scheme://user:token@host URLs, the password of scp-like `user:pass@host:path`
// remotes, and the values of token-like query parameters. Each whitespace-separated
// word is taken apart the way git and net/url take a URL apart (authority up to the
// first '/', userinfo up to its last '@'), never by a pattern, so a password holding
// `'`, `@`, `:`, `%`, `?` or `#` goes whole. Linear in len(s).
func RedactURL(s string) string {
	if !strings.ContainsAny(s, "@=") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && !isURLSpace(s[j]) {
			j++
		}
		b.WriteString(redactWord(s[i:j]))
		for i = j; i < len(s) && isURLSpace(s[i]); i++ {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func isURLSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// redactWord redacts one word (no whitespace) of a message.
func redactWord(w string) string {
	if !strings.Contains(w, "://") {
		return redactQuery(redactSCP(w))
	}
	var b strings.Builder
	for {
		k := strings.Index(w, "://")
		if k < 0 {
			b.WriteString(w)
			break
		}
		b.WriteString(w[:k+3])
		rest := w[k+3:]
		// The authority ends at the first '/'. net/url cuts '?' and '#' first, which would
		// leave a password holding them in the "host"; git does not, and neither does this.
		auth := rest
		if slash := strings.IndexByte(rest, '/'); slash >= 0 {
			auth = rest[:slash]
		}
		// The next URL in the same word starts a new authority.
		if next := strings.Index(auth, "://"); next >= 0 {
			auth = auth[:next]
		}
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			rest = rest[at+1:]
		}
		// Query parameters up to the next URL in the word.
		upto := len(rest)
		if next := strings.Index(rest, "://"); next >= 0 {
			upto = next
			for upto > 0 && isSchemeChar(rest[upto-1]) {
				upto--
			}
		}
		b.WriteString(redactQuery(rest[:upto]))
		w = rest[upto:]
	}
	return b.String()
}

func isSchemeChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// redactSCP drops the password of an scp-like remote, `user:pass@host:path` (git's rule: a
// ':' after the host and before any '/'). The user name stays: ssh has no token users.
func redactSCP(w string) string {
	head := w
	if slash := strings.IndexByte(w, '/'); slash >= 0 {
		head = w[:slash]
	}
	at := strings.LastIndexByte(head, '@')
	if at <= 0 || strings.IndexByte(head[at+1:], ':') <= 0 {
		return w
	}
	colon := strings.IndexByte(head[:at], ':')
	if colon < 0 {
		return w // user@host:path: no secret
	}
	return w[:colon] + w[at:]
}

// redactQuery replaces the values of secretParams in a URL query inside w (from its '?'),
// keys compared after URL unescaping and case folding.
func redactQuery(w string) string {
	q := strings.IndexByte(w, '?')
	if q < 0 || !strings.Contains(w[q:], "=") {
		return w
	}
	query, frag := w[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	pairs := strings.Split(query, "&")
	for i, p := range pairs {
		key, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		k, err := url.QueryUnescape(key)
		if err != nil {
			k = key
		}
		if secretParams[strings.ToLower(k)] {
			pairs[i] = key + "=REDACTED"
		}
	}
	return w[:q+1] + strings.Join(pairs, "&") + frag
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

// Classify wraps a transport error for op ("fetch", "push") on the named
// remote: ErrAuth, ErrOffline, ErrPushRejected, ErrPushRefused or plain, redacted.
func Classify(op, remote, rawURL string, err error) error {
	if err == nil {
		return nil
	}
	var kinds []error
	var refusal *Refusal
	switch {
	case op == "push" && errors.As(err, &refusal):
		// The remote answered: a lost race, or a refusal of its own (never offline, even
		// when a hook's words look like a network error).
		if isRaceRejection(errors.New(refusal.Status)) {
			kinds = append(kinds, ErrPushRejected)
		} else {
			kinds = append(kinds, ErrPushRefused)
		}
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
	if len(kinds) > 0 && (kinds[0] == ErrAuth || kinds[0] == ErrOffline || kinds[0] == ErrPushRefused) && !strings.Contains(err.Error(), kinds[0].Error()) {
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
	// The second line: the words of ssh and curl (a remote helper's git, sync/remotehelper).
	for _, frag := range []string{"connection refused", "connection reset", "no route to host", "i/o timeout",
		"network is unreachable", "no such host", "broken pipe", "EOF", "Could not resolve host",
		"Connection refused", "Connection reset", "Connection timed out", "No route to host", "Network is unreachable",
		"Could not resolve hostname", "Couldn't connect to server", "Failed to connect to", "Temporary failure in name resolution"} {
		if strings.Contains(s, frag) {
			return true
		}
	}
	return false
}

// readToken returns the https token: the env var first, else the file
// (trimmed). Both are re-read on every attempt so a rotated token is used
// at once. A configured file that cannot be read is an error naming it.
func (ro Credentials) readToken() (string, error) {
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

// Credentials are what a remote is authenticated with (config sync.ssh_key,
// sync.known_hosts, sync.token_env, sync.token_file); empty fields are unset.
type Credentials struct {
	SSHKey, KnownHosts  string
	TokenEnv, TokenFile string
}
