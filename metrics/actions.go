package metrics

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/textsafe"
	"github.com/memd-dev/memd/metrics/statusline"
)

// Actions is what the page may ask the daemon to do (docs/ARCHITECTURE.md §11: the page is a place to act).
// The agent implements it; each call that touches the repo runs on the owner goroutine and
// returns when it is done, so the answer can carry the new document.
type Actions interface {
	Resolve(ctx context.Context, path, keep string) error
	Restore(ctx context.Context, path, at string) error
	// History is `memd log --json` for path.
	History(ctx context.Context, path string) (json.RawMessage, error)
	// Versions are the texts of a conflict's copy (ours) and original (theirs).
	Versions(ctx context.Context, copyPath string) (ours, theirs []byte, err error)
	Pause(ctx context.Context, reason string, d time.Duration, commitOnly bool) error
	Resume(ctx context.Context) error
	AllowDeletes(ctx context.Context) error
}

// HistoryPager is an Actions that answers the history a page at a time (GET
// /history?path=P&limit=N[&from=NEXT]): up to N entries as the walk finds them, with the
// position to ask from for more and the commits walked (a request walks for a bounded
// time), so the page shows progress and a "more" button instead of waiting for the whole walk.
type HistoryPager interface {
	HistoryPage(ctx context.Context, path, from string, limit int) (json.RawMessage, error)
}

// ErrBadRequest marks an action's error that is the request's fault (a path with no
// conflict, a bad --keep): answered 400 with the message, not 500.
var ErrBadRequest = errors.New("bad request")

// TokenHeader carries the page's token on every action (CSRF): a page from another origin
// cannot read it, and a custom header cannot be sent cross-origin without a preflight that
// memd never answers.
const TokenHeader = "X-Memd-Token"

// actionTimeout bounds one action: the writer lock may be held by a sleep.
const actionTimeout = 2 * time.Minute

// maxVersionBytes bounds what /conflict returns of each version: the page diffs text.
const maxVersionBytes = 1 << 20

func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// routeActions adds the action routes; none exists without Actions.
func (s *Server) routeActions(mux *http.ServeMux) {
	if s.Actions == nil {
		return
	}
	mux.HandleFunc("POST /action/{name}", s.guard(s.action))
	mux.HandleFunc("GET /history", s.guard(s.history))
	mux.HandleFunc("GET /conflict", s.guard(s.conflict))
}

// guard checks what every action and read of memory text needs: a loopback peer (unless
// http.allow_remote), the page's token, and no other origin.
func (s *Server) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if !s.AllowRemote && !loopbackPeer(r.RemoteAddr) {
			http.Error(w, "actions are answered on loopback only", http.StatusForbidden)
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				http.Error(w, fmt.Sprintf("origin %q is not this page's", o), http.StatusForbidden)
				return
			}
		}
		got := r.Header.Get(TokenHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.token)) != 1 {
			http.Error(w, "missing or wrong "+TokenHeader+": reload the page", http.StatusForbidden)
			return
		}
		h(w, r)
	}
}

func loopbackPeer(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// action runs one POST /action/{name} and answers with the new document.
func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	f := r.PostForm.Get
	var err error
	switch r.PathValue("name") {
	case "resolve":
		err = s.Actions.Resolve(ctx, f("path"), f("keep"))
	case "restore":
		err = s.Actions.Restore(ctx, f("path"), f("at"))
	case "pause":
		var d time.Duration
		if v := f("for"); v != "" {
			if d, err = time.ParseDuration(v); err != nil || d <= 0 {
				http.Error(w, fmt.Sprintf("for %q is not a duration such as 30m", v), http.StatusBadRequest)
				return
			}
		}
		err = s.Actions.Pause(ctx, f("reason"), d, f("commit_only") == "true")
	case "resume":
		err = s.Actions.Resume(ctx)
	case "allow-deletes":
		err = s.Actions.AllowDeletes(ctx)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrBadRequest) {
			code = http.StatusBadRequest
		}
		http.Error(w, textsafe.Escape(err.Error()), code)
		return
	}
	s.statusJSON(w, r)
}

func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	q := r.URL.Query()
	var b json.RawMessage
	var err error
	if hp, ok := s.Actions.(HistoryPager); ok && q.Has("limit") {
		n, perr := strconv.Atoi(q.Get("limit"))
		if perr != nil || n < 1 || n > 1000 {
			http.Error(w, "limit: want a number from 1 to 1000", http.StatusBadRequest)
			return
		}
		b, err = hp.HistoryPage(ctx, q.Get("path"), q.Get("from"), n)
	} else {
		b, err = s.Actions.History(ctx, q.Get("path"))
	}
	if err != nil {
		http.Error(w, textsafe.Escape(err.Error()), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(b, '\n'))
}

func (s *Server) conflict(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	ours, theirs, err := s.Actions.Versions(ctx, r.URL.Query().Get("copy"))
	if err != nil {
		http.Error(w, textsafe.Escape(err.Error()), http.StatusNotFound)
		return
	}
	cut := func(b []byte) string {
		if len(b) > maxVersionBytes {
			b = b[:maxVersionBytes]
		}
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"ours": cut(ours), "theirs": cut(theirs)})
}

// pageData is what the page template draws: the document, and the token its actions carry
// (none when the page cannot act).
type pageData struct {
	*statusline.Document
	Token string
}
