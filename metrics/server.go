package metrics

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/memd-dev/memd/internal/textsafe"
)

//go:embed web/index.html
var webFS embed.FS

// page's t is the one sanitiser (textsafe): html/template escapes markup, not the bidi and
// C1 controls that make a name read as another.
var page = template.Must(template.New("index.html").Funcs(template.FuncMap{"t": textsafe.Escape}).ParseFS(webFS, "web/index.html"))

// DefaultKeepAlive is how often an idle SSE stream gets a comment, so proxies and browsers
// keep it open.
const DefaultKeepAlive = 15 * time.Second

// Server serves /metrics, /status.json, /status/events, /healthz and the page at /.
type Server struct {
	// KeepAlive is the SSE comment interval; set it before Start (tests use a short one).
	KeepAlive time.Duration
	// AllowRemote (http.allow_remote) answers requests for any Host name. Off, only loopback
	// names and the listen host are answered, so a DNS-rebinding page cannot read memd.
	AllowRemote bool
	// Actions, set before Start, makes the page a place to act (metrics/actions.go); nil: the
	// page only shows.
	Actions Actions

	token string // the page's CSRF token, new each start of the process
	addr  string
	m     *Metrics
	hub   *Hub
	alive func() error
	pprof bool

	mu   sync.Mutex
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// NewServer prepares a server on addr (host:port; port 0 picks one). alive backs /healthz:
// nil means healthy. pprof adds /debug/pprof/ (http.pprof: true).
func NewServer(addr string, m *Metrics, hub *Hub, alive func() error, pprof bool) *Server {
	if hub == nil {
		hub = NewHub()
	}
	if alive == nil {
		alive = func() error { return nil }
	}
	return &Server{KeepAlive: DefaultKeepAlive, addr: addr, m: m, hub: hub, alive: alive, pprof: pprof, done: make(chan struct{}), token: newToken()}
}

// Handler is the server's routes, for tests and for embedding.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// Method patterns make the mux answer 405 (with Allow) for other methods, 404 elsewhere.
	if s.m != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(s.m.Registry(), promhttp.HandlerOpts{
			Registry: s.m.Registry(), ErrorHandling: promhttp.ContinueOnError}))
	}
	mux.HandleFunc("GET /status.json", s.statusJSON)
	mux.HandleFunc("GET /status/events", s.events)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /{$}", s.index)
	s.routeActions(mux)
	if s.pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	if s.AllowRemote {
		return mux
	}
	listenHost, _, _ := net.SplitHostPort(s.addr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, listenHost) {
			// 421: this server is not the one the name points at. A page on another origin
			// that rebinds its name to 127.0.0.1 sends its own name here, and reads nothing.
			http.Error(w, fmt.Sprintf("misdirected request: Host %q is not a loopback name; memd answers localhost, 127.0.0.0/8 and [::1] (set http.allow_remote to answer other names)", r.Host), http.StatusMisdirectedRequest)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// hostAllowed: a request's Host header names localhost, a loopback address or the host the
// server was configured to listen on.
func hostAllowed(hostHeader, listenHost string) bool {
	h := hostHeader
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "" {
		return false
	}
	if h == "localhost" {
		return true
	}
	if ip, err := netip.ParseAddr(h); err == nil && ip.Unmap().IsLoopback() {
		return true
	}
	lh := strings.TrimSuffix(strings.ToLower(listenHost), ".")
	if ip, err := netip.ParseAddr(lh); err == nil && ip.IsUnspecified() {
		return false // 0.0.0.0 names no host; only allow_remote serves every name
	}
	return lh != "" && h == lh
}

// Start listens and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("http listen %s: %w", s.addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	s.mu.Lock()
	s.ln, s.srv = ln, srv
	s.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// Addr is the address the server listens on (the real port when it asked for 0).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return s.addr
	}
	return s.ln.Addr().String()
}

// Shutdown ends the SSE streams cleanly, then stops the server, waiting for requests up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}

func (s *Server) statusJSON(w http.ResponseWriter, _ *http.Request) {
	_, b := s.hub.Latest()
	w.Header().Set("Cache-Control", "no-store")
	if b == nil {
		http.Error(w, "no status published yet", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.alive(); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "unhealthy: %v\n", err)
		return
	}
	fmt.Fprintln(w, "ok")
}

// events streams one `status` event per published document, the latest first, and a
// keep-alive comment while idle. It ends when the client leaves or the server shuts down.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	ch, cancel := s.hub.Subscribe()
	defer cancel()
	every := s.KeepAlive
	if every <= 0 {
		every = DefaultKeepAlive
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case ev := <-ch:
			_, err = fmt.Fprintf(w, "id: %d\nevent: status\ndata: %s\n\n", ev.ID, ev.Data)
		case <-tick.C:
			_, err = fmt.Fprint(w, ": keep-alive\n\n")
		}
		if err == nil {
			err = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}

func (s *Server) index(w http.ResponseWriter, _ *http.Request) {
	d, _ := s.hub.Latest()
	if d == nil {
		d = standInDoc()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	data := pageData{Document: d}
	if s.Actions != nil {
		data.Token = s.token
	}
	if err := page.Execute(w, data); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
