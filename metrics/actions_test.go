package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/metrics/statusline"
)

// fakeActions records what the page asked for; resolve of "nope" is the request's fault.
type fakeActions struct {
	hub   *metrics.Hub
	calls []string
}

func (f *fakeActions) Resolve(_ context.Context, path, keep string) error {
	if path == "nope" {
		return fmt.Errorf("%w: nope: no conflict copy", metrics.ErrBadRequest)
	}
	f.calls = append(f.calls, "resolve "+path+" "+keep)
	f.hub.Publish(doc(statusline.StateOK))
	return nil
}
func (f *fakeActions) Restore(_ context.Context, path, at string) error {
	f.calls = append(f.calls, "restore "+path+" "+at)
	return nil
}
func (f *fakeActions) History(context.Context, string) (json.RawMessage, error) {
	return json.RawMessage(`[{"commit":"abc"}]`), nil
}
func (f *fakeActions) Versions(context.Context, string) ([]byte, []byte, error) {
	return []byte("ours\n"), []byte("theirs\xff\n"), nil
}
func (f *fakeActions) Pause(_ context.Context, reason string, d time.Duration, commitOnly bool) error {
	f.calls = append(f.calls, fmt.Sprintf("pause %s %s %v", reason, d, commitOnly))
	return nil
}
func (f *fakeActions) Resume(context.Context) error { f.calls = append(f.calls, "resume"); return nil }
func (f *fakeActions) AllowDeletes(context.Context) error {
	f.calls = append(f.calls, "allow")
	return nil
}

// Every action needs the page's token, a loopback peer and no foreign Origin; it answers with
// the new document. Without Actions there are no action routes at all.
func TestActionsNeedTokenLoopbackAndOrigin(t *testing.T) {
	hub := metrics.NewHub()
	hub.Publish(doc(statusline.StateConflict))
	fa := &fakeActions{hub: hub}
	s := metrics.NewServer("127.0.0.1:0", metrics.New("test"), hub, nil, false)
	s.Actions = fa
	h := s.Handler()
	page := httptest.NewRecorder()
	h.ServeHTTP(page, httptest.NewRequest("GET", "http://127.0.0.1/", nil))
	m := regexp.MustCompile(`<meta name="memd-token" content="([0-9a-f]{64})">`).FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatalf("page carries no token:\n%.400s", page.Body.String())
	}
	token := m[1]
	do := func(method, target, body string, edit func(r *http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:7070"+target, strings.NewReader(body))
		r.Host = "127.0.0.1:7070"
		r.RemoteAddr = "127.0.0.1:5555"
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set(metrics.TokenHeader, token)
		if edit != nil {
			edit(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for name, edit := range map[string]func(r *http.Request){
		"no token":      func(r *http.Request) { r.Header.Del(metrics.TokenHeader) },
		"wrong token":   func(r *http.Request) { r.Header.Set(metrics.TokenHeader, strings.Repeat("0", 64)) },
		"remote peer":   func(r *http.Request) { r.RemoteAddr = "192.0.2.7:5555" },
		"other origin":  func(r *http.Request) { r.Header.Set("Origin", "http://evil.example") },
		"rebinding DNS": func(r *http.Request) { r.Host = "evil.example:7070" },
	} {
		w := do("POST", "/action/resolve", "path=a.html&keep=ours", edit)
		if w.Code != http.StatusForbidden && w.Code != http.StatusMisdirectedRequest {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
	if len(fa.calls) != 0 {
		t.Fatalf("refused requests acted: %v", fa.calls)
	}
	w := do("POST", "/action/resolve", "path=a.html&keep=ours", func(r *http.Request) { r.Header.Set("Origin", "http://127.0.0.1:7070") })
	var d statusline.Document
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &d) != nil || d.State != statusline.StateOK {
		t.Fatalf("resolve: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/action/resolve", "path=nope&keep=ours", nil); w.Code != 400 || !strings.Contains(w.Body.String(), "no conflict copy") {
		t.Errorf("a bad request: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/action/pause", "for=30m&commit_only=true&reason=r", nil); w.Code != 200 {
		t.Errorf("pause: %d %s", w.Code, w.Body)
	}
	if w := do("POST", "/action/pause", "for=soon", nil); w.Code != 400 {
		t.Errorf("pause for=soon: %d", w.Code)
	}
	if w := do("GET", "/action/resume", "", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d", w.Code)
	}
	if w := do("GET", "/conflict?copy=x", "", nil); w.Code != 200 || !strings.Contains(w.Body.String(), "\"theirs\":\"theirs\uFFFD\\n\"") {
		t.Errorf("versions: %d %s", w.Code, w.Body)
	}
	if got, want := strings.Join(fa.calls, "; "), "resolve a.html ours; pause r 30m0s true"; got != want {
		t.Errorf("calls %q, want %q", got, want)
	}

	plain := metrics.NewServer("127.0.0.1:0", metrics.New("test"), hub, nil, false).Handler()
	r := httptest.NewRequest("POST", "http://127.0.0.1/action/resume", nil)
	r.RemoteAddr = "127.0.0.1:1"
	pw := httptest.NewRecorder()
	plain.ServeHTTP(pw, r)
	if pw.Code != http.StatusNotFound && pw.Code != http.StatusMethodNotAllowed {
		t.Errorf("actions without Actions: %d", pw.Code)
	}
}
