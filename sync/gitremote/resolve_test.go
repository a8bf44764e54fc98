package gitremote

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sandboxHome points $HOME at a temp dir with ~/.ssh/config = cfg and no system config.
func sandboxHome(t *testing.T, cfg string) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	old := systemSSHConfig
	systemSSHConfig = filepath.Join(home, "no-system-config")
	t.Cleanup(func() { systemSSHConfig = old })
	return home
}

// TestResolveSSHLikeOpenSSH: each keyword as ssh_config(5) reads it, first value wins, the
// URL's own user and port before the config's.
func TestResolveSSHLikeOpenSSH(t *testing.T) {
	home := sandboxHome(t, `
Host work-gh
  HostName github.com
  User alice
  Port 2222
  IdentityFile ~/.ssh/id_%r_%h
  IdentityFile keys/second
  IdentitiesOnly yes
  UserKnownHostsFile ~/.ssh/kh_work

Host jumped
  ProxyJump bastion,u@hop2:2200

Host cmd
  HostName 10.0.0.%n
  ProxyCommand nc %h %p

Host off
  ProxyCommand none
  ProxyJump bastion

Host *
  User fallback
  Port 2200
`)
	t.Setenv("USER", "localme")
	h, err := resolveSSH("work-gh", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.HostName != "github.com" || h.User != "alice" || h.Port != 2222 || !h.IdentitiesOnly {
		t.Errorf("work-gh = %+v", h)
	}
	wantIDs := []string{filepath.Join(home, ".ssh", "id_alice_github.com"), filepath.Join(home, ".ssh", "keys", "second")}
	if strings.Join(h.IdentityFiles, ",") != strings.Join(wantIDs, ",") {
		t.Errorf("IdentityFiles = %v, want %v", h.IdentityFiles, wantIDs)
	}
	if h.KnownHosts[0] != filepath.Join(home, ".ssh", "kh_work") || h.KnownHosts[1] != "/etc/ssh/ssh_known_hosts" {
		t.Errorf("KnownHosts = %v", h.KnownHosts)
	}
	// The URL's user and port win over the config.
	if h, _ := resolveSSH("work-gh", "bob", 22); h.User != "bob" || h.Port != 22 {
		t.Errorf("URL user/port lost: %+v", h)
	}
	// No alias: Host * gives user and port; the default identity files; default known_hosts.
	h, _ = resolveSSH("plain.example", "", 0)
	if h.HostName != "plain.example" || h.User != "fallback" || h.Port != 2200 || h.IdentitiesOnly {
		t.Errorf("plain = %+v", h)
	}
	if len(h.IdentityFiles) != len(defaultIdentities) || h.IdentityFiles[3] != filepath.Join(home, ".ssh", "id_ed25519") {
		t.Errorf("default identities = %v", h.IdentityFiles)
	}
	if h.KnownHosts[0] != filepath.Join(home, ".ssh", "known_hosts") {
		t.Errorf("default known_hosts = %v", h.KnownHosts)
	}
	// ProxyJump becomes the system ssh's -W through the hops; ProxyCommand's tokens expand.
	h, _ = resolveSSH("jumped", "", 0)
	if want := `ssh -J 'bastion' -W '[jumped]:2200' 'u@hop2:2200'`; h.ProxyCommand != want {
		t.Errorf("ProxyJump → %q, want %q", h.ProxyCommand, want)
	}
	h, _ = resolveSSH("cmd", "", 0)
	if h.HostName != "10.0.0.cmd" || h.ProxyCommand != "nc 10.0.0.cmd 2200" {
		t.Errorf("ProxyCommand: %+v", h)
	}
	if h, _ := resolveSSH("off", "", 0); h.ProxyCommand != "" {
		t.Errorf("ProxyCommand none: %q", h.ProxyCommand)
	}

	// No user anywhere: the local user, as ssh logs in (not "git").
	sandboxHome(t, "")
	if h, _ := resolveSSH("h", "", 0); h.User == "" || h.User == "git" || h.Port != 22 {
		t.Errorf("no user: %+v", h)
	}
	// A Match block memd cannot read is an error naming the file, never a guess.
	sandboxHome(t, "Match host x\n  User y\n")
	if _, err := resolveSSH("x", "", 0); err == nil || !strings.Contains(err.Error(), "config") {
		t.Errorf("Match: err = %v", err)
	}
}

func TestNoProxy(t *testing.T) {
	for _, c := range []struct {
		host, list string
		want       bool
	}{
		{"git.example.com", "example.com", true},
		{"git.example.com", ".example.com", true},
		{"example.com", "example.com", true},
		{"badexample.com", "example.com", false},
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "10.0.0.0/8, 127.0.0.0/8", true},
		{"127.0.0.1", "localhost", false},
		{"anything", "*", true},
		{"host", "", false},
	} {
		if got := noProxy(c.host, c.list); got != c.want {
			t.Errorf("noProxy(%q, %q) = %v", c.host, c.list, got)
		}
	}
	u, _ := url.Parse("https://git.example.com/r")
	t.Setenv("https_proxy", "proxy.local:3128")
	t.Setenv("no_proxy", "")
	t.Setenv("NO_PROXY", "")
	if got := httpProxyFor(u, ""); got != "http://proxy.local:3128" {
		t.Errorf("env proxy = %q", got)
	}
	if got := httpProxyFor(u, "http://cfg:8080"); got != "http://cfg:8080" {
		t.Errorf("config proxy = %q", got)
	}
	t.Setenv("NO_PROXY", "example.com")
	if got := httpProxyFor(u, "http://cfg:8080"); got != "" {
		t.Errorf("NO_PROXY with a configured proxy = %q", got)
	}
}

