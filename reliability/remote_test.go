package reliability

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// stallProxy forwards TCP to a target; while stalled it accepts connections, reads what
// the client sends and never answers (a server that hangs mid-response). Switching closes
// every open connection, so a kept-alive HTTP connection cannot slip past the stall.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	stall  bool
	conns  []net.Conn
}

func newStallProxy(t testing.TB, target string) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &stallProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.setStall(false) })
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) setStall(on bool) {
	p.mu.Lock()
	p.stall = on
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		stall := p.stall
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		if stall {
			go func() { _, _ = io.Copy(io.Discard, c) }() // read, never answer
			continue
		}
		go func() {
			defer c.Close()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				return
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			_, _ = io.Copy(c, up)
		}()
	}
}

// faultWorld is a world whose origin is served over HTTP.
type faultWorld struct {
	*world
	srv       *testutil.GitHTTPServer
	proxy     *stallProxy // nil unless the scenario goes through it
	tokenFile string
}

// remoteScenario runs one fault: memd in sync, the fault, writes during it (committed
// locally, state reported), the fault's end, writes after, everything pushed.
type remoteScenario struct {
	name   string
	states []string // acceptable status.json states during the fault
	// inject starts the fault, end stops it; during checks the world while it lasts.
	inject, end func(t *testing.T, f *faultWorld)
	during      func(t *testing.T, f *faultWorld) []string
	proxy       bool   // origin goes through the stall proxy
	wantLog     string // memd's log must say this during the fault
}

// TestReliabilityRemoteFaults: the server stopped, a server that hangs mid-response, a push
// rejected by a pre-receive hook, the remote force-pushed to an unrelated history, an auth
// failure and a full disk on the remote. memd keeps committing locally, reports the state
// in status.json, recovers when the fault ends and loses nothing; an unrelated history is
// never merged.
func TestReliabilityRemoteFaults(t *testing.T) {
	t.Parallel()
	scenarios := []remoteScenario{
		{name: "server stopped", states: []string{"offline"},
			inject: func(t *testing.T, f *faultWorld) { f.srv.Stop() },
			end:    func(t *testing.T, f *faultWorld) { f.srv.Start() }},
		{name: "server hangs mid-response", states: []string{"offline"}, proxy: true, wantLog: "deadline exceeded after 3s",
			inject: func(t *testing.T, f *faultWorld) { f.proxy.setStall(true) },
			end:    func(t *testing.T, f *faultWorld) { f.proxy.setStall(false) }},
		{name: "push rejected (pre-receive hook)", states: []string{"offline", "error"},
			inject: func(t *testing.T, f *faultWorld) {
				f.hook("#!/bin/sh\necho 'rejected by policy' >&2\nexit 1\n")
			},
			end: func(t *testing.T, f *faultWorld) { f.hook("") }},
		{name: "remote force-pushed to unrelated history", states: []string{"error"},
			inject: func(t *testing.T, f *faultWorld) { f.forcePushUnrelated(t) },
			during: func(t *testing.T, f *faultWorld) []string { return f.unrelatedKept(t) },
			end: func(t *testing.T, f *faultWorld) {
				// Someone repairs the remote: memd's history goes back (by the test's git).
				f.gitIn(f.repo, "push", "-q", "--force", f.bare, "HEAD:refs/heads/main")
			}},
		{name: "auth failure (wrong token)", states: []string{"error"},
			inject: func(t *testing.T, f *faultWorld) {
				must(t, os.WriteFile(f.tokenFile, []byte("wrong-token\n"), 0o600))
			},
			end: func(t *testing.T, f *faultWorld) {
				must(t, os.WriteFile(f.tokenFile, []byte("good-token\n"), 0o600))
			}},
		{name: "remote disk full", states: []string{"offline", "error"},
			inject: func(t *testing.T, f *faultWorld) { f.fillDisk(t, true) },
			end:    func(t *testing.T, f *faultWorld) { f.fillDisk(t, false) }},
	}
	for _, sc := range scenarios {
		t.Run(strings.ReplaceAll(sc.name, " ", "-"), func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			srvRoot := filepath.Join(home, "srv")
			must(t, os.MkdirAll(srvRoot, 0o755))
			diskNote := ""
			if sc.name == "remote disk full" {
				diskNote = mountTmpfs(t, srvRoot)
			}
			f := setupFaultWorld(t, srvRoot)
			if sc.proxy {
				f.proxy = newStallProxy(t, f.srv.Addr())
				f.gitIn(f.repo, "remote", "set-url", "origin", "http://"+f.proxy.addr()+"/git/remote.git")
			}
			runRemoteScenario(t, f, sc, diskNote)
		})
	}
}

