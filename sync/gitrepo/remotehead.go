package gitrepo

// The cheap look at the remote branch (docs/ARCHITECTURE.md §11, sync.check_interval): the one ref memd
// follows, not the remote's whole advertisement, so that a look every ten seconds costs one
// small request whatever the number of refs on the remote.
//
// How each transport is asked (decided here; the README's "Decisions" names it too):
//   - http(s): git protocol v2 `ls-refs` with `ref-prefix refs/heads/<branch>`, spoken by memd
//     itself in one POST to <url>/git-upload-pack (`Git-Protocol: version=2`) on a kept-alive
//     connection. git's own client first GETs info/refs for the capability advertisement;
//     a v2 server in stateless-rpc mode (git http-backend, GitHub, GitLab) answers the command
//     without it, which halves the requests. `git -c protocol.version=2 ls-remote` instead
//     costs processes per look: 6.4 ms of CPU for a file remote (measured: 100 looks, 0.64 s
//     user+sys), and over https git-remote-https, a TLS handshake and two requests more,
//     against 0.1% of a core (10 ms) per 10 s for all of memd idle; memd's own look is one
//     request on a kept-alive connection (all of idle memd measured 0.017% of a core).
//   - file: the remote's ref is read from its directory (loose, then packed-refs), which is
//     what upload-pack would read, without starting one.
//   - ssh: upload-pack with GIT_PROTOCOL=version=2 sent as an ssh env request, then v2
//     `ls-refs` with the ref prefix (sshv2.go). OpenSSH's sshd passes GIT_PROTOCOL only where
//     AcceptEnv allows it (GitHub and GitLab do); a server that answers v0 sends every ref,
//     and the branch is read from that advertisement on the same connection.
//   - git://: go-git's upload-pack advertisement (protocol v0).
//
// A server that does not speak v2 over http gets ErrCheckUnsupported: the agent then keeps to
// full fetches every sync.pull_interval.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"

	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
)

// ErrCheckUnsupported: the remote cannot be looked at cheaply (an http server without git
// protocol v2); only full fetches tell what it holds.
var ErrCheckUnsupported = errors.New("remote does not answer a protocol v2 ls-refs")

// checkHTTP is the client of the looks and v2 fetches: one per process, so the connection
// to the remote is kept alive between looks (no new TCP or TLS handshake every
// check_interval). A remote with a proxy or CA of its own (git's http.proxy, http.sslCAInfo,
// GIT_SSL_CAINFO) gets a client of its own, kept the same way (v2Client).
var checkHTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}

var (
	v2ClientsMu sync.Mutex
	v2Clients   = map[string]*http.Client{}
)

// v2Client is the http client for ep's proxy, CA bundle and TLS verification, as go-git's
// own http transport applies them: the bundle's certificates added to the system's roots.
func v2Client(ep *transport.Endpoint) *http.Client {
	if ep.Proxy.URL == "" && len(ep.CaBundle) == 0 && !ep.InsecureSkipTLS {
		return checkHTTP
	}
	sum := sha256.Sum256(ep.CaBundle)
	key := fmt.Sprintf("%s|%x|%t", ep.Proxy.URL, sum, ep.InsecureSkipTLS)
	v2ClientsMu.Lock()
	defer v2ClientsMu.Unlock()
	if c := v2Clients[key]; c != nil {
		return c
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: ep.InsecureSkipTLS} //nolint:gosec // git's http.sslVerify false, the user's choice
	if len(ep.CaBundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		pool.AppendCertsFromPEM(ep.CaBundle)
		tr.TLSClientConfig.RootCAs = pool
	}
	if ep.Proxy.URL != "" {
		if pu, err := url.Parse(ep.Proxy.URL); err == nil {
			if ep.Proxy.Username != "" {
				pu.User = url.UserPassword(ep.Proxy.Username, ep.Proxy.Password)
			}
			tr.Proxy = http.ProxyURL(pu)
		}
	}
	c := &http.Client{Transport: tr}
	v2Clients[key] = c
	return c
}