func TestLongestRewrite(t *testing.T) {
	kv := [][2]string{
		{"url.https://a.example/.insteadof", "gh:"},
		{"url.https://b.example/deep/.insteadof", "gh:deep/"},
		{"url.ssh://push.example/.pushinsteadof", "gh:"},
	}
	if u, ok := longestRewrite(kv, ".insteadof", "gh:deep/r.git"); !ok || u != "https://b.example/deep/r.git" {
		t.Errorf("longest = %q", u)
	}
	if u, ok := longestRewrite(kv, ".pushinsteadof", "gh:r.git"); !ok || u != "ssh://push.example/r.git" {
		t.Errorf("push = %q", u)
	}
	if _, ok := longestRewrite(kv, ".insteadof", "other:r"); ok {
		t.Error("no match rewrote")
	}
}

// TestClassifyRefusal: a refusal the remote answered is ErrPushRefused with the remote's
// words, redacted and capped; a lost race stays ErrPushRejected; neither is offline.
func TestClassifyRefusal(t *testing.T) {
	said := "remote: error: GH013: Repository rule violations found for refs/heads/main.\n" +
		"remote: Resolving deltas: 100% (1/1)\n" +
		"remote: see https://u:SECRET@example.com/x\n" +
		"remote: EOF connection refused\n" + strings.Repeat("remote: é long line\n", 200)
	err := Classify("push", "origin", "https://u:SECRET@example.com/r",
		&Refusal{Status: "command error on refs/heads/main: pre-receive hook declined", Remote: said})
	if !errors.Is(err, ErrPushRefused) || errors.Is(err, ErrOffline) || errors.Is(err, ErrPushRejected) {
		t.Fatalf("kinds of %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"GH013: Repository rule violations found", "pre-receive hook declined", "push refused by the remote"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "SECRET") || strings.Contains(msg, "Resolving deltas") || len(msg) > maxRemoteMessage+300 {
		t.Errorf("message not redacted, filtered or capped (%d bytes): %s", len(msg), msg)
	}
	race := Classify("push", "origin", "", &Refusal{Status: "command error on refs/heads/main: failed to update ref"})
	if !errors.Is(race, ErrPushRejected) || errors.Is(race, ErrPushRefused) {
		t.Errorf("race: %v", race)
	}
	if !IsReportStatus(errors.New("command error on refs/heads/main: protected branch")) || IsReportStatus(errors.New("EOF")) {
		t.Error("IsReportStatus")
	}
}

func TestCredDesc(t *testing.T) {
	u, _ := url.Parse("https://alice@git.example:8443/team/mem.git")
	want := "protocol=https\nhost=git.example:8443\npath=team/mem.git\nusername=alice\n"
	if got := string(credDesc(u)); got != want {
		t.Errorf("credDesc = %q, want %q", got, want)
	}
}
