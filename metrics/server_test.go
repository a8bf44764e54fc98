package metrics_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

func startServer(t *testing.T, hub *metrics.Hub, alive func() error, pprof bool) (*metrics.Server, string) {
	t.Helper()
	s := metrics.NewServer("127.0.0.1:0", metrics.New("test"), hub, alive, pprof)
	s.KeepAlive = 50 * time.Millisecond
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s, "http://" + s.Addr()
}

func doc(state string) statusline.Document {
	return statusline.Compose(statuslinetest.Fixtures()[state])
}

func get(t *testing.T, method, url string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// sseReader reads `status` events and keep-alive comments from a real HTTP stream.
type sseReader struct {
	r          *bufio.Reader
	keepAlives int
}

func (s *sseReader) next(t *testing.T) (id string, data string) {
	t.Helper()
	var event string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("sse read: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == ": keep-alive":
			s.keepAlives++
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "" && event != "":
			if event != "status" {
				t.Fatalf("event %q", event)
			}
			return id, data
		}
	}
}

func TestSSE(t *testing.T) {
	hub := metrics.NewHub()
	hub.Publish(doc(statusline.StateBusy))
	_, base := startServer(t, hub, nil, false)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/status/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sse := &sseReader{r: bufio.NewReader(resp.Body)}
	// The latest document comes first.
	id, data := sse.next(t)
	var d statusline.Document
	if err := json.Unmarshal([]byte(data), &d); err != nil || d.State != statusline.StateBusy || id != "1" {
		t.Fatalf("first event id %s state %q err %v", id, d.State, err)
	}
	// Then one event per Publish, in order.
	hub.Publish(doc(statusline.StateOK))
	hub.Publish(doc(statusline.StateWarn))
	for _, want := range []string{statusline.StateOK, statusline.StateWarn} {
		_, data := sse.next(t)
		if err := json.Unmarshal([]byte(data), &d); err != nil || d.State != want {
			t.Fatalf("event state %q, want %q (%v)", d.State, want, err)
		}
	}
	// Idle: keep-alive comments arrive (50 ms in this test); read until one does.
	deadline := time.Now().Add(10 * time.Second)
	go func() { <-time.After(10 * time.Second); cancel() }()
	for sse.keepAlives == 0 && time.Now().Before(deadline) {
		line, err := sse.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": keep-alive\n" {
			sse.keepAlives++
		}
	}
	if sse.keepAlives == 0 {
		t.Fatal("no keep-alive")
	}
}

func TestSSEEndsOnShutdown(t *testing.T) {
	hub := metrics.NewHub()
	s := metrics.NewServer("127.0.0.1:0", nil, hub, nil, false)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + s.Addr() + "/status/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	read := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, resp.Body); read <- err }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown waited on the stream: %v", err)
	}
	select {
	case err := <-read:
		if err != nil {
			t.Errorf("stream ended with %v, want a clean EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream still open after shutdown")
	}
	if n, _ := hub.Stats(); n != 0 {
		t.Errorf("%d subscribers left", n)
	}
}

