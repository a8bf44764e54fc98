package gitrepo

// Protocol v2 over ssh (docs/ARCHITECTURE.md §11, issues 27 and 29): the look and the one-ref fetch ask
// the server to run git-upload-pack with GIT_PROTOCOL=version=2 in its environment (an
// ssh "env" request, which OpenSSH's sshd honours only where AcceptEnv lists
// GIT_PROTOCOL, as GitHub's and GitLab's servers do; git's own ssh sends it the same way
// with SendEnv). A server that answers v2 gets `ls-refs` with the branch as ref prefix and
// `fetch` with one want, each on its own session (channel) of one ssh connection. One that
// answers v0 (its first line is a ref, not "version 2") is read as before: the look takes
// the branch from the advertisement it already has, and the fetch is go-git's.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"golang.org/x/crypto/ssh"

	"github.com/memd-dev/memd/sync/gitremote"
)

// sshV2 is an ssh remote's connection; each command runs upload-pack on a new session.
type sshV2 struct {
	client *ssh.Client
	path   string
}

func dialSSHV2(ctx context.Context, ep *transport.Endpoint, auth transport.AuthMethod) (*sshV2, error) {
	c, err := gitremote.DialSSH(ctx, ep, auth)
	if err != nil {
		return nil, err
	}
	return &sshV2{client: c, path: ep.Path}, nil
}

func (s *sshV2) Close() error { return s.client.Close() }

// sshAnswer is one upload-pack session: its input, its output after the first pkt-line,
// and that line (v2: "version 2"; v0: the first ref).
type sshAnswer struct {
	sess    *ssh.Session
	in      io.WriteCloser
	br      *bufio.Reader
	first   string
	started bool
	stop    func() bool
}

// start opens a session running upload-pack and reads the first line of its answer.
func (s *sshV2) start(ctx context.Context) (*sshAnswer, error) {
	sess, err := s.client.NewSession()
	if err != nil {
		return nil, err
	}
	a := &sshAnswer{sess: sess, stop: context.AfterFunc(ctx, func() { _ = sess.Close() })}
	// A refused env request is no error: the answer's first line tells the version.
	_ = sess.Setenv("GIT_PROTOCOL", "version=2")
	stderr := &limitedWriter{w: &strings.Builder{}, n: 2048}
	sess.Stderr = stderr
	if a.in, err = sess.StdinPipe(); err == nil {
		var out io.Reader
		if out, err = sess.StdoutPipe(); err == nil {
			a.br = bufio.NewReaderSize(out, 64<<10)
			err = sess.Start(gitremote.UploadPackCommand(s.path))
			a.started = err == nil
		}
	}
	if err == nil {
		var line []byte
		var flush bool
		line, flush, err = readPkt(a.br)
		if err == nil && flush {
			err = transport.ErrEmptyRemoteRepository // v0's empty answer of an old server
		}
		a.first = string(line)
	}
	if err != nil {
		a.Close()
		return nil, s.startErr(err, strings.TrimSpace(stderr.String()))
	}
	return a, nil
}

// startErr says why upload-pack gave no answer, with the server's message; a missing
// repository is transport.ErrRepositoryNotFound, as go-git reads it.
func (s *sshV2) startErr(err error, msg string) error {
	if msg == "" || errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return err
	}
	low := strings.ToLower(msg)
	if strings.Contains(low, "does not appear to be a git repository") || strings.Contains(low, "repository not found") ||
		strings.Contains(low, "no such repository") {
		err = fmt.Errorf("%w (%w)", transport.ErrRepositoryNotFound, err)
	}
	return fmt.Errorf("ssh %s: %w: %s", gitremote.UploadPackCommand(s.path), err, msg)
}

func (a *sshAnswer) v2() bool { return a.first == "version 2\n" }

func (a *sshAnswer) Read(p []byte) (int, error) { return a.br.Read(p) }

// Close ends the session: upload-pack ends at the end of its input, and what it still
// sends is read, so that the server ends the session (and later the connection) in order
// rather than on a reset. The context still cuts it short.
func (a *sshAnswer) Close() error {
	if a.in != nil {
		_ = a.in.Close()
	}
	if a.started {
		_, _ = io.Copy(io.Discard, a.br)
		_ = a.sess.Wait()
	}
	a.stop()
	return a.sess.Close()
}

