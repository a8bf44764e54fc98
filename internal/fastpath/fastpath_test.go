package fastpath

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

// The values this package repeats must stay those of the packages it may not import.
func TestConstantsAgree(t *testing.T) {
	if DocVersion != statusline.Version || StaleAfter != statusline.StaleAfter || ClaudeInputWait != statusline.ClaudeInputWait {
		t.Fatalf("fastpath constants (%d, %v, %v) differ from statusline's (%d, %v, %v)",
			DocVersion, StaleAfter, ClaudeInputWait, statusline.Version, statusline.StaleAfter, statusline.ClaudeInputWait)
	}
	if strings.Join(LineFormats[:], ",") != strings.Join(statusline.LineFormats, ",") {
		t.Fatalf("LineFormats %v, statusline.LineFormats %v", LineFormats, statusline.LineFormats)
	}
	if stateDir != "/.git/"+memd.StateDirName || "/x"+stateDir != statusline.Dir("/x") {
		t.Fatalf("stateDir %q, memd.StateDirName %q, statusline.Dir %q", stateDir, memd.StateDirName, statusline.Dir("/x"))
	}
}

// env isolates the test from the user's config and home.
func env(t *testing.T) (home string) {
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("MEMD_CONFIG", "")
	return home
}

func publish(t *testing.T, repo, state string, pid int) statusline.Document {
	t.Helper()
	d := statusline.Compose(statuslinetest.Fixtures()[state])
	d.PID = pid
	d.Repo = repo
	if err := statusline.Write(statusline.Dir(repo), d); err != nil {
		t.Fatal(err)
	}
	return d
}

func run(args ...string) (code int, out string, ok bool) {
	var o bytes.Buffer
	code, ok = Status(args, strings.NewReader(`{"session_id":"x"}`), &o)
	return code, o.String(), ok
}