// RemoteHead returns the hash the remote branch points at (zero: the remote has no such
// branch) with one small request. Errors are classified as a fetch's are (ErrOffline,
// ErrAuth), or ErrCheckUnsupported.
func (r *Repo) RemoteHead(ctx context.Context, ro RemoteOptions) (plumbing.Hash, error) {
	ro = ro.withDefaults()
	r.mu.Lock()
	hr := r.helperLocked(ro)
	rawURL, err := r.remoteURLLocked(ro.Remote)
	r.mu.Unlock()
	if hr != nil { // a remote helper's: `git ls-remote` (helperremote.go)
		return r.remoteHeadHelper(ctx, hr)
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	tgt, err := r.cachedTarget(ctx, ro, "fetch", rawURL)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("look at %s (%s): %w", ro.Remote, gitremote.RedactURL(rawURL), err)
	}
	if hr := r.helperAt(ro, tgt.URL, ""); hr != nil { // insteadOf made it one
		return r.remoteHeadHelper(ctx, hr)
	}
	ep, err := transport.NewEndpoint(tgt.URL)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("look at %s (%s): %w", ro.Remote, gitremote.RedactURL(rawURL), err)
	}
	tgt.Apply(ep)
	cctx, cancel := context.WithTimeout(ctx, ro.Timeout)
	defer cancel()
	ref := r.BranchRef().String()
	var h plumbing.Hash
	switch ep.Protocol {
	case "file":
		h, err = fileRemoteHead(ep.Path, ref)
	case "http", "https":
		h, err = httpLsRefs(cctx, ep, tgt.Auth, ref)
	case "ssh":
		h, err = sshRemoteHead(cctx, ep, tgt.Auth, ref)
	default:
		h, err = advertisedHead(cctx, ep, tgt.Auth, ref)
	}
	r.targetDone(ctx, "fetch", tgt, err, false)
	if errors.Is(err, ErrCheckUnsupported) {
		return plumbing.ZeroHash, fmt.Errorf("look at %s (%s): %w", ro.Remote, gitremote.RedactURL(rawURL), err)
	}
	if err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, ro.Timeout, err)
		}
		return plumbing.ZeroHash, gitremote.Classify("look at", ro.Remote, rawURL, err)
	}
	r.noteLook(ro, tgt.URL, h)
	return h, nil
}

// lookTTL is how long a resolved target is reused while git's config files stay as they
// were: resolving runs git's config and credential helpers (three processes, a few ms of CPU
// and ~150 context switches of memd's threads, measured with bench/liveremote), too much for
// every check_interval and, every 5 minutes as before, still half of an idle daemon's wakeups
// (issue 29: at most one a second); and on the path of every write to the other machines
// (A's fetch and push, B's fetch: nine processes). A changed config file (the repo's, the
// user's, the system's, or ~/.git-credentials, the store helper's), a changed token (memd's
// token file or variable) or a failed attempt resolves again at the next one, so a rotated
// token is asked for again at once; the hour covers what no file here shows (an include, a
// keychain).
const lookTTL = time.Hour

// lookFresh is how long a look's answer stands in for the fetch's own ls-refs: the sync the
// look kicked starts within milliseconds; a later fetch asks again.
const lookFresh = 3 * time.Second

// lookCache holds the resolved targets (https only: ssh looks up its agent on every attempt,
// as docs/ARCHITECTURE.md §11 says), per op: "fetch" for the looks and the fetches, "push"
// for the pushes (pushInsteadOf); and the head the last look saw move, for the fetch it kicks.
type lookCache struct {
	mu   sync.Mutex
	ents map[string]*targetEntry
	// moved is the head the last look found away from the tracking ref, at movedAt, on the
	// target URL movedURL (consumed by the next fetch, fetchOneRefLocked).
	moved    plumbing.Hash
	movedURL string
	movedAt  time.Time
}

// targetEntry is one op's resolved target, with what it was resolved under: the remote's
// URL and memd's token settings (key) and the stamp of git's config files.
type targetEntry struct {
	key, stamp string
	tgt        *gitremote.Target
	at         time.Time
}

