package registry

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRegisterListForget(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "memd", "repos")
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	a := Entry{Repo: "/home/u/memory", PID: 10, HTTP: "127.0.0.1:47100", StartedAt: at}
	b := Entry{Repo: "/home/u/work/memory", PID: 11, HTTP: "127.0.0.1:47311", StartedAt: at}
	for _, e := range []Entry{b, a, {Repo: a.Repo, PID: 12, StartedAt: at}} {
		if err := Register(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{Repo: a.Repo, PID: 12, StartedAt: at}, b}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("list %+v, want %+v", got, want)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("registry dir mode: %v %v", fi, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = List(dir)
	if len(got) != 2 || err == nil || !strings.Contains(err.Error(), "junk.json") {
		t.Fatalf("a bad file: %v, %v", got, err)
	}
	if err := Forget(dir, a.Repo); err != nil {
		t.Fatal(err)
	}
	if err := Forget(dir, a.Repo); err != nil {
		t.Fatal("forget twice:", err)
	}
	if got, _ := List(dir); len(got) != 1 || got[0].Repo != b.Repo {
		t.Fatalf("after forget: %+v", got)
	}
	if err := Register(dir, Entry{Repo: "relative"}); err == nil {
		t.Fatal("a relative repo registered")
	}
}

func TestDir(t *testing.T) {
	env := map[string]string{"HOME": "/home/u"}
	get := func(k string) string { return env[k] }
	if d, _ := Dir(get); d != "/home/u/.local/state/memd/repos" {
		t.Errorf("default %s", d)
	}
	env["XDG_STATE_HOME"] = "relative"
	if d, _ := Dir(get); d != "/home/u/.local/state/memd/repos" {
		t.Errorf("relative XDG_STATE_HOME must be ignored: %s", d)
	}
	env["XDG_STATE_HOME"] = "/s"
	if d, _ := Dir(get); d != "/s/memd/repos" {
		t.Errorf("XDG %s", d)
	}
	if _, err := Dir(func(string) string { return "" }); err == nil {
		t.Error("no HOME accepted")
	}
}

func TestNames(t *testing.T) {
	got := Names([]string{"/home/u/memory", "/home/u/work/memory", "/home/u/projects"})
	want := []string{"u/memory", "work/memory", "projects"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("names %q", got)
	}
	if got := Names([]string{"/a/memory", "/b/projects"}); !reflect.DeepEqual(got, []string{"memory", "projects"}) {
		t.Fatalf("names %q", got)
	}
}