// TestStatusPrintsWhatRenderGives: for every line format and state, the fast path prints
// exactly what statusline renders from the document, fresh or with a live pid.
func TestStatusPrintsWhatRenderGives(t *testing.T) {
	env(t)
	repo := t.TempDir()
	for state := range statuslinetest.Fixtures() {
		d := publish(t, repo, state, os.Getpid())
		for _, f := range LineFormats {
			for _, now := range []time.Time{d.UpdatedAt, d.UpdatedAt.Add(time.Hour)} { // fresh; old but alive
				want, err := statusline.Render(&d, f, now, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(want, "\n") {
					want += "\n"
				}
				code, out, ok := run("--repo", repo, "--format", f, "--now", now.Format(time.RFC3339))
				if !ok || code != 0 || out != want {
					t.Errorf("%s %s at %v: ok=%v code=%d %q, want %q", state, f, now, ok, code, out, want)
				}
			}
		}
	}
}

// TestStatusDeclines: every case the fast path cannot answer exactly goes to the full command.
func TestStatusDeclines(t *testing.T) {
	home := env(t)
	repo := t.TempDir()
	if _, _, ok := run("--repo", repo); ok {
		t.Error("no document: handled")
	}
	d := publish(t, repo, statusline.StateOK, os.Getpid())
	now := d.UpdatedAt.Format(time.RFC3339)
	if _, out, ok := run("--repo", repo, "--now", now); !ok || out != "memd: +2 ~1 · 14:32\n" {
		t.Fatalf("the plain case: %v %q", ok, out)
	}
	for _, args := range [][]string{
		{"--format", "json"}, {"--format", "sidebar"}, {"--format", "nope"}, {"--now", "soon"},
		{"--config", "x.yaml"}, {"extra"}, {"--bogus"}, {"-h"}, {"--help"}, {"--"}, {"-"}, {"---repo", repo},
		{"--repo"}, {"--repo", " "}, {"--repo", repo + "/"}, {"--repo", repo + "/."}, {"--repo", repo + "/../" + filepath.Base(repo)},
	} {
		all := append([]string{"--repo", repo, "--now", now}, args...)
		if _, out, ok := run(all...); ok || out != "" {
			t.Errorf("%v: handled (%q), want the full command", args, out)
		}
	}
	// Flag spellings package flag accepts are handled alike, the last value winning.
	for _, args := range [][]string{
		{"-repo", repo, "-now", now}, {"--repo=" + repo, "--now=" + now}, {"-repo=" + repo, "--format", "json", "-format=plain", "-now=" + now},
	} {
		if _, out, ok := run(args...); !ok || out != "memd: +2 ~1 · 14:32\n" {
			t.Errorf("%v: %v %q", args, ok, out)
		}
	}

	t.Setenv("MEMD_CONFIG", "/etc/memd.yaml")
	if _, _, ok := run("--repo", repo, "--now", now); ok {
		t.Error("handled with MEMD_CONFIG set")
	}
	t.Setenv("MEMD_CONFIG", "")
	os.MkdirAll(filepath.Join(home, ".config", "memd"), 0o755)
	os.WriteFile(filepath.Join(home, ".config", "memd", "config.yaml"), []byte("repo: x\n"), 0o644)
	if _, _, ok := run("--repo", repo, "--now", now); ok {
		t.Error("handled with a config file present")
	}
}

// TestStatusDocumentMustStand: a stale document of a dead daemon, a status.json not written by
// statusline.Write, a line file from another publish, another version: all declined.
func TestStatusDocumentMustStand(t *testing.T) {
	env(t)
	repo := t.TempDir()
	dir := statusline.Dir(repo)
	const deadPID = 1 << 30 // beyond any pid_max
	d := publish(t, repo, statusline.StateOK, deadPID)
	fresh := d.UpdatedAt.Add(StaleAfter).Format(time.RFC3339)
	stale := d.UpdatedAt.Add(StaleAfter + time.Second).Format(time.RFC3339)
	if _, _, ok := run("--repo", repo, "--now", fresh); !ok {
		t.Error("fresh document, pid gone: declined")
	}
	if _, _, ok := run("--repo", repo, "--now", stale); ok {
		t.Error("stale document, pid gone: handled (the full command says not running)")
	}

	publish(t, repo, statusline.StateOK, os.Getpid())
	now := d.UpdatedAt.Format(time.RFC3339)
	doc, err := os.ReadFile(filepath.Join(dir, "status.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The same bytes written by hand carry the time of writing, not updated_at.
	if err := os.WriteFile(filepath.Join(dir, "status.json"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := run("--repo", repo, "--now", now); ok {
		t.Error("hand-written status.json: handled")
	}
	// Back in step, then a line file from elsewhere.
	publish(t, repo, statusline.StateOK, os.Getpid())
	os.WriteFile(filepath.Join(dir, "status.tmux"), []byte("something else\n"), 0o600)
	if _, _, ok := run("--repo", repo, "--now", now, "--format", "tmux"); ok {
		t.Error("line file from another writer: handled")
	}
	if _, _, ok := run("--repo", repo, "--now", now, "--format", "plain"); !ok {
		t.Error("an untouched line file: declined")
	}
	// Another document version, with the times in step.
	var m map[string]any
	json.Unmarshal(doc, &m)
	m["version"] = 9
	b, _ := json.MarshalIndent(m, "", "  ")
	os.WriteFile(filepath.Join(dir, "status.json"), append(b, '\n'), 0o600)
	os.Chtimes(filepath.Join(dir, "status.json"), d.UpdatedAt, d.UpdatedAt)
	if _, _, ok := run("--repo", repo, "--now", now); ok {
		t.Error("version 9 document: handled")
	}
}

func TestScanHeader(t *testing.T) {
	at := time.Date(2026, 11, 30, 14, 32, 5, 0, time.UTC)
	d := statusline.Document{Version: 1, PID: 42, UpdatedAt: at, Summary: statusline.Summary{Text: "  \"pid\": 7,"}}
	b, _ := json.MarshalIndent(d, "", "  ")
	h, ok := scanHeader(b)
	if !ok || h.version != 1 || h.pid != 42 || !h.updatedAt.Equal(at) {
		t.Fatalf("scanHeader = %+v %v", h, ok)
	}
	compact, _ := json.Marshal(d)
	if h, ok := scanHeader(compact); !ok || h.pid != 42 {
		t.Errorf("compact: %+v %v", h, ok)
	}
	for name, doc := range map[string]string{
		"no pid":        "{\n  \"version\": 1,\n  \"updated_at\": \"2026-11-30T14:32:05Z\"\n}\n",
		"nested only":   "{\n  \"x\": {\n    \"version\": 1,\n    \"pid\": 2,\n    \"updated_at\": \"2026-11-30T14:32:05Z\"\n  }\n}\n",
		"float pid":     "{\n  \"version\": 1,\n  \"pid\": 1e3,\n  \"updated_at\": \"2026-11-30T14:32:05Z\"\n}\n",
		"bad time":      "{\n  \"version\": 1,\n  \"pid\": 1,\n  \"updated_at\": \"yesterday\"\n}\n",
		"huge version":  "{\n  \"version\": 1234567890123456789012,\n  \"pid\": 1,\n  \"updated_at\": \"2026-11-30T14:32:05Z\"\n}\n",
		"empty":         "",
		"escaped key":   "{\n  \"version\": 1,\n  \"p\\u0069d\": 1,\n  \"updated_at\": \"2026-11-30T14:32:05Z\"\n}\n",
		"unclosed":      "{\n  \"version\": 1,\n  \"pid\": 1,\n  \"updated_at\": \"2026-11-30T14:32:05Z\"\n",
		"string number": "{\n  \"version\": \"1\",\n  \"pid\": 1,\n  \"updated_at\": \"2026-11-30T14:32:05Z\"\n}\n",
	} {
		if h, ok := scanHeader([]byte(doc)); ok {
			t.Errorf("%s: scanned %+v", name, h)
		}
	}
}

func TestClean(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/a": true, "/a/b.c/d": true, "/a/.b": true, "/a/..b": true,
		"": false, "a": false, "/a/": false, "//a": false, "/a//b": false, "/a/./b": false, "/a/..": false, "/.": false,
	} {
		if got := clean(p); got != want {
			t.Errorf("clean(%q) = %v, want %v", p, got, want)
		}
		if want && filepath.Clean(p) != p {
			t.Errorf("%q is not what filepath.Clean gives", p)
		}
	}
}

func FuzzScanHeader(f *testing.F) {
	d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateWarn])
	b, _ := json.MarshalIndent(d, "", "  ")
	f.Add(b)
	f.Add([]byte("{\n  \"version\": 1,\n  \"pid\": -3,\n  \"updated_at\": \"2026-11-30T14:32:05.5+01:00\"\n}\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		h, ok := scanHeader(doc)
		if !ok {
			return
		}
		// What the scan accepts, the full decoder reads the same way.
		var full struct {
			Version   int       `json:"version"`
			PID       int       `json:"pid"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		if err := json.Unmarshal(doc, &full); err != nil {
			return // not JSON at all: statusline.Write never wrote it, and its mtime will not match
		}
		if full.Version != h.version || full.PID != h.pid || !full.UpdatedAt.Equal(h.updatedAt) {
			t.Fatalf("scan %+v, json %+v", h, full)
		}
	})
}

// TestConfigRepo: the cache vouches for a config file only while its identity and $HOME are
// what the full command saw.
func TestConfigRepo(t *testing.T) {
	home := env(t)
	t.Setenv("XDG_CACHE_HOME", "")
	if _, found, ok := configRepo(""); found || !ok {
		t.Fatalf("no config: found=%v ok=%v", found, ok)
	}
	cfg := filepath.Join(home, ".config", "memd", "config.yaml")
	os.MkdirAll(filepath.Dir(cfg), 0o755)
	old := time.Now().Add(-time.Hour)
	write := func(text string, mtime time.Time) os.FileInfo {
		t.Helper()
		os.WriteFile(cfg, []byte(text), 0o644)
		os.Chtimes(cfg, mtime, mtime)
		fi, err := os.Stat(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	fi := write("repo: /srv/memory\n", old)
	if _, found, ok := configRepo(""); !found || ok {
		t.Fatalf("config not yet vouched for: found=%v ok=%v", found, ok)
	}
	if err := RememberConfig(cfg, fi, "/srv/memory", time.Now()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(home, ".cache", "memd", "status-config")); err != nil || !strings.HasPrefix(string(b), configCacheHeader) {
		t.Fatalf("cache file: %q %v", b, err)
	}
	if repo, found, ok := configRepo(""); !found || !ok || repo != "/srv/memory" {
		t.Fatalf("vouched for: %q found=%v ok=%v", repo, found, ok)
	}
	if !Vouched(cfg, fi) {
		t.Error("Vouched: false for the file just remembered")
	}
	if edited := write("repo: /srv/other\n", old.Add(time.Minute)); Vouched(cfg, edited) {
		t.Error("Vouched: true for an edited file")
	}
	write("repo: /srv/memory\n", old)
	if repo, _, ok := configRepo(cfg); !ok || repo != "/srv/memory" {
		t.Errorf("--config naming the same file: %q %v", repo, ok)
	}
	t.Setenv("MEMD_CONFIG", cfg)
	if repo, _, ok := configRepo(""); !ok || repo != "/srv/memory" {
		t.Errorf("MEMD_CONFIG naming the same file: %q %v", repo, ok)
	}
	t.Setenv("MEMD_CONFIG", "")
	for name, check := range map[string]func() (restore func()){
		"another $HOME": func() func() {
			t.Setenv("HOME", "/elsewhere")
			t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			t.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
			return func() { t.Setenv("HOME", home); t.Setenv("XDG_CACHE_HOME", "") }
		},
		"an edit of the same size": func() func() {
			write("repo: /srv/memorx\n", old.Add(time.Second))
			return func() { write("repo: /srv/memory\n", old) }
		},
		"the same mtime, another size": func() func() {
			write("repo: /srv/memory/\n", old)
			return func() { write("repo: /srv/memory\n", old) }
		},
		"a missing --config": func() func() {
			t.Setenv("MEMD_CONFIG", filepath.Join(home, "missing.yaml"))
			return func() { t.Setenv("MEMD_CONFIG", "") }
		},
		"a relative MEMD_CONFIG": func() func() {
			t.Setenv("MEMD_CONFIG", "config.yaml")
			return func() { t.Setenv("MEMD_CONFIG", "") }
		},
	} {
		restore := check()
		if repo, _, ok := configRepo(""); ok {
			t.Errorf("%s: vouched for (%q)", name, repo)
		}
		restore()
		if _, _, ok := configRepo(""); !ok {
			t.Fatalf("after %s: no longer vouched for", name)
		}
	}
	if err := RememberConfig(cfg, write("repo: /srv/memory\n", time.Now()), "/srv/memory", time.Now()); err == nil {
		t.Error("a config modified a moment ago was remembered")
	}
	if err := RememberConfig("relative.yaml", fi, "/srv/memory", time.Now()); err == nil {
		t.Error("a relative config path was remembered")
	}
}

// --now takes RFC3339 only: a date, a zone-less time or a word is not a clock setting (the
// full command rejects it, and `service install --now` reads it as --apply).
func TestParseNow(t *testing.T) {
	for s, ok := range map[string]bool{
		"2026-11-30T03:00:00Z": true, "2026-11-30T03:00:00.5+02:00": true,
		"2026-11-30": false, "2026-11-30T03:00:00": false, "yesterday": false, "": false,
	} {
		if _, got := ParseNow(s); got != ok {
			t.Errorf("ParseNow(%q) ok = %v, want %v", s, got, ok)
		}
	}
}
