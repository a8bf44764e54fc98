package service

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"howett.net/plist"
)

// systemd-escape --path is the reference for instance names.
func TestInstanceNameIsSystemdEscape(t *testing.T) {
	bin, err := exec.LookPath("systemd-escape")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-escape not found and CI is set")
		}
		t.Skip("systemd-escape not installed")
	}
	for _, repo := range []string{"/home/u/memory", "/home/u/my memory $x", "/home/u/.hidden/a-b/é%x",
		"/.dot/x", "/a//b/", "/srv/mem:ory_1.2", "/tmp/x\\y"} {
		out, err := exec.Command(bin, "--path", repo).Output()
		if err != nil {
			t.Fatalf("systemd-escape %q: %v", repo, err)
		}
		if got, want := InstanceName(repo), strings.TrimSpace(string(out)); got != want {
			t.Errorf("InstanceName(%q) = %q, systemd-escape says %q", repo, got, want)
		}
		if l := InstanceLabel(InstanceName(repo)); !labelOK(l) {
			t.Errorf("InstanceLabel for %q = %q: not a launchd label", repo, l)
		}
	}
}

func instanceParams2(t *testing.T, exe, home, name string) Params {
	t.Helper()
	repo := filepath.Join(home, name)
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	return Params{Executable: exe, Repo: repo, Home: home, Instance: InstanceName(repo),
		ConfigFile: filepath.Join(home, ".config", "memd", name+" %h.yaml")}
}

// Two repos, two instances: one template, two drop-ins, each verified by systemd as the
// instance it is; uninstalling one leaves the other and the template, the last takes the
// template with it. The default unit is untouched throughout.
func TestSystemdInstances(t *testing.T) {
	exe := realExecutable(t)
	home := t.TempDir()
	e := Env{Home: home, UID: 1000}
	def, err := Install(Systemd, Params{Executable: exe, Repo: filepath.Join(home, "memory"), Home: home}, e, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defBytes, _ := os.ReadFile(def.Path)
	a, b := instanceParams2(t, exe, home, "work memory"), instanceParams2(t, exe, home, "projects")
	for _, p := range []Params{a, b} {
		res, err := InstallInstance(Systemd, p, e, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Action != Created || !strings.HasSuffix(res.Path, filepath.Join(InstanceUnit(p.Instance)+".d", DropInName)) {
			t.Fatalf("install %s: %+v", p.Repo, res)
		}
		if got := res.Next[len(res.Next)-1].String(); !strings.Contains(got, "enable --now "+ShellJoin([]string{InstanceUnit(p.Instance)})) {
			t.Errorf("next command %q", got)
		}
		again, err := InstallInstance(Systemd, p, e, Options{})
		if err != nil || again.Action != Unchanged {
			t.Fatalf("second install of %s: %+v %v", p.Repo, again, err)
		}
	}
	dir := filepath.Dir(def.Path)
	for _, p := range []Params{a, b} {
		if out := verifyUnit(t, filepath.Join(dir, InstanceUnit(p.Instance))); out != "" {
			t.Fatalf("systemd-analyze verify %s:\n%s", InstanceUnit(p.Instance), out)
		}
	}
	drop, _ := os.ReadFile(filepath.Join(dir, InstanceUnit(a.Instance)+".d", DropInName))
	if !strings.Contains(string(drop), `Environment="MEMD_CONFIG=`+strings.ReplaceAll(a.ConfigFile, "%", "%%")+`"`) {
		t.Errorf("drop-in lacks the config:\n%s", drop)
	}
	list, err := List(Systemd, e)
	if err != nil || len(list) != 3 || list[0].Instance != "" || list[0].Repo != filepath.Join(home, "memory") {
		t.Fatalf("list: %+v %v", list, err)
	}
	repos := map[string]bool{list[1].Repo: true, list[2].Repo: true}
	if !repos[a.Repo] || !repos[b.Repo] {
		t.Fatalf("list repos %v, want %s and %s", repos, a.Repo, b.Repo)
	}

	// systemctl enable's link for a; uninstall removes it with a's drop-in only.
	wants := filepath.Join(dir, "default.target.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, TemplateName), filepath.Join(wants, InstanceUnit(a.Instance))); err != nil {
		t.Fatal(err)
	}
	res, err := UninstallInstance(Systemd, e, a.Instance, Options{})
	if err != nil || res.Action != Removed || len(res.Removed) != 1 {
		t.Fatalf("uninstall a: %+v %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, TemplateName)); err != nil {
		t.Fatal("the template went while b still runs from it")
	}
	if list, _ := List(Systemd, e); len(list) != 2 || list[1].Repo != b.Repo {
		t.Fatalf("after uninstall of a: %+v", list)
	}
	if _, err := UninstallInstance(Systemd, e, b.Instance, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TemplateName)); !os.IsNotExist(err) {
		t.Fatal("the template stayed after the last instance")
	}
	if now, _ := os.ReadFile(def.Path); string(now) != string(defBytes) {
		t.Fatal("the default unit changed")
	}
}

// A launchd instance is its own plist with its own label and log, naming its repo.
func TestLaunchdInstances(t *testing.T) {
	home := t.TempDir()
	e := Env{Home: home, UID: 501}
	a := instanceParams2(t, "/usr/local/bin/memd", home, "work memory")
	b := instanceParams2(t, "/usr/local/bin/memd", home, "projects")
	for _, p := range []Params{a, b} {
		res, err := InstallInstance(Launchd, p, e, Options{})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(res.Path)
		var doc struct {
			Label            string   `plist:"Label"`
			ProgramArguments []string `plist:"ProgramArguments"`
			StandardOutPath  string   `plist:"StandardOutPath"`
		}
		if _, err := plist.Unmarshal(data, &doc); err != nil {
			t.Fatalf("plist does not parse: %v\n%s", err, data)
		}
		if doc.Label != InstanceLabel(p.Instance) || filepath.Base(res.Path) != doc.Label+".plist" ||
			doc.StandardOutPath != filepath.Join(home, "Library", "Logs", "memd", doc.Label+".log") {
			t.Errorf("plist %+v at %s", doc, res.Path)
		}
		if n := len(doc.ProgramArguments); n < 2 || doc.ProgramArguments[n-2] != "--repo" || doc.ProgramArguments[n-1] != p.Repo {
			t.Errorf("args %q", doc.ProgramArguments)
		}
	}
	list, err := List(Launchd, e)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, err := UninstallInstance(Launchd, e, a.Instance, Options{}); err != nil {
		t.Fatal(err)
	}
	if list, _ := List(Launchd, e); len(list) != 1 || list[0].Repo != b.Repo {
		t.Fatalf("after uninstall: %+v", list)
	}
}
