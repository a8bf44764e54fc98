package sync

import (
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"
)

// gitHTTPServer is a real smart-HTTP git server on loopback: `git
// http-backend` under net/http/cgi, behind a basic-auth check. It can be
// stopped and started again on the same address (offline tests).
type gitHTTPServer struct {
	t       *testing.T
	root    string // GIT_PROJECT_ROOT
	addr    string
	handler http.Handler

	mu    gosync.Mutex
	token string // the password the server accepts; "" = no auth
	hang  chan struct{}
	srv   *httptest.Server
}

// newGitHTTPServer serves the bare repos under root. Requests need basic
// auth with password token (any user name).
func newGitHTTPServer(t *testing.T, root, token string) *gitHTTPServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git-http-backend not available: %v", err)
	}
	s := &gitHTTPServer{t: t, root: root, token: token}
	cgiH := &cgi.Handler{
		Path: backend,
		Root: "/git",
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_CONFIG_NOSYSTEM=1",
			"PATH=" + os.Getenv("PATH"),
		},
	}
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
		if token != "" {
			_, pw, ok := r.BasicAuth()
			if !ok || pw != token {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		cgiH.ServeHTTP(w, r)
	})
	s.start()
	t.Cleanup(s.stop)
	return s
}

// start listens (again) on the server's address.
func (s *gitHTTPServer) start() {
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
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.t.Fatalf("listen %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(s.handler)
	srv.Listener = ln
	srv.Start()
	s.addr = ln.Addr().String()
	s.srv = srv
}

func (s *gitHTTPServer) stop() {
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

// setHang makes every request block until the client gives up.
func (s *gitHTTPServer) setHang() {
	s.mu.Lock()
	s.hang = make(chan struct{})
	s.mu.Unlock()
}

// url of the bare repo name under root.
func (s *gitHTTPServer) url(name string) string {
	return "http://" + s.addr + "/git/" + name
}

// newHTTPWorld is a syncWorld whose remote is also served over HTTP; A's
// origin points at the HTTP URL (B keeps the file path).
func newHTTPWorld(t *testing.T, token string, files map[string]string) (*gitHTTPServer, *syncWorld) {
	t.Helper()
	w := newSyncWorld(t, files)
	runGit(t, w.bare, "config", "http.receivepack", "true")
	srv := newGitHTTPServer(t, filepath.Dir(w.bare), token)
	if err := w.a.SetRemote("origin", srv.url(filepath.Base(w.bare))); err != nil {
		t.Fatal(err)
	}
	return srv, w
}