// setupFaultWorld makes a repo whose origin is a bare repo served over HTTP with a token.
func setupFaultWorld(t *testing.T, srvRoot string) *faultWorld {
	w := newWorld(t, worldOpts{noInit: true})
	tokenFile := filepath.Join(w.home, "token")
	must(t, os.WriteFile(tokenFile, []byte("good-token\n"), 0o600))
	// fastConfig already has a sync: line; YAML would refuse a duplicate key.
	cfg := strings.Replace(fastConfig, "sync: {pull_interval: 1s, timeout: 3s}\n", "", 1) +
		"sync: {pull_interval: 1s, timeout: 3s, token_env: \"\", token_file: " + tokenFile + "}\n"
	must(t, os.WriteFile(w.config, []byte(cfg), 0o600))
	w.bare = filepath.Join(srvRoot, "remote.git")
	w.gitIn(w.home, "init", "-q", "--bare", "-b", "main", w.bare)
	w.gitIn(w.bare, "config", "http.receivepack", "true")
	w.gitIn(w.bare, "config", "gc.autoDetach", "false") // see newWorld
	srv := testutil.NewGitHTTPServer(t, srvRoot, "good-token")
	if out, code := w.memd("init", "--config", w.config, w.repo); code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	w.gitIn(w.repo, "remote", "add", "origin", srv.URL("remote.git"))
	return &faultWorld{world: w, srv: srv, tokenFile: tokenFile}
}

func runRemoteScenario(t *testing.T, f *faultWorld, sc remoteScenario, note string) {
	start := time.Now()
	exp := map[string]expectation{}
	write := func(rel string) {
		c := fmt.Sprintf("<p>%s at %s</p>\n", rel, time.Now().Format(time.RFC3339Nano))
		f.write(rel, c)
		exp[rel] = expectation{content: c}
	}
	d := f.start()
	write("areas/before.html")
	if ok, why := f.settled(settleTimeout); !ok {
		t.Fatalf("before the fault: %s%s", why, d.Describe())
	}
	// warn is healthy too: the test's memories are not valid memhtml (doctor's "invalid").
	healthy := func() bool { s := f.status().State; return s == "ok" || s == "warn" }
	testutil.WaitFor(t, "state ok before the fault", settleTimeout, healthy,
		func() string { return fmt.Sprintf("%+v%s", f.status(), d.Describe()) })

	sc.inject(t, f)
	for i := 0; i < 5; i++ {
		write(fmt.Sprintf("areas/during-%d.html", i))
	}
	// memd keeps committing locally while the remote fails.
	testutil.WaitFor(t, "the writes made during the fault to be committed locally", settleTimeout, func() bool {
		diff, err := f.treeDiff()
		return err == nil && diff == ""
	}, d.Describe)
	var seen statusDoc
	testutil.WaitFor(t, fmt.Sprintf("status.json state in %v", sc.states), settleTimeout, func() bool {
		seen = f.status()
		for _, s := range sc.states {
			if seen.State == s {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("last status: %+v%s", seen, d.Describe()) })
	var problems []string
	if sc.during != nil {
		problems = append(problems, sc.during(t, f)...)
	}
	if sc.wantLog != "" && !testutil.Poll(settleTimeout, func() bool { return strings.Contains(d.Logs(), sc.wantLog) }) {
		problems = append(problems, fmt.Sprintf("memd's log never says %q", sc.wantLog))
	}
	if f.remoteHead() == f.head() {
		problems = append(problems, "the remote has HEAD during the fault: the fault did not bite")
	}
	sc.end(t, f)
	write("areas/after.html")
	if ok, why := f.settled(2 * settleTimeout); !ok {
		t.Fatalf("after the fault ended: %s%s", why, d.Describe())
	}
	testutil.WaitFor(t, "state ok after the fault", settleTimeout, healthy,
		func() string { return fmt.Sprintf("%+v%s", f.status(), d.Describe()) })
	found, p := f.verifyRepo(exp)
	problems = append(problems, p...)
	if code := d.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("SIGTERM: exit %d", code))
	}
	if len(problems) > 0 {
		t.Errorf("%s:\n%s%s", sc.name, strings.Join(problems, "\n"), d.Describe())
	}
	msg := seen.Error
	if msg == "" {
		msg = seen.Summary.Text
	}
	if len(msg) > 90 {
		msg = msg[:90] + "…"
	}
	n := fmt.Sprintf("state %s: %s", seen.State, msg)
	if note != "" {
		n += "; " + note
	}
	record(t, row{Scenario: "remote: " + sc.name, Iterations: 1, Writes: len(exp), Found: found, Corruptions: len(problems),
		Time: time.Since(start), Note: n})
}

