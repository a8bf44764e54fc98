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

	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/metrics/statusline"
)

// pagedActions answers the history a page at a time too (metrics.HistoryPager).
type pagedActions struct {
	fakeActions
	asked []string
}

func (p *pagedActions) HistoryPage(_ context.Context, path, from string, limit int) (json.RawMessage, error) {
	p.asked = append(p.asked, fmt.Sprintf("%s|%s|%d", path, from, limit))
	return json.RawMessage(`{"entries":[{"commit":"abc"}],"next":"n1","walked":7}`), nil
}

// GET /history with limit is a page (path, from and limit passed on); without it the whole
// array, as before; a limit that is not 1–1000 is the request's fault.
func TestHistoryPages(t *testing.T) {
	hub := metrics.NewHub()
	hub.Publish(doc(statusline.StateOK))
	pa := &pagedActions{fakeActions: fakeActions{hub: hub}}
	s := metrics.NewServer("127.0.0.1:0", metrics.New("test"), hub, nil, false)
	s.Actions = pa
	h := s.Handler()
	page := httptest.NewRecorder()
	h.ServeHTTP(page, httptest.NewRequest("GET", "http://127.0.0.1/", nil))
	m := regexp.MustCompile(`<meta name="memd-token" content="([0-9a-f]{64})">`).FindStringSubmatch(page.Body.String())
	if m == nil {
		t.Fatal("page carries no token")
	}
	get := func(target string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://127.0.0.1:7070"+target, nil)
		r.Host, r.RemoteAddr = "127.0.0.1:7070", "127.0.0.1:5555"
		r.Header.Set(metrics.TokenHeader, m[1])
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := get("/history?path=a.html&limit=20&from=c%3Aa.html"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"next":"n1"`) {
		t.Fatalf("page: %d %s", w.Code, w.Body.String())
	}
	if len(pa.asked) != 1 || pa.asked[0] != "a.html|c:a.html|20" {
		t.Errorf("asked %v", pa.asked)
	}
	if w := get("/history?path=a.html"); w.Code != http.StatusOK || !strings.HasPrefix(w.Body.String(), `[{"commit":"abc"}]`) {
		t.Errorf("whole history: %d %s", w.Code, w.Body.String())
	}
	for _, bad := range []string{"0", "1001", "x"} {
		if w := get("/history?path=a.html&limit=" + bad); w.Code != http.StatusBadRequest {
			t.Errorf("limit=%s: %d", bad, w.Code)
		}
	}
}
