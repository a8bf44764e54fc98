package gitremote

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kevinburke/ssh_config"
)

// sshHost is what OpenSSH would use to reach one host name as written in a remote URL
// (an alias of ~/.ssh/config or a real name), resolved the way ssh(1) resolves it: the
// first value of each keyword wins, the user's file before the system's, a value given in
// the URL itself (user@, :port) before either.
type sshHost struct {
	Alias          string // as written in the URL
	HostName, User string
	Port           int
	// IdentityFiles are the keys to offer, in order: the config's IdentityFile entries, or
	// OpenSSH's default files when there are none.
	IdentityFiles  []string
	IdentitiesOnly bool
	// ProxyCommand is the command whose stdin/stdout carry the connection (tokens
	// expanded); ProxyJump is turned into one (`ssh -W [host]:port jump`), as ssh does.
	ProxyCommand string
	KnownHosts   []string // UserKnownHostsFile then GlobalKnownHostsFile entries
	// ConfigFiles are the files read, for messages.
	ConfigFiles []string
}

// defaultIdentities are OpenSSH 9's default identity files, in its order
// (ssh(1) -i: id_rsa, id_ecdsa, id_ecdsa_sk, id_ed25519, id_ed25519_sk).
var defaultIdentities = []string{"id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk"}

// systemSSHConfig is OpenSSH's system-wide client config; a variable for tests.
var systemSSHConfig = "/etc/ssh/ssh_config"

// homeDir is $HOME (what git and memd use), not the password database's home that
// ssh(1) uses: a sandbox HOME is respected.
func homeDir() string {
	if h, err := os.UserHomeDir(); err == nil {
		return h
	}
	return "/"
}

// localUser is the user name ssh logs in as when neither the URL nor the config names one:
// the password database's name for this uid, as ssh takes it; $USER if that fails.
func localUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// sshConfigFiles reads ~/.ssh/config and the system config, skipping the missing ones.
// They are read on every attempt, so an edit applies to the next sync.
func sshConfigFiles(home string) ([]*ssh_config.Config, []string, error) {
	var cfgs []*ssh_config.Config
	var names []string
	for _, name := range []string{filepath.Join(home, ".ssh", "config"), systemSSHConfig} {
		b, err := os.ReadFile(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("ssh config %s: %w", name, err)
		}
		c, err := ssh_config.DecodeBytes(b)
		if err != nil {
			return nil, nil, fmt.Errorf("ssh config %s: %w (memd reads ssh_config without Match blocks)", name, err)
		}
		cfgs, names = append(cfgs, c), append(names, name)
	}
	return cfgs, names, nil
}

// sshLookup answers one keyword across the config files: first value wins.
type sshLookup struct {
	cfgs  []*ssh_config.Config
	alias string
	err   error
}

func (l *sshLookup) get(key string) string {
	for _, c := range l.cfgs {
		v, err := safeGet(func() (string, error) { return c.Get(l.alias, key) })
		if err != nil && l.err == nil {
			l.err = err
		}
		if v != "" {
			return v
		}
	}
	return ""
}

func (l *sshLookup) all(key string) []string {
	var out []string
	for _, c := range l.cfgs {
		var vs []string
		_, err := safeGet(func() (string, error) { var e error; vs, e = c.GetAll(l.alias, key); return "", e })
		if err != nil && l.err == nil {
			l.err = err
		}
		out = append(out, vs...)
	}
	return out
}

// safeGet turns the library's panic on a Match block into an error.
func safeGet(f func() (string, error)) (v string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ssh config: %v (memd reads ssh_config without Match blocks)", r)
		}
	}()
	return f()
}

