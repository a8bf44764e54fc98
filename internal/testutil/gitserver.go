package testutil

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// GitHTTPServer is a real smart-HTTP git server on loopback: `git http-backend` under
// net/http/cgi, behind an optional basic-auth check. It can stop and start again on the
// same address (offline tests) and can hang every request (timeout tests).
type GitHTTPServer struct {
	t       testing.TB
	addr    string
	handler http.Handler

	mu    sync.Mutex
	token string // the password the server accepts; "" = no auth
	user  string // the user name it accepts with it; "" = any
	tls   bool   // serve https (a test CA; CAFile names it)
	hang  chan struct{}
	srv   *httptest.Server
	// requests and bytes count what was served: requests, and the bytes of each request's
	// body plus its answer's (the idle-cost tests and bench).
	requests, bytes int64
}

// NewGitHTTPServer serves the bare repos under root; requests need basic auth with password
// token (any user name) unless token is "". It skips the test without git-http-backend.
func NewGitHTTPServer(t testing.TB, root, token string) *GitHTTPServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend not available: %v", err)
	}
	s := &GitHTTPServer{t: t, token: token}
	cgiH := &cgi.Handler{Path: backend, Root: "/git", Env: []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_CONFIG_NOSYSTEM=1", "PATH=" + os.Getenv("PATH"),
	}, Stderr: io.Discard}
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		token, hang := s.token, s.hang
		s.mu.Unlock()
		if hang != nil {
			select { // a server that accepted the connection and went silent
			case <-hang:
			case <-r.Context().Done():
			}
			return
		}
		s.mu.Lock()
		wantUser := s.user
		s.mu.Unlock()
		if token != "" {
			if u, pw, ok := r.BasicAuth(); !ok || pw != token || (wantUser != "" && u != wantUser) {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		cw := &countingWriter{ResponseWriter: w}
		cgiH.ServeHTTP(cw, r)
		s.mu.Lock()
		s.requests++
		s.bytes += cw.n + max(r.ContentLength, 0)
		s.mu.Unlock()
	})
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start listens (again) on the server's address.
func (s *GitHTTPServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	addr := s.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	// The old socket may linger a moment after Stop.
	var ln net.Listener
	var err error
	Poll(10*time.Second, func() bool { ln, err = net.Listen("tcp", addr); return err == nil })
	if err != nil {
		s.t.Fatalf("listen %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(s.handler)
	srv.Listener = ln
	if s.tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	s.addr = ln.Addr().String()
	s.srv = srv
}

// Stop closes the listener and every open connection; a hang ends.
func (s *GitHTTPServer) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	s.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Served returns the requests served so far and their bytes (bodies in and out).
func (s *GitHTTPServer) Served() (requests, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.bytes
}

// countingWriter counts the bytes of an answer's body.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

// SetToken changes the password the server accepts.
func (s *GitHTTPServer) SetToken(tok string) { s.mu.Lock(); s.token = tok; s.mu.Unlock() }

// SetHang makes every request block until the client gives up.
func (s *GitHTTPServer) SetHang() { s.mu.Lock(); s.hang = make(chan struct{}); s.mu.Unlock() }

// Addr is host:port.
func (s *GitHTTPServer) Addr() string { s.mu.Lock(); defer s.mu.Unlock(); return s.addr }

// URL of the bare repo name under root.
func (s *GitHTTPServer) URL(name string) string {
	s.mu.Lock()
	scheme := "http"
	if s.tls {
		scheme = "https"
	}
	s.mu.Unlock()
	return scheme + "://" + s.Addr() + "/git/" + name
}

// NewGitHTTPSServer is NewGitHTTPServer over TLS, with a certificate from httptest's own
// CA (for 127.0.0.1), which no system trusts: CAFile writes it for http.sslCAInfo.
func NewGitHTTPSServer(t testing.TB, root, token string) *GitHTTPServer {
	t.Helper()
	s := NewGitHTTPServer(t, root, token)
	s.Stop()
	s.mu.Lock()
	s.tls = true
	s.mu.Unlock()
	s.Start()
	return s
}

// CAFile writes the PEM certificate an https server presents into dir and returns its path.
func (s *GitHTTPServer) CAFile(t testing.TB, dir string) string {
	t.Helper()
	s.mu.Lock()
	cert := s.srv.Certificate()
	s.mu.Unlock()
	p := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// SetUser makes the server accept the password only with this user name ("" = any).
func (s *GitHTTPServer) SetUser(user string) { s.mu.Lock(); s.user = user; s.mu.Unlock() }