func TestSlowSubscriberDoesNotBlockPublish(t *testing.T) {
	hub := metrics.NewHub()
	ch, cancel := hub.Subscribe() // never read
	defer cancel()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 10000; i++ {
			hub.Publish(doc(statusline.StateOK))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Publish blocked on a slow subscriber")
	}
	_, dropped := hub.Stats()
	if dropped == 0 {
		t.Error("no events dropped")
	}
	// What is left queued is bounded and ends with the newest event.
	var last metrics.Event
	n := 0
	for len(ch) > 0 {
		last = <-ch
		n++
	}
	if n == 0 || n > 8 || last.ID != 10000 {
		t.Errorf("queued %d, last id %d", n, last.ID)
	}
	// A real HTTP client that stops reading does not block Publish either.
	_, base := startServer(t, hub, nil, false)
	resp, err := http.Get(base + "/status/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	big := doc(statusline.StateOK)
	big.Detail = strings.Repeat("x", 64<<10)
	done2 := make(chan struct{})
	go func() {
		for i := 0; i < 500; i++ { // ~32 MB the client never reads
			hub.Publish(big)
		}
		close(done2)
	}()
	select {
	case <-done2:
	case <-time.After(20 * time.Second):
		t.Fatal("Publish blocked on a stalled HTTP client")
	}
}

func TestEndpoints(t *testing.T) {
	var sick atomic.Value
	sick.Store("")
	alive := func() error {
		if s := sick.Load().(string); s != "" {
			return errors.New(s)
		}
		return nil
	}
	hub := metrics.NewHub()
	_, base := startServer(t, hub, alive, false)

	if code, _, body := get(t, "GET", base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz %d %q", code, body)
	}
	sick.Store("owner loop stuck for 2m0s")
	if code, _, body := get(t, "GET", base+"/healthz"); code != 503 || !strings.Contains(body, "owner loop stuck") {
		t.Errorf("sick healthz %d %q", code, body)
	}
	if code, _, _ := get(t, "GET", base+"/status.json"); code != 503 {
		t.Errorf("status.json before publish: %d", code)
	}
	hub.Publish(doc(statusline.StateWarn))
	code, hdr, body := get(t, "GET", base+"/status.json")
	if code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("status.json %d %v", code, hdr)
	}
	if d, err := statusline.Parse("status.json", []byte(body)); err != nil || d.State != statusline.StateWarn {
		t.Errorf("status.json: %v %+v", err, d)
	}
	if code, _, body := get(t, "GET", base+"/metrics"); code != 200 || !strings.Contains(body, "memd_build_info{goversion=") {
		t.Errorf("metrics %d", code)
	}
	for _, p := range []string{"/nope", "/status", "/metrics/x", "/debug/pprof/"} {
		if code, _, _ := get(t, "GET", base+p); code != 404 {
			t.Errorf("GET %s = %d, want 404", p, code)
		}
	}
	for _, p := range []string{"/metrics", "/status.json", "/healthz", "/status/events", "/"} {
		code, hdr, _ := get(t, "POST", base+p)
		if code != 405 || !strings.Contains(hdr.Get("Allow"), "GET") {
			t.Errorf("POST %s = %d (Allow %q), want 405", p, code, hdr.Get("Allow"))
		}
	}
	if code, _, _ := get(t, "HEAD", base+"/healthz"); code != 503 {
		t.Errorf("HEAD healthz %d", code)
	}
	// The page holds the summary even without JavaScript, once (memd's own sidebar section,
	// which repeats it, is not drawn on the page).
	code, _, page := get(t, "GET", base+"/")
	if code != 200 || strings.Count(page, `<span class="k-warn">inbox 23</span>`) != 1 || strings.Contains(page, "memory repo") {
		t.Errorf("page %d:\n%s", code, page)
	}
}

func TestPprofOnlyWhenEnabled(t *testing.T) {
	_, base := startServer(t, nil, nil, true)
	if code, _, _ := get(t, "GET", base+"/debug/pprof/"); code != 200 {
		t.Errorf("pprof on: %d", code)
	}
}

func TestPageEscapes(t *testing.T) {
	hub := metrics.NewHub()
	f := statuslinetest.Fixtures()[statusline.StateError]
	f.Error = `<script>alert(1)</script>`
	hub.Publish(statusline.Compose(f))
	_, base := startServer(t, hub, nil, false)
	_, _, page := get(t, "GET", base+"/")
	if strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)") {
		t.Errorf("page does not escape the error")
	}
	// A section line (what another writer put in the document) with a bidi override is
	// served as an escape, not as the override.
	d := statusline.Compose(f)
	d.Detail = "evil\u202elmth.html"
	hub.Publish(d)
	_, _, page = get(t, "GET", base+"/")
	if strings.Contains(page, "\u202e") || !strings.Contains(page, `evil\u202elmth.html`) {
		t.Errorf("page serves a bidi override raw")
	}
}

