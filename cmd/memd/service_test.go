package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"howett.net/plist"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/service"
)

// serviceHome points $HOME at a temp dir with a config naming a repo inside it, so install
// and uninstall never touch the real user's files.
func serviceHome(t *testing.T) (home, config, repo string) {
	t.Helper()
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("MEMD_CONFIG", "")
	repo = filepath.Join(home, "memory")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(home, "memd.yaml")
	if err := os.WriteFile(config, []byte("repo: "+repo+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return home, config, repo
}

func runService(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, stdin: strings.NewReader(""), now: time.Now}
	code := a.main(append([]string{"service"}, args...))
	return code, out.String(), errb.String()
}

func thisExecutable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	return exe
}

func TestServicePrint(t *testing.T) {
	_, config, repo := serviceHome(t)
	code, out, errs := runService(t, "print", "--systemd", "--config", config)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "# "+service.Marker) {
		t.Fatalf("print does not start with the marker:\n%s", out)
	}
	wantExec := "ExecStart=" + thisExecutable(t) + " run --config " + config + "\n"
	if !strings.Contains(out, wantExec) {
		t.Errorf("no %q in:\n%s", wantExec, out)
	}
	if !strings.Contains(out, "ReadWritePaths=-"+repo+"\n") {
		t.Errorf("repo not writable in:\n%s", out)
	}

	code, out, errs = runService(t, "print", "--launchd", "--config", config)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct{ ProgramArguments []string }
	if _, err := plist.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("printed plist does not parse: %v", err)
	}
	if want := []string{thisExecutable(t), "run", "--config", config}; !reflect.DeepEqual(doc.ProgramArguments, want) {
		t.Errorf("ProgramArguments = %q, want %q", doc.ProgramArguments, want)
	}

	// --repo given to install is passed on; no config file means no --config.
	other := filepath.Join(t.TempDir(), "other")
	code, out, _ = runService(t, "print", "--systemd", "--repo", other)
	if code != exitOK || !strings.Contains(out, " run --repo "+other+"\n") || strings.Contains(out, "--config") {
		t.Errorf("exit %d, ExecStart with --repo and without --config expected:\n%s", code, out)
	}
}