// cachedTarget is ro.target for op, reused while nothing it was resolved from changed.
func (r *Repo) cachedTarget(ctx context.Context, ro RemoteOptions, op, rawURL string) (*gitremote.Target, error) {
	c := &r.look
	c.mu.Lock()
	defer c.mu.Unlock()
	key := rawURL + "\x00" + ro.TokenFile + "\x00" + ro.TokenEnv
	if ro.TokenEnv != "" {
		key += "=" + os.Getenv(ro.TokenEnv)
	}
	for _, v := range resolveEnv {
		key += "\x00" + os.Getenv(v)
	}
	stamp := gitconfig.Stamp(r.layout, ro.TokenFile)
	if e := c.ents[op]; e != nil && e.key == key && e.stamp == stamp && time.Since(e.at) < lookTTL {
		return e.tgt, nil
	}
	tgt, err := ro.target(ctx, r.dir, op, rawURL)
	if err != nil {
		return nil, err
	}
	if c.ents == nil {
		c.ents = map[string]*targetEntry{}
	}
	delete(c.ents, op)
	if strings.HasPrefix(tgt.URL, "http://") || strings.HasPrefix(tgt.URL, "https://") {
		c.ents[op] = &targetEntry{key: key, stamp: stamp, tgt: tgt, at: time.Now()}
	}
	return tgt, nil
}

// resolveEnv are the environment variables a resolve reads besides git's config files (the
// proxy and TLS settings git and curl take from the environment, and config given there): a
// cached target is reused only while they are as they were.
var resolveEnv = []string{
	"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
	"GIT_SSL_CAINFO", "GIT_SSL_NO_VERIFY", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
}

// targetDone reports an attempt to the credential helpers (Target.Done: approve on success,
// once per credential and process; reject on a 401) and drops op's cached target unless the
// attempt succeeded or keep says its failure was no fault of the target (a lost push race).
func (r *Repo) targetDone(ctx context.Context, op string, tgt *gitremote.Target, err error, keep bool) {
	if err != nil && !keep {
		c := &r.look
		c.mu.Lock()
		if e := c.ents[op]; e != nil && e.tgt == tgt {
			delete(c.ents, op)
		}
		c.mu.Unlock()
	}
	tgt.Done(ctx, err)
}

// noteLook keeps a look's head for the fetch it kicks when it is not where the tracking ref
// is (else clears it).
func (r *Repo) noteLook(ro RemoteOptions, url string, h plumbing.Hash) {
	t, err := r.TrackingHead(ro)
	c := &r.look
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && t != h {
		c.moved, c.movedURL, c.movedAt = h, url, time.Now()
	} else {
		c.movedURL = ""
	}
}

// lookedHead takes (once) the head a look just saw move on url, if it is fresh.
func (r *Repo) lookedHead(url string) (plumbing.Hash, bool) {
	c := &r.look
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.movedURL != "" && c.movedURL == url && time.Since(c.movedAt) < lookFresh
	c.movedURL = ""
	return c.moved, ok
}

// TrackingHead is the remote-tracking ref as the last fetch or push left it (zero: none).
func (r *Repo) TrackingHead(ro RemoteOptions) (plumbing.Hash, error) {
	ro = ro.withDefaults()
	h, err := gitstore.ReadRef(r.commonDir, r.trackingRef(ro).String())
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	return h, err
}

// FileRemote is where a remote that is a path on this machine keeps the branch: its git
// directory and the ref's name (agent/remotewatch.go watches them). ok is false for any
// other remote, one whose URL does not resolve, or a path that is not a repository.
func (r *Repo) FileRemote(ctx context.Context, ro RemoteOptions) (gitDir, ref string, ok bool) {
	ro = ro.withDefaults()
	r.mu.Lock()
	hr := r.helperLocked(ro)
	rawURL, err := r.remoteURLLocked(ro.Remote)
	r.mu.Unlock()
	if err != nil || hr != nil { // a helper's remote is git's to read, not a path of ours
		return "", "", false
	}
	tgt, err := r.cachedTarget(ctx, ro, "fetch", rawURL)
	if err != nil {
		return "", "", false
	}
	ep, err := transport.NewEndpoint(tgt.URL)
	if err != nil || ep.Protocol != "file" {
		return "", "", false
	}
	gitDir = fileRemoteGitDir(ep.Path)
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
		return "", "", false
	}
	return gitDir, r.BranchRef().String(), true
}