// TestPageInChromium loads the page in headless Chromium over the DevTools pipe: the DOM holds
// the summary, and after a new Publish the page's script redraws it from the SSE stream
// without a reload: the line, the log of what happened (newest first), the counts, the
// conflict copies waiting and the commits per hour. (e2e.TestPageShowsChangeAndConflict does
// the same against a real memd run.)
func TestPageInChromium(t *testing.T) {
	chrome := testutil.Chrome(t)
	hub := metrics.NewHub()
	hub.Publish(doc(statusline.StateOK))
	_, base := startServer(t, hub, nil, false)

	// A --dump-dom first: the page as served, before any script (the SSE stream keeps virtual
	// time from running out, so no --virtual-time-budget here).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := testutil.ChromeCommand(t, ctx, chrome, "--timeout=3000", "--dump-dom", base+"/").Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if !strings.Contains(string(out), `<span class="k-ok">+2 ~1</span>`) {
		t.Fatalf("dumped DOM lacks the summary:\n%s", out)
	}

	cdp := testutil.StartCDP(t, ctx, chrome, base+"/")
	waitFor := func(js, want string) { t.Helper(); cdp.WaitEval(t, js, want, 30*time.Second) }
	text := func(sel string) string {
		return `(document.querySelector(` + strconv.Quote(sel) + `) || {}).textContent || ""`
	}
	waitFor(text("#summary"), "memd: +2 ~1 · 14:32")
	waitFor(text("#conn"), "live")
	waitFor(text("#events li span"), "sleep: arcs 2, archived 14, expired 3")
	waitFor(text(`#counts [data-count="areas"] dd`), "30")
	waitFor(text(`#counts [data-count="notes stale"] dd`), "1")
	waitFor(text("#sleep"), strings.TrimSpace(cdp.Eval(t, `(() => { const d = new Date("2026-11-30T03:00:00Z"); const p = n => String(n).padStart(2, "0"); return d.getFullYear() + "-" + p(d.getMonth()+1) + "-" + p(d.getDate()) + " " + p(d.getHours()) + ":" + p(d.getMinutes()); })()`))+": archived 14, arcs 2, expired 3")
	waitFor(text("#copies"), "none")
	waitFor(text("#total"), "8 commits")
	waitFor(`document.querySelectorAll("#chart div").length.toString()`, "24")

	// A conflict: the line, the new event on top of the log, the copy waiting.
	hub.Publish(doc(statusline.StateConflict))
	waitFor(text("#events li span"), "conflict resources/notes/x.html changed on both sides; ours kept as resources/notes/x.conflict-laptop-20261130T143135Z.html")
	waitFor(`document.querySelectorAll("#events li").length.toString()`, "2")
	waitFor(text("#copies li"), "resources/notes/x.conflict-laptop-20261130T143135Z.html")
	waitFor(text("#summary"), "memd: +2 ~1 1 conflict · 14:32")

	// Claude Code's memory, when memd keeps it: the projects synced and those not.
	if got := cdp.Eval(t, `String(document.querySelectorAll('#counts [data-count^="claude code"]').length)`); strings.TrimSpace(got) != "0" {
		t.Fatalf("claude code counts without agents.claude_code.memory: %s", got)
	}
	cc := doc(statusline.StateConflict)
	cc.ClaudeCode = &statusline.ClaudeCode{Projects: 2, Synced: []statusline.AgentProject{{Path: "/src/a", ID: "github.com/acme/a"}, {Path: "/src/b", ID: "github.com/acme/b"}},
		Unsynced: []statusline.AgentProject{{Path: "/tmp/x", Reason: "not a git checkout"}}}
	hub.Publish(cc)
	waitFor(text(`#counts [data-count="claude code projects"] dd`), "2")
	waitFor(text(`#counts [data-count="claude code unsynced"] dd`), "1")

	// Hostile text from a document is text on the page, never markup.
	bad := doc(statusline.StateConflict)
	bad.Events = append(bad.Events, statusline.Event{ID: 43, Kind: "<b>", Text: `<img src=x onerror="document.title='owned'">`})
	bad.ConflictCopies = []string{`<script>document.title='owned'</script>`}
	hub.Publish(bad)
	waitFor(text("#events li span"), `<img src=x onerror="document.title='owned'">`)
	waitFor(text("#copies li"), `<script>document.title='owned'</script>`)
	waitFor(`String(document.querySelectorAll("#events img, #copies script").length)`, "0")
	waitFor(`document.title`, "memd")

	// A remote's name with a bidi override and a C1 control is drawn as escapes (on main the
	// page drew "evil" and then "lmth.html" reversed).
	bidi := doc(statusline.StateConflict)
	bidi.ConflictCopies = []string{"evil\u202elmth.html\u009b2J"}
	hub.Publish(bidi)
	waitFor(text("#copies li"), `evil\u202elmth.html\u009b2J`)

	// Usable at 400 px: nothing wider than the screen, a long path without a break in it wrapped.
	long := doc(statusline.StateConflict)
	long.ConflictCopies = []string{"resources/" + strings.Repeat("deep", 30) + "/notes.conflict-laptop-20261130T143135Z.html"}
	hub.Publish(long)
	waitFor(text("#copies li"), long.ConflictCopies[0])
	cdp.Call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": true}, nil)
	waitFor(`String(document.documentElement.scrollWidth <= 400)`, "true")

	hub.Publish(doc(statusline.StateError))
	waitFor(text("#summary"), "memd: error: push origin/main: non-fast-forward after 5 tries · 14:32")
	waitFor(text("#summary .k-error"), "error:")
	waitFor(`document.body.dataset.state`, "error")
	// memd's own section repeats the line and the detail: the page draws them once, above.
	waitFor(text("#detail"), "last job failed: push origin/main: non-fast-forward after 5 tries")
	waitFor(`document.querySelectorAll('#sections [data-key="memd/sync"]').length.toString()`, "0")
	waitFor(text("#copies"), "none")
}