func TestServiceInstallUninstall(t *testing.T) {
	home, config, _ := serviceHome(t)
	unit := filepath.Join(home, ".config", "systemd", "user", "memd.service")

	code, out, errs := runService(t, "install", "--systemd", "--config", config)
	if code != exitOK {
		t.Fatalf("install: exit %d: %s", code, errs)
	}
	data, err := os.ReadFile(unit)
	if err != nil {
		t.Fatalf("unit not written: %v", err)
	}
	if !strings.Contains(string(data), "ExecStart="+thisExecutable(t)+" run --config "+config) {
		t.Errorf("installed unit:\n%s", data)
	}
	for _, want := range []string{"created " + unit, "systemctl --user daemon-reload", "systemctl --user enable --now memd.service", "loginctl enable-linger"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = runService(t, "install", "--systemd", "--config", config)
	if code != exitOK || !strings.Contains(out, "up to date") {
		t.Errorf("second install: exit %d:\n%s", code, out)
	}

	code, out, _ = runService(t, "uninstall", "--systemd")
	if code != exitOK || !strings.Contains(out, "removed "+unit) || !strings.Contains(out, "systemctl --user stop memd.service") {
		t.Errorf("uninstall: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("unit still there: %v", err)
	}
	code, out, _ = runService(t, "uninstall", "--systemd")
	if code != exitOK || !strings.Contains(out, "nothing to remove") {
		t.Errorf("second uninstall: exit %d:\n%s", code, out)
	}

	// A file memd did not write: refused both ways, replaced with --force and kept.
	foreign := "[Service]\nExecStart=/opt/other\n"
	if err := os.WriteFile(unit, []byte(foreign), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runService(t, "install", "--systemd", "--config", config)
	if code != exitFailed || !strings.Contains(errs, unit) || !strings.Contains(errs, "--force") {
		t.Errorf("install over a foreign unit: exit %d: %s", code, errs)
	}
	code, _, errs = runService(t, "uninstall", "--systemd")
	if code != exitFailed || !strings.Contains(errs, "not written by memd") {
		t.Errorf("uninstall of a foreign unit: exit %d: %s", code, errs)
	}
	if b, _ := os.ReadFile(unit); string(b) != foreign {
		t.Fatal("foreign unit changed")
	}
	code, out, errs = runService(t, "install", "--systemd", "--force", "--config", config)
	if code != exitOK || !strings.Contains(out, unit+".bak") {
		t.Fatalf("forced install: exit %d: %s%s", code, out, errs)
	}
	if b, _ := os.ReadFile(unit + ".bak"); string(b) != foreign {
		t.Fatal("foreign unit not kept")
	}
}

// --launchd writes ~/Library/LaunchAgents/dev.memd.agent.plist and creates the log dir.
func TestServiceInstallLaunchd(t *testing.T) {
	home, config, _ := serviceHome(t)
	code, out, errs := runService(t, "install", "--launchd", "--config", config)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	path := filepath.Join(home, "Library", "LaunchAgents", service.DefaultLabel+".plist")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(home, "Library", "Logs", "memd")); err != nil || !fi.IsDir() {
		t.Errorf("log dir: %v", err)
	}
	want := "launchctl bootstrap gui/" + strconv.Itoa(os.Getuid()) + " " + path
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	code, out, _ = runService(t, "uninstall", "--launchd")
	if code != exitOK || !strings.Contains(out, "launchctl bootout gui/"+strconv.Itoa(os.Getuid())+"/"+service.DefaultLabel) {
		t.Errorf("uninstall: exit %d:\n%s", code, out)
	}
}

// fakeTool puts an executable named name first on PATH that records its arguments, one
// call a line, and fails when its arguments contain fail.
func fakeTool(t *testing.T, name, fail string) (log string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	log = filepath.Join(bin, name+".log")
	script := "#!/bin/sh\necho \"$*\" >> '" + log + "'\n"
	if fail != "" {
		script += "case \"$*\" in *'" + fail + "'*) echo 'Unit memd.service not loaded.' >&2; exit 5;; esac\n"
	}
	if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

func readLines(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// --apply (or a bare --now, as in systemctl enable --now) runs the commands it would print.
func TestServiceApplyRunsCommands(t *testing.T) {
	_, config, _ := serviceHome(t)
	log := fakeTool(t, "systemctl", "stop")
	code, _, errs := runService(t, "install", "--systemd", "--config", config, "--now")
	if code != exitOK {
		t.Fatalf("install --now: exit %d: %s", code, errs)
	}
	want := []string{"--user daemon-reload", "--user enable --now memd.service"}
	if got := readLines(t, log); !reflect.DeepEqual(got, want) {
		t.Fatalf("systemctl calls %q, want %q", got, want)
	}
	// stop fails (not loaded): a warning, not a failure.
	code, _, errs = runService(t, "uninstall", "--systemd", "--apply")
	if code != exitOK {
		t.Fatalf("uninstall --apply: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "not running") {
		t.Errorf("no warning for the failed stop: %q", errs)
	}
	want = append(want, "--user stop memd.service", "--user daemon-reload")
	if got := readLines(t, log); !reflect.DeepEqual(got, want) {
		t.Fatalf("systemctl calls %q, want %q", got, want)
	}

	// A command that must work and fails makes the command fail.
	fakeTool(t, "systemctl", "daemon-reload")
	if code, _, _ := runService(t, "install", "--systemd", "--config", config, "--apply"); code != exitFailed {
		t.Errorf("failing daemon-reload: exit %d, want 1", code)
	}
}

func TestServiceUsage(t *testing.T) {
	serviceHome(t)
	for _, args := range [][]string{
		{}, {"restart"}, {"print", "install"}, {"print", "--systemd", "--launchd"}, {"print", "--apply"},
	} {
		if code, _, _ := runService(t, args...); code != exitUsage {
			t.Errorf("memd service %q: exit %d, want 2", args, code)
		}
	}
}

// A broken config stops install (exit 2, naming the key) but never uninstall.
func TestServiceBadConfig(t *testing.T) {
	home, _, _ := serviceHome(t)
	bad := filepath.Join(home, "bad.yaml")
	if err := os.WriteFile(bad, []byte("log: {level: loud}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runService(t, "install", "--systemd", "--config", bad)
	if code != exitUsage || !strings.Contains(errs, "log.level") {
		t.Errorf("install with a bad config: exit %d: %s", code, errs)
	}
	if code, _, errs := runService(t, "uninstall", "--systemd", "--config", bad); code != exitOK {
		t.Errorf("uninstall with a bad config: exit %d: %s", code, errs)
	}
}

// configs/config.example.yaml holds every key at its default: loading it changes nothing.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	data, err := os.ReadFile("../../configs/config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := memd.DefaultConfig()
	cfg.Repo = "unset"
	if err := parseConfig(data, &cfg); err != nil {
		t.Fatal(err)
	}
	// YAML [] is an empty slice, the default nil: the same for memd.
	if len(cfg.Watch.Ignore) == 0 {
		cfg.Watch.Ignore = nil
	}
	if len(cfg.Arcs.Summarizer.Command) == 0 {
		cfg.Arcs.Summarizer.Command = nil
	}
	for _, argv := range []*[]string{&cfg.Hooks.AfterSync, &cfg.Hooks.AfterSleep, &cfg.Hooks.AfterCommit, &cfg.Agents.ClaudeCode.Roots} {
		if len(*argv) == 0 {
			*argv = nil
		}
	}
	if def := memd.DefaultConfig(); !reflect.DeepEqual(cfg, def) {
		t.Errorf("example config differs from the defaults:\n got %+v\nwant %+v", cfg, def)
	}
}