// fileRemoteGitDir is the git directory of the repository at path that holds its refs and
// objects: path itself (bare), or its .git's common dir (a .git directory or file).
func fileRemoteGitDir(path string) string {
	if l, err := gitlayout.Resolve(path); err == nil {
		return l.CommonDir
	}
	return path
}

// fileRemoteHead reads ref in the repository at path (a bare one, or a work tree's .git).
func fileRemoteHead(path, ref string) (plumbing.Hash, error) {
	gitDir := fileRemoteGitDir(path)
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("%s: %w", path, transport.ErrRepositoryNotFound)
	}
	h, err := gitstore.ReadRef(gitDir, ref)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	return h, err
}

// lsRefsRequest is the v2 command body: ls-refs of the one ref, nothing else asked.
func lsRefsRequest(ref string) []byte {
	var b bytes.Buffer
	pkt := func(s string) { fmt.Fprintf(&b, "%04x%s", len(s)+4, s) }
	pkt("command=ls-refs\n")
	pkt("agent=memd\n")
	b.WriteString("0001")
	pkt("ref-prefix " + ref + "\n")
	b.WriteString("0000")
	return b.Bytes()
}

// httpLsRefs asks a smart-HTTP remote for ref with one v2 ls-refs POST.
func httpLsRefs(ctx context.Context, ep *transport.Endpoint, auth transport.AuthMethod, ref string) (plumbing.Hash, error) {
	u := &url.URL{Scheme: ep.Protocol, Host: ep.Host, Path: strings.TrimSuffix(ep.Path, "/") + "/git-upload-pack"}
	if ep.Port != 0 {
		u.Host = ep.Host + ":" + strconv.Itoa(ep.Port)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(lsRefsRequest(ref)))
	if err != nil {
		return plumbing.ZeroHash, err
	}
	setV2Headers(req, ep, auth)
	resp, err := v2Client(ep).Do(req)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer resp.Body.Close()
	// What is left of a small answer is read so the connection goes back to the pool.
	defer func() { _, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) }()
	if err := v2Status(resp); err != nil {
		return plumbing.ZeroHash, err
	}
	return readLsRefs(resp.Body, ref)
}

// readLsRefs reads an ls-refs answer ("<oid> <name>[ attrs]" lines, then a flush) and
// returns ref's hash; lines for other refs (a server ignoring the prefix) are dropped.
func readLsRefs(rd io.Reader, ref string) (plumbing.Hash, error) {
	found := plumbing.ZeroHash
	br := bufio.NewReaderSize(rd, 4096)
	for {
		line, flush, err := readPkt(br)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("%w: %w", ErrCheckUnsupported, err)
		}
		if flush {
			return found, nil
		}
		s := strings.TrimSuffix(string(line), "\n")
		if strings.HasPrefix(s, "ERR ") {
			return plumbing.ZeroHash, fmt.Errorf("%w: remote says %q", ErrCheckUnsupported, strings.TrimPrefix(s, "ERR "))
		}
		oid, rest, ok := strings.Cut(s, " ")
		name, _, _ := strings.Cut(rest, " ")
		if !ok || len(oid) != 40 {
			return plumbing.ZeroHash, fmt.Errorf("%w: line %q", ErrCheckUnsupported, s)
		}
		if name == ref {
			found = plumbing.NewHash(oid)
		}
	}
}

// readPkt reads one pkt-line: its payload, or flush (0000; also a delim 0001 or a
// response-end 0002, which end an ls-refs answer as well).
func readPkt(br *bufio.Reader) ([]byte, bool, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return nil, false, err
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return nil, false, fmt.Errorf("bad pkt-line length %q", hdr[:])
	}
	if n < 4 {
		return nil, true, nil
	}
	buf := make([]byte, n-4)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, false, err
	}
	return buf, false, nil
}

// advertisedHead reads ref from the remote's upload-pack advertisement (git://).
func advertisedHead(ctx context.Context, ep *transport.Endpoint, auth transport.AuthMethod, ref string) (plumbing.Hash, error) {
	cl, err := client.NewClient(ep)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	sess, err := cl.NewUploadPackSession(ep, auth)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if h, ok := ar.References[ref]; ok {
		return h, nil
	}
	return plumbing.ZeroHash, nil
}