// A DNS-rebinding page on evil.example reaches 127.0.0.1 with its own name in Host: every
// route answers 421 and nothing of the status; loopback names and addresses are answered.
// With AllowRemote (http.allow_remote) every name is answered.
func TestServerHostHeader(t *testing.T) {
	hub := metrics.NewHub()
	hub.Publish(doc("synced"))
	_, base := startServer(t, hub, nil, true)
	port := base[strings.LastIndex(base, ":")+1:]
	do := func(host, path string) (int, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s Host %s: %v", path, host, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK && path == "/status/events" {
			return resp.StatusCode, "" // a stream: the status line is enough
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	paths := []string{"/status.json", "/status/events", "/metrics", "/", "/healthz", "/debug/pprof/"}
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example", "localhost.evil.example:" + port, "10.0.0.1:" + port, "[::2]:" + port, "0.0.0.0:" + port} {
		for _, p := range paths {
			code, body := do(host, p)
			if code != http.StatusMisdirectedRequest {
				t.Errorf("Host %s %s: %d, want 421", host, p, code)
			}
			if strings.Contains(body, `"state"`) || strings.Contains(body, "memd_") {
				t.Errorf("Host %s %s leaked: %.200s", host, p, body)
			}
		}
	}
	for _, host := range []string{"localhost", "localhost:" + port, "LOCALHOST.:" + port, "127.0.0.1:" + port, "127.1.2.3", "[::1]:" + port, "[::1]"} {
		for _, p := range paths {
			if code, _ := do(host, p); code != http.StatusOK {
				t.Errorf("Host %s %s: %d, want 200", host, p, code)
			}
		}
	}

	remote := metrics.NewServer("127.0.0.1:0", metrics.New("test"), hub, nil, false)
	remote.AllowRemote = true
	srv := httptest.NewServer(remote.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/status.json", nil)
	req.Host = "memd.lan"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("allow_remote, Host memd.lan: %d, want 200", resp.StatusCode)
	}
	named := metrics.NewServer("memd.lan:0", metrics.New("test"), hub, nil, false)
	srv2 := httptest.NewServer(named.Handler())
	defer srv2.Close()
	for host, want := range map[string]int{"memd.lan": 200, "MEMD.LAN:47100": 200, "other.lan": 421} {
		req, _ := http.NewRequest("GET", srv2.URL+"/status.json", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("listen host memd.lan, Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}
