package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestPageResolvesAndRestores: the page is a place to act. In headless Chromium against a
// real `memd run`, the conflict card shows both versions with a line diff and its "keep
// ours" button ends the conflict (one commit, its trailer, the event on the page); the
// history of a deleted memory has a restore button that brings it back as a new commit. An
// action without the page's token is refused; when memd stops the page says it is not
// running. Every control is a button (keyboard reachable) and the page has its landmarks.
func TestPageResolvesAndRestores(t *testing.T) {
	t.Parallel()
	chrome := testutil.Chrome(t)
	w := newWorld(t)
	w.write("areas/n/x.html", "<p>one</p>\n<p>theirs</p>\n<p>three</p>\n")
	w.write("areas/n/x.conflict-laptop-20261130T143135Z.html", "<p>one</p>\n<p>ours</p>\n<p>three</p>\n")
	w.write("areas/n/gone.html", "<p>soon deleted</p>\n")
	d := w.start()
	w.waitCommitted(d)
	w.sh("rm " + w.path("areas/n/gone.html"))
	w.waitCommitted(d)

	// Without the token, an action is refused and nothing changes.
	code, body, err := post(d.Addr(), "/action/resolve", "path=areas/n/x.html&keep=theirs", "")
	if err != nil || code != 403 {
		t.Fatalf("POST without token: %d %q %v", code, body, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	page := testutil.StartCDP(t, ctx, chrome, "http://"+d.Addr()+"/")
	q := func(sel string) string {
		return `(document.querySelector(` + strconv.Quote(sel) + `) || {}).textContent || ""`
	}
	page.WaitEval(t, q("#conn"), "live", 30*time.Second)
	if got := page.Eval(t, `[...document.querySelectorAll("header, main, footer, [aria-live]")].map(e => e.tagName + (e.id ? "#" + e.id : "")).join(" ")`); !strings.Contains(got, "HEADER") || !strings.Contains(got, "MAIN") || !strings.Contains(got, "DIV#summary") || !strings.Contains(got, "OL#events") {
		t.Errorf("landmarks and live regions: %s", got)
	}
	if n := page.Eval(t, `String(document.querySelectorAll("#summary").length + document.querySelectorAll('[data-key="memd/sync"]').length)`); n != "1" {
		t.Errorf("the summary is drawn %s times", n)
	}
	page.WaitEvalContains(t, q("#copies .copy"), "areas/n/x.conflict-laptop-20261130T143135Z.html", commitTimeout)

	// Compare: both versions side by side, the changed line marked on each side.
	page.Eval(t, `document.querySelector('#copies button[aria-label^="compare"]').click(), ""`)
	page.WaitEval(t, q("#copies .versions .l-del"), "<p>theirs</p>", 10*time.Second)
	page.WaitEval(t, q("#copies .versions .l-add"), "<p>ours</p>", 10*time.Second)
	if got := page.Eval(t, `String(document.querySelectorAll("#copies .versions .l-same").length)`); got != "4" {
		t.Errorf("unchanged lines marked: %s, want 2 a side", got)
	}
	shots(t, page, "conflict")

	// Keep ours, from the page.
	before := w.head()
	page.Eval(t, `document.querySelector('#copies button[aria-label^="keep ours"]').click(), ""`)
	page.WaitEvalContains(t, q("#result"), "resolved areas/n/x.html", commitTimeout)
	if got := w.git("show", "HEAD:areas/n/x.html"); got != "<p>one</p>\n<p>ours</p>\n<p>three</p>\n" {
		t.Errorf("HEAD:areas/n/x.html = %q", got)
	}
	if msg := w.git("log", "-1", "--format=%B"); !strings.Contains(msg, "Memd-Action: resolve") || strings.TrimSpace(w.git("rev-parse", "HEAD^")) != before {
		t.Errorf("resolve commit:\n%s", msg)
	}
	page.WaitEvalContains(t, q("#events li span"), "resolved areas/n/x.html", commitTimeout)
	page.WaitEval(t, q("#copies"), "none", commitTimeout)

	// History of the deleted memory, and restore from it.
	page.Eval(t, `document.querySelector("#history-path").value = "areas/n/gone.html", document.querySelector("#history-form button").click(), ""`)
	page.WaitEvalContains(t, q("#history li"), "deleted areas/n/gone.html", 10*time.Second)
	shots(t, page, "history")
	page.Eval(t, `document.querySelector('#history button[aria-label^="restore"]').click(), ""`)
	page.WaitEvalContains(t, q("#result"), "restored areas/n/gone.html", commitTimeout)
	if got := w.git("show", "HEAD:areas/n/gone.html"); got != "<p>soon deleted</p>\n" {
		t.Errorf("restored HEAD:areas/n/gone.html = %q", got)
	}
	page.WaitEvalContains(t, q("#history li"), "restore: added areas/n/gone.html", 10*time.Second)

	// Every control is a button, a link, an input or a select: reachable by Tab.
	if got := page.Eval(t, `[...document.querySelectorAll("main [onclick], main div[role=button], main span[role=button]")].length ? "clickable non-controls" : "ok"`); got != "ok" {
		t.Error(got)
	}
	if got := page.Eval(t, `String(document.querySelectorAll("main button, main input, main select").length >= 4)`); got != "true" {
		t.Errorf("controls: %s", got)
	}
	w.checkClean(d)

	// Pause from the page writes what `memd pause` writes; resume and "let the deletions
	// through" write and clear theirs (the daemon's side of them is the writers' work).
	state := func(name string) bool { _, err := os.Stat(w.path(".git/memd/" + name)); return err == nil }
	page.Eval(t, `document.querySelector("#pause-for").value = "1h", document.querySelector("#pause").click(), ""`)
	page.WaitEvalContains(t, q("#result"), "paused", commitTimeout)
	if b, err := os.ReadFile(w.path(".git/memd/pause.json")); err != nil || !strings.Contains(string(b), `"reason":"paused from the page"`) || !strings.Contains(string(b), `"until":`) {
		t.Errorf("pause.json after pause: %s %v", b, err)
	}
	page.Eval(t, `act("allow-deletes", {}, "allowed"), ""`)
	page.WaitEvalContains(t, q("#result"), "allowed", commitTimeout)
	page.Eval(t, `act("resume", {}, "resumed"), ""`)
	page.WaitEvalContains(t, q("#result"), "resumed", commitTimeout)
	if state("pause.json") || !state("allow-deletes") {
		t.Errorf("after resume: pause.json there %v, allow-deletes there %v", state("pause.json"), state("allow-deletes"))
	}

	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d", code)
	}
	page.WaitEval(t, q("#conn"), "not running", 30*time.Second)
	page.WaitEval(t, `getComputedStyle(document.querySelector("#down")).display`, "block", 10*time.Second)
	shots(t, page, "down")
}

// shots writes the page light and dark at 1000 and 360 px wide when MEMD_PAGE_SCREENSHOT
// names a file prefix (for a person to look at).
func shots(t *testing.T, page *testutil.CDP, name string) {
	f := os.Getenv("MEMD_PAGE_SCREENSHOT")
	if f == "" {
		return
	}
	for _, scheme := range []string{"light", "dark"} {
		page.Call(t, "Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": scheme}}}, nil)
		for _, width := range []int{360, 1000} {
			page.Screenshot(t, width, f+"-"+name+"-"+scheme+"-"+strconv.Itoa(width)+".png")
		}
	}
	page.Call(t, "Emulation.setEmulatedMedia", map[string]any{"features": []map[string]string{{"name": "prefers-color-scheme", "value": "light"}}}, nil)
}

// post sends form to the daemon's path with the token header when token is not "".
func post(addr, path, form, token string) (int, string, error) {
	req, err := http.NewRequest("POST", "http://"+addr+path, strings.NewReader(form))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("X-Memd-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
