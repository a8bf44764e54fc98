package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"howett.net/plist"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/service"
)

// Two memory repos on one machine, the real binary in a sandbox HOME: two services installed
// (the first is the default memd.service, the second an instance of memd@.service; both verified
// by systemd-analyze as the units they are, both plists parsed), both `memd run` live on the
// default http.listen without fighting for it, `memd status --all` in every format, and
// uninstalling one leaves the other.
func TestSeveralReposOneMachine(t *testing.T) {
	bin := memdBinary(t)
	home, env := sandboxHome(t)
	run := func(args ...string) string {
		t.Helper()
		out, code := testutil.Run(t, bin, testutil.Options{Env: env}, time.Minute, args...)
		if code != 0 {
			t.Fatalf("memd %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	repos, configs := map[string]string{}, map[string]string{}
	for _, name := range []string{"memory", "projects"} {
		repo := filepath.Join(home, name)
		cfg := filepath.Join(home, name+".yaml")
		// http.listen stays the default for both: the second must find its own port.
		if err := os.WriteFile(cfg, []byte("repo: "+repo+"\nsleep: {catch_up: false}\nlog: {level: debug}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		run("init", "--config", cfg)
		repos[name], configs[name] = repo, cfg
	}

	// Install both, for systemd and for launchd.
	run("service", "install", "--systemd", "--config", configs["memory"])
	run("service", "install", "--systemd", "--config", configs["projects"])
	run("service", "install", "--systemd", "--config", configs["projects"]) // again: unchanged
	unitDir := filepath.Join(home, ".config", "systemd", "user")
	inst := service.InstanceName(repos["projects"])
	verifyInstalled(t, filepath.Join(unitDir, service.UnitName))
	verifyInstalled(t, filepath.Join(unitDir, service.InstanceUnit(inst)))
	if list := run("service", "list", "--systemd"); !strings.Contains(list, "memd.service\t"+repos["memory"]) ||
		!strings.Contains(list, service.InstanceUnit(inst)+"\t"+repos["projects"]) {
		t.Fatalf("service list:\n%s", list)
	}
	run("service", "install", "--launchd", "--config", configs["memory"])
	run("service", "install", "--launchd", "--config", configs["projects"])
	for _, label := range []string{service.DefaultLabel, service.InstanceLabel(inst)} {
		data, err := os.ReadFile(filepath.Join(home, "Library", "LaunchAgents", label+".plist"))
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Label string `plist:"Label"`
		}
		if _, err := plist.Unmarshal(data, &doc); err != nil || doc.Label != label {
			t.Fatalf("plist %s: %+v %v", label, doc, err)
		}
	}

	// Both live, each on its own port, each answering for its own repo.
	dA := testutil.Start(t, bin, testutil.Options{Env: env, LogOnFailure: true}, "run", "--config", configs["memory"])
	dB := testutil.Start(t, bin, testutil.Options{Env: env, LogOnFailure: true}, "run", "--config", configs["projects"])
	if dA.Addr() == "" || dA.Addr() == dB.Addr() {
		t.Fatalf("addresses %q and %q", dA.Addr(), dB.Addr())
	}
	for name, d := range map[string]*testutil.Daemon{"memory": dA, "projects": dB} {
		code, body, err := d.Get("/status.json")
		if err != nil || code != 200 || !strings.Contains(body, `"repo":`+jsonString(repos[name])) {
			t.Fatalf("%s /status.json: %d %v %.200s", name, code, err, body)
		}
		rec, err := os.ReadFile(filepath.Join(repos[name], ".git", "memd", "http.addr"))
		if err != nil || strings.TrimSpace(string(rec)) != d.Addr() {
			t.Fatalf("%s http.addr %q, listening on %s (%v)", name, rec, d.Addr(), err)
		}
	}
	// A change in projects: its line says so; memory stays ok.
	if err := os.WriteFile(filepath.Join(repos["projects"], "projects", "new.md"), []byte("# new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "projects to commit", 30*time.Second, func() bool {
		d, err := statusline.ReadAt(repos["projects"])
		return err == nil && d.LastCommit != nil && d.LastCommit.Added == 1
	}, dB.Describe)

	// status --all: every format draws one line (or its protocol's lines) naming both.
	for _, f := range statusline.Formats {
		out := run("status", "--all", "--format", f)
		switch f {
		case "json":
			var list []statusline.Named
			if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 {
				t.Fatalf("status --all json: %v\n%s", err, out)
			}
			for _, n := range list {
				if n.Doc == nil || n.Doc.Repo != n.Repo || repos[n.Name] != n.Repo {
					t.Fatalf("json entry %+v", n)
				}
			}
		case "sidebar":
			if !strings.Contains(out, "memory ok") || !strings.Contains(out, "projects") {
				t.Fatalf("sidebar: %s", out)
			}
		default:
			if !strings.Contains(out, "memory") || !strings.Contains(out, "projects") {
				t.Fatalf("status --all --format %s: %q", f, out)
			}
		}
	}
	plain := strings.TrimSpace(run("status", "--all"))
	if !strings.HasPrefix(plain, "memd: memory ok · projects +1 · ") || len(plain) > statusline.AllMaxWidth {
		t.Fatalf("status --all: %q (want memory ok, projects with its change)", plain)
	}

	// Uninstall one; the other stays.
	run("service", "uninstall", "--systemd", "--config", configs["projects"])
	if list := run("service", "list", "--systemd"); strings.Contains(list, repos["projects"]) || !strings.Contains(list, repos["memory"]) {
		t.Fatalf("after uninstall of projects:\n%s", list)
	}
	if _, err := os.Stat(filepath.Join(unitDir, service.UnitName)); err != nil {
		t.Fatal("the default unit went with the instance")
	}
	dA.Stop()
	dB.Stop()
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// verifyInstalled runs systemd-analyze verify on an installed unit (an instance name finds
// its template and drop-in beside it); any output is a failure.
func verifyInstalled(t *testing.T, unit string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze not found and CI is set")
		}
		t.Log("systemd-analyze not installed: unit not verified")
		return
	}
	cmd := exec.Command(analyze, "--user", "--man=false", "verify", unit)
	cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if s := strings.TrimSpace(string(out)); err != nil || s != "" {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", filepath.Base(unit), err, s)
	}
}