// resolveSSH resolves alias (the host of a remote URL) with urlUser and urlPort (0 = none)
// from the URL.
func resolveSSH(alias, urlUser string, urlPort int) (sshHost, error) {
	home := homeDir()
	cfgs, names, err := sshConfigFiles(home)
	if err != nil {
		return sshHost{}, err
	}
	l := &sshLookup{cfgs: cfgs, alias: alias}
	h := sshHost{Alias: alias, HostName: alias, User: urlUser, Port: urlPort, ConfigFiles: names}
	if v := l.get("HostName"); v != "" {
		h.HostName = expandTokens(v, tokens{h: alias, n: alias})
	}
	if h.User == "" {
		h.User = l.get("User")
	}
	if h.User == "" {
		h.User = localUser()
	}
	if h.Port == 0 {
		if v := l.get("Port"); v != "" {
			if h.Port, err = strconv.Atoi(v); err != nil || h.Port <= 0 || h.Port > 65535 {
				return sshHost{}, fmt.Errorf("ssh config for %s: Port %q is not a port", alias, v)
			}
		}
	}
	if h.Port == 0 {
		h.Port = 22
	}
	tk := tokens{h: h.HostName, n: alias, p: strconv.Itoa(h.Port), r: h.User, d: home, u: localUser()}
	for _, f := range l.all("IdentityFile") {
		if strings.EqualFold(f, "none") {
			continue
		}
		h.IdentityFiles = append(h.IdentityFiles, expandPath(f, tk, home))
	}
	if len(h.IdentityFiles) == 0 {
		for _, f := range defaultIdentities {
			h.IdentityFiles = append(h.IdentityFiles, filepath.Join(home, ".ssh", f))
		}
	}
	h.IdentitiesOnly = strings.EqualFold(l.get("IdentitiesOnly"), "yes")
	h.ProxyCommand = proxyCommandFor(l, h, tk)
	h.KnownHosts = knownHostsFiles(l, tk, home)
	return h, l.err
}

// proxyCommandFor is the ProxyCommand (expanded), or the one ssh derives from ProxyJump.
// The first of the two set wins, as in ssh; "none" switches either off.
func proxyCommandFor(l *sshLookup, h sshHost, tk tokens) string {
	if pc := l.get("ProxyCommand"); pc != "" {
		if strings.EqualFold(pc, "none") {
			return ""
		}
		return expandTokens(pc, tk)
	}
	pj := l.get("ProxyJump")
	if pj == "" || strings.EqualFold(pj, "none") {
		return ""
	}
	hops := strings.Split(pj, ",")
	last := hops[len(hops)-1]
	cmd := "ssh"
	if len(hops) > 1 {
		cmd += " -J " + shellQuote(strings.Join(hops[:len(hops)-1], ","))
	}
	return cmd + " -W " + shellQuote("["+h.HostName+"]:"+strconv.Itoa(h.Port)) + " " + shellQuote(last)
}

// knownHostsFiles are UserKnownHostsFile (default ~/.ssh/known_hosts, known_hosts2) and
// GlobalKnownHostsFile (default /etc/ssh/ssh_known_hosts, ssh_known_hosts2).
func knownHostsFiles(l *sshLookup, tk tokens, home string) []string {
	var out []string
	for _, kv := range []struct{ key, def string }{
		{"UserKnownHostsFile", "~/.ssh/known_hosts ~/.ssh/known_hosts2"},
		{"GlobalKnownHostsFile", "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2"},
	} {
		v := l.get(kv.key)
		if v == "" {
			v = kv.def
		}
		for _, f := range strings.Fields(v) {
			if !strings.EqualFold(f, "none") {
				out = append(out, expandPath(f, tk, home))
			}
		}
	}
	return out
}

// tokens are ssh_config's % tokens (ssh_config(5) TOKENS) that memd expands.
type tokens struct{ h, n, p, r, d, u string }

func expandTokens(s string, tk tokens) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'h':
			b.WriteString(tk.h)
		case 'n':
			b.WriteString(tk.n)
		case 'p':
			b.WriteString(tk.p)
		case 'r':
			b.WriteString(tk.r)
		case 'd':
			b.WriteString(tk.d)
		case 'u':
			b.WriteString(tk.u)
		case '%':
			b.WriteByte('%')
		default: // a token memd does not know stays as written
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// expandPath expands tokens and a leading ~ (to $HOME); a relative path is under ~/.ssh,
// as ssh reads it.
func expandPath(p string, tk tokens, home string) string {
	p = expandTokens(strings.Trim(p, `"`), tk)
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case !filepath.IsAbs(p):
		return filepath.Join(home, ".ssh", p)
	}
	return p
}

// shellQuote quotes s for sh -c.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
