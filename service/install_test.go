package service

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testEnv(t *testing.T) Env {
	t.Helper()
	return Env{Home: t.TempDir(), UID: 501}
}

func paramsFor(e Env) Params {
	return Params{Executable: "/usr/local/bin/memd", Repo: filepath.Join(e.Home, "memory"), Home: e.Home}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUnitPath(t *testing.T) {
	e := Env{Home: "/home/u"}
	cases := []struct {
		k    Kind
		xdg  string
		want string
	}{
		{Systemd, "", "/home/u/.config/systemd/user/memd.service"},
		{Systemd, "/xdg", "/xdg/systemd/user/memd.service"},
		{Systemd, "relative/xdg", "/home/u/.config/systemd/user/memd.service"}, // XDG spec: ignore relative
		{Launchd, "/xdg", "/home/u/Library/LaunchAgents/dev.memd.agent.plist"},
	}
	for _, c := range cases {
		e.XDGConfigHome = c.xdg
		got, err := UnitPath(c.k, e, "")
		if err != nil || got != c.want {
			t.Errorf("UnitPath(%s, xdg=%q) = %q, %v; want %q", c.k, c.xdg, got, err, c.want)
		}
	}
	if _, err := UnitPath(Systemd, Env{Home: ""}, ""); !errors.Is(err, ErrBadParams) {
		t.Errorf("empty home: err = %v", err)
	}
}

func TestInstallUninstallIdempotent(t *testing.T) {
	for _, k := range []Kind{Systemd, Launchd} {
		t.Run(string(k), func(t *testing.T) {
			e := testEnv(t)
			p := paramsFor(e)
			res, err := Install(k, p, e, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != Created {
				t.Fatalf("first install: %s", res.Action)
			}
			want, _ := Render(k, p)
			if got := readFile(t, res.Path); got != string(want) {
				t.Fatalf("installed file differs from Render")
			}
			if fi, _ := os.Stat(res.Path); fi.Mode().Perm() != 0o644 {
				t.Errorf("mode %v", fi.Mode())
			}
			if len(res.Next) == 0 {
				t.Error("no next commands")
			}
			if k == Launchd {
				if fi, err := os.Stat(filepath.Dir(p.LogFile())); err != nil || !fi.IsDir() {
					t.Errorf("log dir not created: %v", err)
				}
				if res.Next[0].String() != "launchctl bootstrap gui/501 "+res.Path {
					t.Errorf("next = %q", res.Next[0])
				}
			} else if got := res.Next[len(res.Next)-1].String(); got != "systemctl --user enable --now memd.service" {
				t.Errorf("next = %q", got)
			}

			// Same again: nothing written.
			before, _ := os.Stat(res.Path)
			res2, err := Install(k, p, e, Options{})
			if err != nil || res2.Action != Unchanged {
				t.Fatalf("second install: %s, %v", res2.Action, err)
			}
			after, _ := os.Stat(res.Path)
			if !os.SameFile(before, after) {
				t.Error("an unchanged install replaced the file")
			}

			// A new config: our own file is updated in place.
			p.ConfigFile = filepath.Join(e.Home, "c.yaml")
			res3, err := Install(k, p, e, Options{})
			if err != nil || res3.Action != Updated {
				t.Fatalf("install with a new config: %s, %v", res3.Action, err)
			}
			if !strings.Contains(readFile(t, res.Path), "c.yaml") {
				t.Error("updated file lacks the new config")
			}
			if res3.Backup != "" {
				t.Errorf("our own file was backed up to %s", res3.Backup)
			}

			var wants string
			if k == Systemd {
				// what `systemctl --user enable` makes, plus a link that is not ours
				wants = filepath.Join(filepath.Dir(res.Path), "default.target.wants", UnitName)
				other := filepath.Join(filepath.Dir(res.Path), "other.target.wants", UnitName)
				for _, l := range []struct{ link, target string }{{wants, res.Path}, {other, "/usr/lib/systemd/user/memd.service"}} {
					if err := os.MkdirAll(filepath.Dir(l.link), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(l.target, l.link); err != nil {
						t.Fatal(err)
					}
				}
				defer func() {
					if _, err := os.Lstat(other); err != nil {
						t.Errorf("a link to another unit file was removed: %v", err)
					}
				}()
			}

			u, err := Uninstall(k, e, "", Options{})
			if err != nil || u.Action != Removed {
				t.Fatalf("uninstall: %s, %v", u.Action, err)
			}
			if _, err := os.Lstat(res.Path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("file still there: %v", err)
			}
			if k == Systemd {
				if _, err := os.Lstat(wants); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("wants link still there: %v", err)
				}
				if len(u.Removed) != 1 || u.Removed[0] != wants {
					t.Errorf("Removed = %v", u.Removed)
				}
			}
			if len(u.Next) == 0 {
				t.Error("no stop commands")
			}
			u2, err := Uninstall(k, e, "", Options{})
			if err != nil || u2.Action != Absent {
				t.Fatalf("second uninstall: %s, %v", u2.Action, err)
			}
			// No temp files left behind.
			left, _ := os.ReadDir(filepath.Dir(res.Path))
			for _, f := range left {
				if !f.IsDir() {
					t.Errorf("left over: %s", f.Name())
				}
			}
		})
	}
}

func TestForeignFileRefused(t *testing.T) {
	for _, k := range []Kind{Systemd, Launchd} {
		t.Run(string(k), func(t *testing.T) {
			e := testEnv(t)
			p := paramsFor(e)
			path, _ := UnitPath(k, e, "")
			const foreign = "# my own hand-written memd unit\n[Service]\nExecStart=/opt/memd run\n"
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(foreign), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Install(k, p, e, Options{}); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), path) {
				t.Fatalf("install over a foreign file: err = %v", err)
			}
			if _, err := Uninstall(k, e, "", Options{}); !errors.Is(err, ErrForeign) {
				t.Fatalf("uninstall of a foreign file: err = %v", err)
			}
			if readFile(t, path) != foreign {
				t.Fatal("the foreign file was changed")
			}

			res, err := Install(k, p, e, Options{Force: true})
			if err != nil {
				t.Fatal(err)
			}
			if res.Backup != path+".bak" || readFile(t, res.Backup) != foreign {
				t.Fatalf("backup %q does not hold the foreign file", res.Backup)
			}
			if !strings.Contains(readFile(t, path), Marker) {
				t.Fatal("forced install did not write our file")
			}
			// Now it is ours: a plain uninstall removes it, the backup stays.
			if _, err := Uninstall(k, e, "", Options{}); err != nil {
				t.Fatal(err)
			}
			if readFile(t, path+".bak") != foreign {
				t.Fatal("backup lost")
			}

			// A forced uninstall of a foreign file keeps it as the next free backup name.
			if err := os.WriteFile(path, []byte(foreign), 0o644); err != nil {
				t.Fatal(err)
			}
			u, err := Uninstall(k, e, "", Options{Force: true})
			if err != nil || u.Backup != path+".bak.1" || readFile(t, u.Backup) != foreign {
				t.Fatalf("forced uninstall: %+v, %v", u, err)
			}
		})
	}
}

// A symlinked unit (dotfiles) is foreign even when its target is one of ours: install
// never writes through a link.
func TestSymlinkedUnitRefused(t *testing.T) {
	e := testEnv(t)
	p := paramsFor(e)
	path, _ := UnitPath(Systemd, e, "")
	target := filepath.Join(e.Home, "dotfiles", UnitName)
	data, _ := RenderSystemd(p)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(target, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(Systemd, p, e, Options{}); !errors.Is(err, ErrForeign) {
		t.Fatalf("err = %v", err)
	}
	res, err := Install(Systemd, p, e, Options{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(res.Backup); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("backup %s is not the old link: %v", res.Backup, err)
	}
	if fi, _ := os.Lstat(path); !fi.Mode().IsRegular() {
		t.Fatal("unit is not a regular file after a forced install")
	}
	if readFile(t, target) != string(data) {
		t.Fatal("the link target was written through")
	}
}

func TestInstallRefusesDirectory(t *testing.T) {
	e := testEnv(t)
	path, _ := UnitPath(Systemd, e, "")
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(Systemd, paramsFor(e), e, Options{Force: true}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
}
