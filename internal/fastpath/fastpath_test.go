package fastpath

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStatusDeclines(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("MEMD_CONFIG", "")
	repo := t.TempDir()
	run := func(args ...string) (int, string, bool) {
		var o, e bytes.Buffer
		code, ok := Status(args, strings.NewReader(""), &o, &e)
		return code, o.String(), ok
	}
	if code, out, ok := run("--repo", repo); !ok || code != 0 || out != "memd: not started\n" {
		t.Fatalf("plain case: %v %d %q", ok, code, out)
	}
	if _, out, ok := run("--repo", repo, "--format", "json"); !ok || !strings.Contains(out, `"state":"offline"`) {
		t.Fatalf("json: %v %q", ok, out)
	}
	for _, args := range [][]string{
		{"--config", "x.yaml"}, {"--format", "nope"}, {"--now", "soon"}, {"extra"}, {"--bogus"}, {"-h"}, {"--repo", " "},
	} {
		if _, out, ok := run(args...); ok || out != "" {
			t.Errorf("%v: handled (%q), want the full command", args, out)
		}
	}
	t.Setenv("MEMD_CONFIG", "/etc/memd.yaml")
	if _, _, ok := run("--repo", repo); ok {
		t.Error("handled with MEMD_CONFIG set")
	}
	t.Setenv("MEMD_CONFIG", "")
	os.MkdirAll(filepath.Join(home, ".config", "memd"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "memd", "config.yaml"), []byte("repo: x\n"), 0o644)
	if _, _, ok := run("--repo", repo); ok {
		t.Error("handled with a config file present")
	}
}

func TestAbs(t *testing.T) {
	wd, _ := os.Getwd()
	for in, want := range map[string]string{"/a/b/../c": "/a/c", "x/y": filepath.Join(wd, "x/y"), ".": wd} {
		if got := abs(in); got != want {
			t.Errorf("abs(%q) = %q, want %q", in, got, want)
		}
		if fa, _ := filepath.Abs(in); fa != abs(in) {
			t.Errorf("abs(%q) = %q, filepath.Abs = %q", in, abs(in), fa)
		}
	}
}
