package testutil

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Headless Chromium for the page tests: found, started in its own process group and driven
// over the DevTools pipe.

// ownGroup starts the browser in its own process group and, at cleanup, kills the whole group
// (renderers and helpers too) and waits until none is left writing into the profile.
func ownGroup(t testing.TB, cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t.Cleanup(func() {
		if cmd.Process == nil {
			return
		}
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		Poll(10*time.Second, func() bool { return syscall.Kill(-pgid, 0) != nil })
	})
}

// ChromeFlags are headless Chromium's flags for a test: no sandbox, GPU, network chatter or
// first-run UI, and a profile in the test's temp dir; extra come last.
func ChromeFlags(t testing.TB, extra ...string) []string {
	return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + filepath.Join(t.TempDir(), "profile")}, extra...)
}

// CDP is a minimal Chrome DevTools Protocol client over --remote-debugging-pipe (fd 3 in,
// fd 4 out, messages separated by NUL).
type CDP struct {
	w       io.Writer
	r       *bufio.Reader
	id      int
	session string
}

// StartCDP opens url in headless chrome and attaches to its page; the browser (its whole
// process group) is killed at the test's cleanup.
func StartCDP(t testing.TB, ctx context.Context, chrome, url string) *CDP {
	t.Helper()
	inR, inW, _ := os.Pipe()
	outR, outW, _ := os.Pipe()
	cmd := exec.CommandContext(ctx, chrome, ChromeFlags(t, "--remote-debugging-pipe", url)...)
	cmd.ExtraFiles = []*os.File{inR, outW}
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	ownGroup(t, cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	inR.Close()
	outW.Close()
	t.Cleanup(func() {
		inW.Close()
		_ = cmd.Wait()
		outR.Close()
	})
	c := &CDP{w: inW, r: bufio.NewReader(outR)}
	var targets struct {
		TargetInfos []struct{ TargetID, Type, URL string } `json:"targetInfos"`
	}
	var target string
	if !Poll(30*time.Second, func() bool {
		c.Call(t, "Target.getTargets", nil, &targets)
		for _, ti := range targets.TargetInfos {
			if ti.Type == "page" && strings.HasPrefix(ti.URL, url) {
				target = ti.TargetID
			}
		}
		return target != ""
	}) {
		t.Fatalf("no page target for %s: %+v", url, targets)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	c.Call(t, "Target.attachToTarget", map[string]any{"targetId": target, "flatten": true}, &att)
	c.session = att.SessionID
	return c
}

// Call sends one method and decodes its result into result (nil: ignore it).
func (c *CDP) Call(t testing.TB, method string, params any, result any) {
	t.Helper()
	c.id++
	msg := map[string]any{"id": c.id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if c.session != "" && !strings.HasPrefix(method, "Target.") {
		msg["sessionId"] = c.session
	}
	b, _ := json.Marshal(msg)
	if _, err := c.w.Write(append(b, 0)); err != nil {
		t.Fatalf("cdp write: %v", err)
	}
	for {
		raw, err := c.r.ReadBytes(0)
		if err != nil {
			t.Fatalf("cdp read: %v", err)
		}
		var resp struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct{ Message string }
		}
		if err := json.Unmarshal(raw[:len(raw)-1], &resp); err != nil {
			t.Fatalf("cdp: %v: %s", err, raw)
		}
		if resp.ID != c.id {
			continue // an event, or an older reply
		}
		if resp.Error != nil {
			t.Fatalf("cdp %s: %s", method, resp.Error.Message)
		}
		if result != nil {
			if err := json.Unmarshal(resp.Result, result); err != nil {
				t.Fatalf("cdp %s result: %v", method, err)
			}
		}
		return
	}
}

// Eval evaluates js in the page and returns its value when it is a string (else "").
func (c *CDP) Eval(t testing.TB, js string) string {
	t.Helper()
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	c.Call(t, "Runtime.evaluate", map[string]any{"expression": js, "returnByValue": true}, &r)
	s, _ := r.Result.Value.(string)
	return s
}

// WaitEval polls js until it evaluates to want, failing the test after timeout.
func (c *CDP) WaitEval(t testing.TB, js, want string, timeout time.Duration) {
	t.Helper()
	var got string
	if !Poll(timeout, func() bool { got = c.Eval(t, js); return got == want }) {
		t.Fatalf("%s = %q, want %q", js, got, want)
	}
}

// WaitEvalContains polls js until its value contains want, failing the test after timeout.
func (c *CDP) WaitEvalContains(t testing.TB, js, want string, timeout time.Duration) string {
	t.Helper()
	var got string
	if !Poll(timeout, func() bool { got = c.Eval(t, js); return strings.Contains(got, want) }) {
		t.Fatalf("%s = %q, want it to contain %q", js, got, want)
	}
	return got
}

// Chrome finds headless Chromium, skipping the test when it is absent, unless CI is set
// (.ci/run installs it).
func Chrome(t testing.TB) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not installed (CI is set: .ci/run installs it)")
	}
	t.Skip("chromium not installed")
	return ""
}

// ChromeCommand is chrome with ChromeFlags and extra, in its own process group that is killed
// at the test's cleanup.
func ChromeCommand(t testing.TB, ctx context.Context, chrome string, extra ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, chrome, ChromeFlags(t, extra...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	ownGroup(t, cmd)
	return cmd
}

// Screenshot writes the page, laid out width CSS pixels wide and as tall as its content, as a
// PNG to file (for a person to look at: MEMD_PAGE_SCREENSHOT in the page tests).
func (c *CDP) Screenshot(t testing.TB, width int, file string) {
	t.Helper()
	c.Call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": true}, nil)
	var m struct {
		CSSContentSize struct{ Height float64 } `json:"cssContentSize"`
	}
	c.Call(t, "Page.getLayoutMetrics", nil, &m)
	h := int(m.CSSContentSize.Height) + 1
	c.Call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": h, "deviceScaleFactor": 1, "mobile": true}, nil)
	var shot struct {
		Data []byte `json:"data"` // base64 in the protocol; encoding/json decodes it
	}
	c.Call(t, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot)
	if err := os.WriteFile(file, shot.Data, 0o644); err != nil {
		t.Fatal(err)
	}
}
