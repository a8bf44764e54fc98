package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/fastpath"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// isolate keeps the user's own config out of the test.
func isolate(t *testing.T) (home string) {
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
	t.Setenv("MEMD_CONFIG", "")
	t.Setenv("MEMD_NO_FASTPATH", "")
	return home
}

func writeDoc(t *testing.T, repo, state string, pid int) statusline.Document {
	t.Helper()
	d := statusline.Compose(statuslinetest.Fixtures()[state])
	d.PID = pid
	if err := statusline.Write(statusline.Dir(repo), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func runInProcess(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	a := &app{stdout: &o, stderr: &e, stdin: strings.NewReader(""), now: time.Now}
	code = a.main(args)
	return code, o.String(), e.String()
}

func TestStatusInProcess(t *testing.T) {
	isolate(t)
	repo := t.TempDir()
	code, out, _ := runInProcess("status", "--repo", repo)
	if code != 0 || out != "memd: not started\n" {
		t.Fatalf("no document: %d %q", code, out)
	}
	d := writeDoc(t, repo, statusline.StateWarn, os.Getpid())
	for _, f := range statusline.Formats {
		code, out, errs := runInProcess("status", "--repo", repo, "--format", f)
		want, _ := statusline.Render(&d, f, time.Now(), nil)
		if !strings.HasSuffix(want, "\n") {
			want += "\n"
		}
		if code != 0 || out != want || errs != "" {
			t.Errorf("%s: %d %q %q, want %q", f, code, out, errs, want)
		}
	}
	if code, _, errs := runInProcess("status", "--repo", repo, "--format", "html"); code != 2 || !strings.Contains(errs, `unknown --format "html"`) {
		t.Errorf("unknown format: %d %q", code, errs)
	}
	if code, _, errs := runInProcess("status", "--repo", repo, "extra"); code != 2 || !strings.Contains(errs, "extra") {
		t.Errorf("extra argument: %d %q", code, errs)
	}
	// An unreadable document: an error line, the reason on stderr, still exit 0.
	os.WriteFile(filepath.Join(statusline.Dir(repo), "status.json"), []byte("{"), 0o600)
	code, out, errs := runInProcess("status", "--repo", repo)
	if code != 0 || out != "memd: error: unreadable status.json\n" || !strings.Contains(errs, "status.json") {
		t.Errorf("bad document: %d %q %q", code, out, errs)
	}
}

func TestFastPathDefaultRepo(t *testing.T) {
	if got := memd.DefaultConfig().Repo; got != fastpath.DefaultRepo {
		t.Fatalf("memd.DefaultConfig().Repo = %q, fastpath.DefaultRepo = %q: keep them equal", got, fastpath.DefaultRepo)
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func runBin(t *testing.T, bin, dir string, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, o.String(), e.String()}
}

// usedFastPath tells from GODEBUG=inittrace=1 whether client_golang initialised: the fast
// path exits before it does.
func usedFastPath(t *testing.T, bin, dir string, env []string, args ...string) bool {
	r := runBin(t, bin, dir, append(env, "GODEBUG=inittrace=1"), "", args...)
	return !strings.Contains(r.stderr, "init github.com/prometheus/client_golang/prometheus @")
}

// TestStatusFastPathSameAsFull runs the real binary with and without the fast path over many
// cases and wants the same stdout, stderr and exit code, and the fast path taken exactly
// where it should be.
// wallClock matches an RFC 3339 time.
var wallClock = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

func TestStatusFastPathSameAsFull(t *testing.T) {
	bin := memdBinary(t)
	home := isolate(t)
	// The default repo (~/memory) with an ok document from this process (alive).
	mem := filepath.Join(home, "memory")
	writeDoc(t, mem, statusline.StateOK, os.Getpid())
	// A repo whose document is old and whose pid is gone.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := t.TempDir()
	writeDoc(t, stale, statusline.StateBusy, dead.Process.Pid)
	later := statuslinetest.Now.Add(time.Hour).Format(time.RFC3339)
	// A repo with an unreadable document, one with none.
	bad := t.TempDir()
	os.MkdirAll(statusline.Dir(bad), 0o700)
	os.WriteFile(filepath.Join(statusline.Dir(bad), "status.json"), []byte(`{"version":9}`), 0o600)
	none := t.TempDir()
	parent := filepath.Dir(stale)

	type tc struct {
		args []string
		fast bool
	}
	var cases []tc
	for _, f := range statusline.Formats {
		line := f != "json" && f != "sidebar" // the line formats the daemon writes beside the document
		cases = append(cases,
			tc{[]string{"status", "--format", f}, line},
			tc{[]string{"status", "--repo", stale, "--now", later, "-format=" + f}, false}, // not running
			tc{[]string{"status", "-format", f, "--repo", bad}, false},
			tc{[]string{"status", "--repo", none, "--format", f}, false}, // not started
		)
	}
	relMem, err := filepath.Rel(parent, mem)
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		tc{[]string{"status", "--repo", relMem}, true}, // relative to the working dir
		tc{[]string{"status", "--repo", filepath.Base(stale), "--now", later}, false},
		tc{[]string{"status", "--repo", "~/memory"}, true},
		tc{[]string{"status", "--repo", mem + "/"}, false}, // cleaned by the full command
		tc{[]string{"status", "--format", "nope"}, false},
		tc{[]string{"status", "--now", "yesterday"}, false},
		tc{[]string{"status", "extra"}, false},
		tc{[]string{"status", "--bogus"}, false},
		tc{[]string{"status", "-h"}, false},
		tc{[]string{"status", "--repo", "  "}, false},
		tc{[]string{"status", "--config", filepath.Join(home, "missing.yaml")}, false},
	)
	for _, c := range cases {
		fast := runBin(t, bin, parent, nil, "", c.args...)
		full := runBin(t, bin, parent, []string{"MEMD_NO_FASTPATH=1"}, "", c.args...)
		// A document made up on the spot ("not started") carries the wall clock's second,
		// which two runs can straddle: the times are compared by their presence only.
		fast.stdout, full.stdout = wallClock.ReplaceAllString(fast.stdout, "<now>"), wallClock.ReplaceAllString(full.stdout, "<now>")
		if fast != full {
			t.Errorf("%v:\nfast path %+v\nfull      %+v", c.args, fast, full)
		}
		if got := usedFastPath(t, bin, parent, nil, c.args...); got != c.fast {
			t.Errorf("%v: fast path taken = %v, want %v", c.args, got, c.fast)
		}
	}
	// The outputs are the right ones, not merely equal.
	if r := runBin(t, bin, parent, nil, "", "status"); r.stdout != "memd: +2 ~1 · 14:32\n" || r.code != 0 {
		t.Errorf("default repo: %+v", r)
	}
	if r := runBin(t, bin, parent, nil, "", "status", "--repo", stale, "--now", later); r.stdout != "memd: not running\n" {
		t.Errorf("stale: %+v", r)
	}
	if r := runBin(t, bin, parent, nil, "", "status", "--repo", none); r.stdout != "memd: not started\n" {
		t.Errorf("none: %+v", r)
	}
	if r := runBin(t, bin, parent, nil, "", "status", "--repo", bad); r.stdout != "memd: error: unreadable status.json\n" || !strings.Contains(r.stderr, "version 9") {
		t.Errorf("bad: %+v", r)
	}
	if r := runBin(t, bin, parent, nil, "", "status", "--format", "nope"); r.code != 2 {
		t.Errorf("unknown format: %+v", r)
	}

	// A config file: the first run is the full command, which reads it and vouches for it;
	// from then on the fast path answers with the same bytes, until the file changes.
	cfgDir := filepath.Join(home, ".config", "memd")
	cfgFile := filepath.Join(cfgDir, "config.yaml")
	os.MkdirAll(cfgDir, 0o755)
	writeConfig := func(text string, age time.Duration) {
		t.Helper()
		if err := os.WriteFile(cfgFile, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-age)
		os.Chtimes(cfgFile, old, old)
	}
	alive := t.TempDir()
	writeDoc(t, alive, statusline.StateWarn, os.Getpid())
	writeConfig("repo: "+alive+"\n", time.Hour)
	if usedFastPath(t, bin, parent, nil, "status", "--format", "tmux") {
		t.Error("fast path taken for a config file no full run has read")
	}
	if !usedFastPath(t, bin, parent, nil, "status", "--format", "tmux") {
		t.Error("fast path not taken for a config file the full command vouched for")
	}
	full := runBin(t, bin, parent, []string{"MEMD_NO_FASTPATH=1"}, "", "status", "--format", "tmux")
	if r := runBin(t, bin, parent, nil, "", "status", "--format", "tmux"); r != full || !strings.Contains(r.stdout, "inbox 23") {
		t.Errorf("config repo, fast path: %+v, full command: %+v", r, full)
	}
	// --repo still wins over the config's repo on the fast path.
	if r := runBin(t, bin, parent, nil, "", "status", "--repo", mem); r.stdout != "memd: +2 ~1 · 14:32\n" {
		t.Errorf("--repo with a config: %+v", r)
	}
	// An edit sends the next run through the full command, which reads the new repo.
	writeConfig("repo: "+stale+"\n", time.Hour/2)
	if usedFastPath(t, bin, parent, nil, "status", "--now", later) {
		t.Error("fast path taken after the config changed")
	}
	if r := runBin(t, bin, parent, nil, "", "status", "--now", later); r.stdout != "memd: not running\n" {
		t.Errorf("config repo after an edit: %+v", r)
	}
	// A bad config is exit 2 every time, never a line from a remembered good one.
	writeConfig("repo: "+alive+"\n", time.Hour)
	runBin(t, bin, parent, nil, "", "status")
	writeConfig("bogus: 1\n", time.Hour)
	for i := 0; i < 2; i++ {
		if r := runBin(t, bin, parent, nil, "", "status"); r.code != 2 || !strings.Contains(r.stderr, "bogus") {
			t.Errorf("bad config, run %d: %+v", i, r)
		}
	}
	// Configs whose meaning depends on more than their bytes and $HOME are never vouched for;
	// one edited a moment ago is not either, yet.
	for _, text := range []string{"repo: ${HOME}/x\n", "repo: relative/dir\n"} {
		writeConfig(text, time.Hour)
		runBin(t, bin, parent, nil, "", "status")
		if usedFastPath(t, bin, parent, nil, "status") {
			t.Errorf("fast path taken for config %q", text)
		}
	}
	writeConfig("repo: "+alive+"\n", 0)
	runBin(t, bin, parent, nil, "", "status")
	if usedFastPath(t, bin, parent, nil, "status") {
		t.Error("fast path taken for a config written a moment ago")
	}
}

// TestStatusFastPathInitsLittle: answering from the fast path, the binary initialises none of
// the packages that make a full start slow (GODEBUG=inittrace=1 lists each package's init as
// it runs), while the full command does initialise them, so the check can fail.
func TestStatusFastPathInitsLittle(t *testing.T) {
	bin := memdBinary(t)
	isolate(t)
	repo := t.TempDir()
	writeDoc(t, repo, statusline.StateOK, os.Getpid())
	heavy := []string{"init encoding/json ", "init encoding/gob ", "init net/http ", "init unicode ",
		"init github.com/", "init google.golang.org/", "init gopkg.in/", "init howett.net/"}
	inits := func(env ...string) (found []string) {
		r := runBin(t, bin, repo, append(env, "GODEBUG=inittrace=1"), "", "status", "--repo", repo)
		if r.code != 0 || r.stdout != "memd: +2 ~1 · 14:32\n" {
			t.Fatalf("memd status %v: %+v", env, r)
		}
		for _, h := range heavy {
			if strings.Contains(r.stderr, h) {
				found = append(found, strings.TrimSpace(h))
			}
		}
		return found
	}
	if found := inits(); len(found) > 0 {
		t.Errorf("the fast path let these initialise first: %v (keep internal/fastpath's imports to what os imports)", found)
	}
	if found := inits("MEMD_NO_FASTPATH=1"); len(found) < 4 {
		t.Errorf("the full command initialised only %v of %v: the check no longer sees them", found, heavy)
	}
}

// TestStatusClaude: the JSON Claude Code pipes in is read and ignored; a stdin that never
// closes does not hold the line up.
func TestStatusClaude(t *testing.T) {
	bin := memdBinary(t)
	isolate(t)
	repo := t.TempDir()
	d := writeDoc(t, repo, statusline.StateOK, os.Getpid())
	want, _ := statusline.Render(&d, "ansi", time.Now(), nil)
	r := runBin(t, bin, repo, nil, `{"session_id":"abc","model":{"display_name":"Opus"}}`, "status", "--format", "claude", "--repo", repo)
	if r.code != 0 || r.stdout != want+"\n" {
		t.Fatalf("claude: %+v, want %q", r, want)
	}
	cmd := exec.Command(bin, "status", "--format", "claude", "--repo", repo)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	cmd.Stdin = pr
	var o bytes.Buffer
	cmd.Stdout = &o
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil || o.String() != want+"\n" {
			t.Errorf("open stdin: %v %q", err, o.String())
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("memd status --format claude waited on an open stdin")
	}
}