// skipCaps reads the rest of the v2 capability advertisement.
func (a *sshAnswer) skipCaps() error {
	for {
		_, flush, err := readPkt(a.br)
		if err != nil || flush {
			return err
		}
	}
}

// command runs one v2 command (v2Remote); a v0 server is ErrCheckUnsupported.
func (s *sshV2) command(ctx context.Context, body []byte) (io.ReadCloser, error) {
	a, err := s.start(ctx)
	if err != nil {
		return nil, err
	}
	if !a.v2() {
		a.Close()
		return nil, fmt.Errorf("%w: ssh server answered protocol v0", ErrCheckUnsupported)
	}
	if err := a.skipCaps(); err != nil {
		a.Close()
		return nil, fmt.Errorf("read capabilities: %w", err)
	}
	if _, err := a.in.Write(body); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// lsRefs returns ref's hash on the remote (zero: none) and whether the server spoke v2.
// A v0 server's advertisement is read for it, as go-git would read it.
func (s *sshV2) lsRefs(ctx context.Context, ref string) (plumbing.Hash, bool, error) {
	a, err := s.start(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	defer a.Close()
	if !a.v2() {
		// Read to its end and say "nothing wanted" (a flush), as git does, so that
		// upload-pack ends cleanly rather than on a reset connection.
		h, err := readV0Ref(a.first, a.br, ref)
		if err == nil {
			_, _ = io.WriteString(a.in, "0000")
		}
		return h, false, err
	}
	if err := a.skipCaps(); err != nil {
		return plumbing.ZeroHash, true, fmt.Errorf("read capabilities: %w", err)
	}
	if _, err := a.in.Write(lsRefsRequest(ref)); err != nil {
		return plumbing.ZeroHash, true, err
	}
	h, err := readLsRefs(a.br, ref)
	return h, true, err
}

// readV0Ref finds ref in a v0 advertisement whose first line is first ("version 1" may
// come before the refs; the first ref carries the capabilities after a NUL), reading it
// to its end.
func readV0Ref(first string, br *bufio.Reader, ref string) (plumbing.Hash, error) {
	line := first
	found := plumbing.ZeroHash
	for {
		s := strings.TrimSuffix(line, "\n")
		if name, _, ok := strings.Cut(s, "\x00"); ok {
			s = name
		}
		if strings.HasPrefix(s, "ERR ") {
			return plumbing.ZeroHash, fmt.Errorf("remote: %s", strings.TrimPrefix(s, "ERR "))
		}
		if oid, name, ok := strings.Cut(s, " "); ok && name == ref && len(oid) == 40 {
			found = plumbing.NewHash(oid)
		}
		b, flush, err := readPkt(br)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read advertisement: %w", err)
		}
		if flush {
			return found, nil
		}
		line = string(b)
	}
}

// limitedWriter keeps the first n bytes written (the server's message) and drops the rest;
// the session writes it from its own goroutine.
type limitedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
	n  int
}

func (l *limitedWriter) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.w.String() }

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}

// sshRemoteHead is the look over ssh: v2 ls-refs where the server speaks it, the branch
// from the v0 advertisement otherwise (one connection either way).
func sshRemoteHead(ctx context.Context, ep *transport.Endpoint, auth transport.AuthMethod, ref string) (plumbing.Hash, error) {
	s, err := dialSSHV2(ctx, ep, auth)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer s.Close()
	h, v2, err := s.lsRefs(ctx, ref)
	if err == nil {
		noteSSHProtocol(ep.String(), v2)
	}
	return h, err
}

// sshV0TTL is how long a server that answered v0 is fetched through go-git without asking
// for v2 first (which would cost it a second connection and advertisement per fetch); its
// sshd may be configured for v2 later, so it is asked again after that.
const sshV0TTL = time.Hour

// sshV0Seen: the ssh remotes (by URL) that answered v0, and when.
var sshV0Seen = struct {
	mu sync.Mutex
	m  map[string]time.Time
}{m: map[string]time.Time{}}

func noteSSHProtocol(url string, v2 bool) {
	sshV0Seen.mu.Lock()
	defer sshV0Seen.mu.Unlock()
	if v2 {
		delete(sshV0Seen.m, url)
	} else {
		sshV0Seen.m[url] = time.Now()
	}
}

func sshKnownV0(url string) bool {
	sshV0Seen.mu.Lock()
	defer sshV0Seen.mu.Unlock()
	at, ok := sshV0Seen.m[url]
	return ok && time.Since(at) < sshV0TTL
}
