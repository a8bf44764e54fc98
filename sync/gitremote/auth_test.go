package gitremote

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"fetch https://x-access-token:ghp_SECRET@github.com/o/r.git: 401": "fetch https://github.com/o/r.git: 401",
		"push http://user@127.0.0.1:8080/git/r failed":                    "push http://127.0.0.1:8080/git/r failed",
		"ssh://git:pw@host:22/r and https://a:b@c/d":                      "ssh://host:22/r and https://c/d",
		"https://h/r?access_token=SECRET&x=1":                             "https://h/r?access_token=REDACTED&x=1",
		"git@github.com:o/r.git":                                          "git@github.com:o/r.git",
		"/home/u/remote.git":                                              "/home/u/remote.git",
		"":                                                                "",
	}
	for in, want := range cases {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	// Hostile passwords: every one is gone whole, in any wrapping a log or status line uses.
	for _, pw := range []string{"it's'SECRET", "p@ss@SECRET", "a:b:SECRET", "50%off%zzSECRET", "q?SECRET", "h#SECRET",
		"'\"<>SECRET", "%40SECRET%3A", "SECRET@", "@SECRET", "SECRET'@x"} {
		for _, form := range []string{
			"fetch https://alice:%s@github.com/o/r.git: 401 Unauthorized",
			"push 'https://alice:%s@127.0.0.1:8080/r' failed",
			`remote "http://alice:%s@h"`,
			"https://alice:%s@h?token=x,https://bob:%s@g/r",
			"ssh://git:%s@host:22/r",
			"set remote origin to alice:%s@host.example:o/r.git: bad",
		} {
			in := strings.ReplaceAll(form, "%s", pw)
			got := RedactURL(in)
			if strings.Contains(got, "SECRET") {
				t.Errorf("password %q leaks: RedactURL(%q) = %q", pw, in, got)
			}
			if !strings.Contains(got, "h") {
				t.Errorf("RedactURL(%q) = %q lost the host", in, got)
			}
		}
	}
	for in, want := range map[string]string{
		"https://u:it's@h/r":                  "https://h/r",
		"https://u:p@ss@h/r@main":             "https://h/r@main",
		"alice:pw@host.example:o/r.git":       "alice@host.example:o/r.git",
		"https://h/r?Token=abc&x=1#f":         "https://h/r?Token=REDACTED&x=1#f",
		"https://h/r?%74oken=abc":             "https://h/r?%74oken=REDACTED",
		"author a@b.c: pid 5 on host: x@y":    "author a@b.c: pid 5 on host: x@y",
		"https://a:b@c,ssh://d:e@f/g":         "https://c,ssh://f/g",
		"see https://h/wiki@x?sig=1 for help": "see https://h/wiki@x?sig=REDACTED for help",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	// Linear time on hostile input (no catastrophic backtracking).
	big := strings.Repeat("a://", 50000) + strings.Repeat("@", 50000)
	start := time.Now()
	_ = RedactURL(big)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("RedactURL on 400 KB took %v", d)
	}
}

func TestCredentialsToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MEMD_TEST_TOKEN_X", "")
	ro := Credentials{TokenEnv: "MEMD_TEST_TOKEN_X", TokenFile: file}
	if tok, err := ro.readToken(); err != nil || tok != "from-file" {
		t.Errorf("file token = %q, %v", tok, err)
	}
	t.Setenv("MEMD_TEST_TOKEN_X", "from-env")
	if tok, _ := ro.readToken(); tok != "from-env" {
		t.Errorf("env token = %q", tok)
	}
	bad := Credentials{TokenFile: filepath.Join(dir, "missing")}
	if _, err := bad.readToken(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing token file err = %v", err)
	}
	auth, err := ro.AuthFor("https://example.invalid/r.git")
	if err != nil || auth == nil || !strings.Contains(auth.String(), "x-access-token") {
		t.Errorf("https auth = %v, %v", auth, err)
	}
	if auth, err := ro.AuthFor("/some/path.git"); err != nil || auth != nil {
		t.Errorf("local path auth = %v, %v", auth, err)
	}
	if _, err := (Credentials{SSHKey: filepath.Join(dir, "nokey")}).AuthFor("ssh://git@example.invalid/r.git"); err == nil || !strings.Contains(err.Error(), "nokey") {
		t.Errorf("missing ssh key err = %v", err)
	}
}
