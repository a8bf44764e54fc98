package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/hooks"
)

// readmeSection returns the README text from the heading to the next "## " heading.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	s = s[i+len(heading)+2:]
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j]
	}
	return s
}

// fenced returns the bodies of the ```lang blocks in s.
func fenced(s, lang string) []string {
	var out []string
	for {
		i := strings.Index(s, "```"+lang+"\n")
		if i < 0 {
			return out
		}
		s = s[i+len(lang)+4:]
		j := strings.Index(s, "```")
		if j < 0 {
			return out
		}
		out = append(out, s[:j])
		s = s[j+3:]
	}
}

// The README's hook recipes are real: each config block loads and validates, the memhtml
// wrapper hands memhtml the repo memd names, and the webhook posts the changed paths and
// the HEAD range (to a loopback server standing in for the URL).
func TestReadmeHookRecipes(t *testing.T) {
	sec := readmeSection(t, "## Hooks")
	blocks := fenced(sec, "yaml")
	if len(blocks) != 2 {
		t.Fatalf("Hooks section has %d yaml blocks, want the memhtml and the webhook recipe", len(blocks))
	}
	var cfgs []memd.Config
	for _, b := range blocks {
		cfg := memd.DefaultConfig()
		if err := parseConfig([]byte(b), &cfg); err != nil {
			t.Fatalf("recipe does not load: %v\n%s", err, b)
		}
		if err := cfg.Validate(nil); err != nil {
			t.Fatalf("recipe does not validate: %v\n%s", err, b)
		}
		cfgs = append(cfgs, cfg)
	}

	// The wrapper script, with a stand-in memhtml on PATH that says how it was called.
	scripts := fenced(sec, "sh")
	if len(scripts) != 1 {
		t.Fatalf("Hooks section has %d sh blocks, want the wrapper", len(scripts))
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "memhtml"), []byte("#!/bin/sh\necho \"$MEMHTML_ROOT $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := filepath.Join(bin, "memhtml-index-update")
	if err := os.WriteFile(wrapper, []byte(scripts[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	repo := t.TempDir()
	res := hooks.Exec(context.Background(), hooks.Spec{Hook: memd.HookAfterSync, Argv: []string{wrapper}, Dir: repo,
		Timeout: 10 * time.Second, OldHead: "a", NewHead: "b"})
	if res.Err != nil || res.Output != repo+" index update\n" {
		t.Errorf("wrapper ran %q (%v), want memhtml index update with MEMHTML_ROOT=%s", res.Output, res.Err, repo)
	}

	type request struct {
		method, old, new, body, ctype, format string
	}
	got := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- request{r.Method, r.Header.Get("X-Memd-Old-Head"), r.Header.Get("X-Memd-New-Head"), string(b),
			r.Header.Get("Content-Type"), r.Header.Get("X-Memd-Changed-Format")}
	}))
	defer srv.Close()
	argv := cfgs[1].Hooks.AfterSync
	for i, a := range argv {
		argv[i] = strings.ReplaceAll(a, "https://hooks.example.com/memd", srv.URL)
	}
	res = hooks.Exec(context.Background(), hooks.Spec{Hook: memd.HookAfterSync, Argv: argv, Dir: repo, Timeout: 20 * time.Second,
		OldHead: "1111", NewHead: "2222", Changed: []string{"areas/a.html", "areas/b c.html", "x.html\n..\n--all\n-rf"}})
	if res.Err != nil {
		t.Fatalf("webhook: %v\n%s", res.Err, res.Output)
	}
	select {
	case r := <-got:
		// curl --data-binary @file sends the file as it is: NUL-terminated paths, one of them
		// holding newlines (a remote's forged name), and headers that say so.
		if r.method != "POST" || r.old != "1111" || r.new != "2222" || r.body != "areas/a.html\x00areas/b c.html\x00x.html\n..\n--all\n-rf\x00" ||
			r.ctype != "application/octet-stream" || r.format != "nul" {
			t.Errorf("webhook sent %+v", r)
		}
	default:
		t.Error("the webhook never reached the server")
	}
}