// hook installs (or, with "", removes) the bare remote's pre-receive hook.
func (f *faultWorld) hook(script string) {
	p := filepath.Join(f.bare, "hooks", "pre-receive")
	if script == "" {
		_ = os.Remove(p)
		return
	}
	must(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(f.t, os.WriteFile(p, []byte(script), 0o755))
}

// forcePushUnrelated replaces the remote's main with a history that shares nothing with
// memd's.
func (f *faultWorld) forcePushUnrelated(t *testing.T) {
	other := filepath.Join(f.home, "unrelated")
	f.gitIn(f.home, "init", "-q", "-b", "main", other)
	must(t, os.WriteFile(filepath.Join(other, "README.md"), []byte("someone else's repo\n"), 0o644))
	f.gitIn(other, "add", "-A")
	f.gitIn(other, "-c", "user.name=o", "-c", "user.email=o@example.invalid", "commit", "-q", "-m", "unrelated")
	f.gitIn(other, "push", "-q", "--force", f.bare, "main:main")
}

// unrelatedKept: the remote still has the unrelated history (memd never force-pushed over
// it) and local HEAD never merged it.
func (f *faultWorld) unrelatedKept(t *testing.T) []string {
	var problems []string
	want := f.rev(filepath.Join(f.home, "unrelated"), "HEAD")
	if got := f.remoteHead(); got != want {
		problems = append(problems, fmt.Sprintf("remote main is %s, the unrelated history %s was overwritten", got, want))
	}
	if f.isAncestor(f.repo, want, "HEAD") {
		problems = append(problems, "local HEAD merged the unrelated history")
	}
	if _, err := f.gitRun(f.repo, nil, "cat-file", "-e", "HEAD:areas/before.html"); err != nil {
		problems = append(problems, "local history lost areas/before.html")
	}
	return problems
}

// mountTmpfs puts dir on a small tmpfs when this process may mount (root in a container
// that allows it); else the disk-full fault is a pre-receive hook failing as git does on
// ENOSPC. It returns a note saying which.
func mountTmpfs(t *testing.T, dir string) string {
	if os.Geteuid() != 0 {
		return "simulated: pre-receive hook fails with ENOSPC text (not root)"
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		return "simulated: pre-receive hook fails with ENOSPC text (mount: " + strings.TrimSpace(string(out)) + ")"
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
	return "real: remote on an 8 MB tmpfs filled to ENOSPC"
}

// fillDisk fills the remote's filesystem (tmpfs) or installs the ENOSPC hook; on=false
// frees it.
func (f *faultWorld) fillDisk(t *testing.T, on bool) {
	filler := filepath.Join(filepath.Dir(f.bare), "filler")
	var st syscall.Statfs_t
	isTmpfs := syscall.Statfs(filepath.Dir(f.bare), &st) == nil && st.Type == 0x01021994
	if !isTmpfs {
		if on {
			f.hook("#!/bin/sh\necho 'error: unable to create temporary object directory: No space left on device' >&2\nexit 1\n")
		} else {
			f.hook("")
		}
		return
	}
	if !on {
		must(t, os.Remove(filler))
		return
	}
	fh, err := os.Create(filler)
	must(t, err)
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i*7 + 3)
	}
	for {
		if _, err := fh.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", filler, err)
			}
			break
		}
	}
	fh.Close()
}
