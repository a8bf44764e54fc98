package service

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"howett.net/plist"
)

// realExecutable copies /bin/true to a path with a space and a % in it, so a quoting
// mistake in ExecStart makes systemd-analyze report a missing executable.
func realExecutable(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bin dir %h")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true:", err)
	}
	exe := filepath.Join(dir, "memd")
	if err := os.WriteFile(exe, src, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func testParams(t *testing.T, exe string) Params {
	t.Helper()
	home := t.TempDir()
	repo := filepath.Join(home, "my memory $x")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	return Params{
		Executable: exe,
		ConfigFile: filepath.Join(home, ".config", "memd", "config & more.yaml"),
		Repo:       repo,
		Home:       home,
	}
}

// verifyUnit runs systemd-analyze verify on the unit file and returns what it printed.
// verify exits 0 on unknown keys and bad values (it only warns), so the caller treats any
// output as a failure.
func verifyUnit(t *testing.T, path string) string {
	t.Helper()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found and CI is set")
		}
		t.Skip("systemd-analyze not installed")
	}
	// It is a user unit, so verify it as one: the user manager needs only a private
	// $XDG_RUNTIME_DIR. Where even that cannot start, system mode parses the same settings.
	run := func(user bool) (string, error) {
		args := []string{"--man=false", "verify", path}
		if user {
			args = append([]string{"--user"}, args...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return strings.TrimSpace(out.String()), err
	}
	s, err := run(true)
	if strings.Contains(s, "Failed to initialize manager") {
		t.Logf("user manager unavailable (%s); verifying in system mode", s)
		s, err = run(false)
	}
	if err != nil && s == "" {
		s = err.Error()
	}
	return s
}

func TestSystemdUnitVerifies(t *testing.T) {
	p := testParams(t, realExecutable(t))
	data, err := RenderSystemd(p)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	unit := filepath.Join(dir, UnitName)
	if err := os.WriteFile(unit, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verifyUnit(t, unit); out != "" {
		t.Fatalf("systemd-analyze verify complained:\n%s\nunit:\n%s", out, data)
	}

	// The check above can fail: the same unit pointing at a missing binary, or with a typo
	// in a key, is reported.
	bad := strings.Replace(string(data), "WatchdogSec=60", "WatchdogSecs=60", 1)
	if err := os.WriteFile(unit, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verifyUnit(t, unit); !strings.Contains(out, "WatchdogSecs") {
		t.Fatalf("verify did not report an unknown key; got %q", out)
	}
	p.Executable = filepath.Join(dir, "no such memd")
	data2, err := RenderSystemd(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(unit, data2, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := verifyUnit(t, unit); !strings.Contains(out, "not executable") {
		t.Fatalf("verify did not report a missing executable; got %q", out)
	}
}

// unitSettings reads "Key=Value" lines by section, the last value winning.
func unitSettings(data []byte) map[string]string {
	m := map[string]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			m[section+"."+k] = v
		}
	}
	return m
}

func TestSystemdUnitContent(t *testing.T) {
	p := Params{Executable: "/usr/local/bin/memd", ConfigFile: "/home/u/.config/memd/config.yaml", Repo: "/home/u/memory"}
	data, err := RenderSystemd(p)
	if err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(string(data), "\n"); !strings.HasPrefix(first, "# "+Marker) {
		t.Errorf("first line %q does not carry the marker", first)
	}
	want := map[string]string{
		"Service.Type":            "notify",
		"Service.NotifyAccess":    "main",
		"Service.WatchdogSec":     "60",
		"Service.Restart":         "on-failure",
		"Service.ExecReload":      "/bin/kill -HUP $MAINPID",
		"Service.ExecStart":       "/usr/local/bin/memd run --config /home/u/.config/memd/config.yaml",
		"Service.Environment":     "GIT_TERMINAL_PROMPT=0",
		"Service.NoNewPrivileges": "yes",
		"Service.ProtectSystem":   "strict",
		"Service.ReadWritePaths":  "-/home/u/memory",
		"Service.KillMode":        "mixed",
		"Install.WantedBy":        "default.target",
	}
	got := unitSettings(data)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["Service.ProtectHome"]; ok {
		t.Error("ProtectHome is set: it would hide a repo in the home directory")
	}
	if !strings.Contains(string(data), "loginctl enable-linger") {
		t.Error("no enable-linger hint")
	}

	// No config: no --config; an explicit repo: --repo.
	p.ConfigFile, p.RepoFlag = "", "/srv/mem"
	data, _ = RenderSystemd(p)
	if got := unitSettings(data)["Service.ExecStart"]; got != "/usr/local/bin/memd run --repo /srv/mem" {
		t.Errorf("ExecStart = %q", got)
	}

	// A repo under /tmp would vanish behind a private /tmp.
	p.Repo = "/tmp/demo-memory"
	data, _ = RenderSystemd(p)
	if got, ok := unitSettings(data)["Service.PrivateTmp"]; ok {
		t.Errorf("PrivateTmp=%s with the repo in /tmp", got)
	}
	if !strings.Contains(string(data), "\nReadWritePaths=-/tmp/demo-memory\n# PrivateTmp= is off") {
		t.Errorf("unexpected layout:\n%s", data)
	}
}

func TestSystemdQuote(t *testing.T) {
	cases := []struct {
		in   string
		exec bool
		want string
	}{
		{"/usr/bin/memd", true, "/usr/bin/memd"},
		{"/a b/memd", true, `"/a b/memd"`},
		{`/a"b\c`, true, `"/a\"b\\c"`},
		{"/100%/x", false, "/100%%/x"},
		{"/$HOME/x", true, "/$$HOME/x"},
		{"/$HOME/x", false, "/$HOME/x"},
		{";", true, `";"`},
		{"", true, `""`},
	}
	for _, c := range cases {
		if got := systemdQuote(c.in, c.exec); got != c.want {
			t.Errorf("systemdQuote(%q, %v) = %q, want %q", c.in, c.exec, got, c.want)
		}
	}
}

func TestLaunchdPlistParses(t *testing.T) {
	p := testParams(t, "/Applications/memd & co/<bin>/memd")
	p.RepoFlag = p.Repo
	data, err := RenderLaunchd(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data[:300], []byte("<!-- "+Marker)) {
		t.Errorf("no marker comment near the top:\n%s", data[:300])
	}
	var doc struct {
		Label                string
		ProgramArguments     []string
		RunAtLoad            bool
		KeepAlive            map[string]bool
		ThrottleInterval     int
		ExitTimeOut          int
		ProcessType          string
		EnvironmentVariables map[string]string
		StandardOutPath      string
		StandardErrorPath    string
	}
	if _, err := plist.Unmarshal(data, &doc); err != nil {
		t.Fatalf("plist does not parse: %v\n%s", err, data)
	}
	if doc.Label != DefaultLabel {
		t.Errorf("Label = %q", doc.Label)
	}
	if want := p.Args(); !reflect.DeepEqual(doc.ProgramArguments, want) {
		t.Errorf("ProgramArguments = %q, want %q", doc.ProgramArguments, want)
	}
	if !doc.RunAtLoad {
		t.Error("RunAtLoad is not true")
	}
	if v, ok := doc.KeepAlive["SuccessfulExit"]; !ok || v {
		t.Errorf("KeepAlive = %v, want SuccessfulExit false", doc.KeepAlive)
	}
	if doc.ThrottleInterval < 10 {
		t.Errorf("ThrottleInterval = %d", doc.ThrottleInterval)
	}
	if doc.ExitTimeOut < 30 {
		t.Errorf("ExitTimeOut = %d: too short to commit what is pending", doc.ExitTimeOut)
	}
	if doc.ProcessType != "Standard" {
		t.Errorf("ProcessType = %q", doc.ProcessType)
	}
	path := strings.Split(doc.EnvironmentVariables["PATH"], ":")
	for _, d := range []string{"/usr/local/bin", "/opt/homebrew/bin", "/usr/bin", "/bin"} {
		if !slices.Contains(path, d) {
			t.Errorf("PATH %q lacks %s", doc.EnvironmentVariables["PATH"], d)
		}
	}
	if doc.EnvironmentVariables["GIT_TERMINAL_PROMPT"] != "0" {
		t.Errorf("GIT_TERMINAL_PROMPT = %q", doc.EnvironmentVariables["GIT_TERMINAL_PROMPT"])
	}
	wantLog := filepath.Join(p.Home, "Library", "Logs", "memd", "memd.log")
	if doc.StandardOutPath != wantLog || doc.StandardErrorPath != wantLog {
		t.Errorf("log paths %q %q, want %q", doc.StandardOutPath, doc.StandardErrorPath, wantLog)
	}
}

func TestRenderRefusesBadParams(t *testing.T) {
	good := Params{Executable: "/usr/bin/memd", Repo: "/home/u/memory", Home: "/home/u"}
	cases := map[string]func(p *Params){
		"relative executable": func(p *Params) { p.Executable = "memd" },
		"relative config":     func(p *Params) { p.ConfigFile = "config.yaml" },
		"newline in repo":     func(p *Params) { p.Repo = "/home/u/mem\nExecStartPre=/bin/rm" },
		"bad label":           func(p *Params) { p.Label = "dev--memd" },
	}
	for name, mod := range cases {
		for _, k := range []Kind{Systemd, Launchd} {
			p := good
			mod(&p)
			if _, err := Render(k, p); !errors.Is(err, ErrBadParams) {
				t.Errorf("%s/%s: err = %v, want ErrBadParams", name, k, err)
			}
		}
	}
	if _, err := Render("upstart", good); !errors.Is(err, ErrBadParams) {
		t.Errorf("unknown kind: err = %v", err)
	}
}

func TestShellJoinRoundTrip(t *testing.T) {
	argv := []string{"launchctl", "bootstrap", "gui/501", "/Users/a b/it's $HOME/x.plist", "", "--x=1"}
	line := ShellJoin(argv)
	// Run the joined line through a real shell with printf in place of the command.
	script := "printf '[%s]' " + ShellJoin(argv)
	got, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", script, err)
	}
	want := ""
	for _, a := range argv {
		want += "[" + a + "]"
	}
	if string(got) != want {
		t.Fatalf("shell read %q as %s, want %s", line, got, want)
	}
}

// systemd-analyze security rates the sandbox from 0 (locked down) to 10; memd's unit must
// stay at or under 7.0 (it was 8.8 before the seccomp lines). The same unit stripped of
// its hardening goes over, which shows the check can fail.
func TestSystemdUnitExposure(t *testing.T) {
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found and CI is set")
		}
		t.Skip("systemd-analyze not installed")
	}
	p := testParams(t, realExecutable(t))
	data, err := RenderSystemd(p)
	if err != nil {
		t.Fatal(err)
	}
	rate := func(unit []byte) (string, error) {
		path := filepath.Join(t.TempDir(), UnitName)
		if err := os.WriteFile(path, unit, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--user", "--offline=yes", "--threshold=70", "security", path)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := rate(data)
	if strings.Contains(out, "offline") && strings.Contains(out, "unrecognized") {
		t.Skip("this systemd-analyze has no --offline (systemd < 250)")
	}
	if err != nil {
		t.Fatalf("exposure over 7.0 (%v):\n%s", err, lastLines(out, 3))
	}
	hardening := map[string]bool{}
	for _, k := range strings.Fields("NoNewPrivileges ProtectSystem PrivateTmp RestrictSUIDSGID RestrictRealtime LockPersonality SystemCallArchitectures SystemCallFilter RestrictNamespaces RestrictAddressFamilies") {
		hardening[k] = true
	}
	var bare []string
	for _, l := range strings.Split(string(data), "\n") {
		if k, _, ok := strings.Cut(l, "="); ok && hardening[k] {
			continue
		}
		bare = append(bare, l)
	}
	if out, err := rate([]byte(strings.Join(bare, "\n"))); err == nil {
		t.Fatalf("an unhardened unit passed the threshold:\n%s", lastLines(out, 3))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
