package gitremote

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/url"
	"strings"
	"sync"
)

// helperCred is a credential git's helpers gave for one URL (`git credential fill`), kept
// to tell them how it went: approve after the remote accepted it, reject after a 401 (git's
// own rule: http.c rejects on 401 only, never on 403 or a network failure).
type helperCred struct {
	dir      string
	desc     []byte // protocol=, host=, path= (and username= from the URL)
	answer   []byte // fill's output, every attribute as the helper gave it
	user, pw string
}

// credDesc is the credential description of u, as git's credential_from_url writes it:
// the host with its port, the path without its leading slash.
func credDesc(u *url.URL) []byte {
	var b bytes.Buffer
	b.WriteString("protocol=" + u.Scheme + "\n")
	b.WriteString("host=" + u.Host + "\n")
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		b.WriteString("path=" + p + "\n")
	}
	if u.User != nil && u.User.Username() != "" {
		b.WriteString("username=" + u.User.Username() + "\n")
	}
	return b.Bytes()
}

// fillCredential asks git's credential helpers for u (`git credential fill` in dir, so
// the repo's own credential.helper counts). nil when git is absent or no helper has one:
// git then would prompt, which memd never does, so the attempt goes on without.
func fillCredential(ctx context.Context, dir string, u *url.URL) *helperCred {
	if gitBinary == "" {
		return nil
	}
	desc := credDesc(u)
	out, err := runGit(ctx, dir, append(append([]byte(nil), desc...), '\n'), "credential", "fill")
	if err != nil {
		return nil // nothing stored (git wanted to prompt), or no helper: the message may hold nothing useful
	}
	hc := &helperCred{dir: dir, desc: desc, answer: out}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "username":
			hc.user = v
		case "password":
			hc.pw = v
		}
	}
	if hc.pw == "" {
		return nil
	}
	return hc
}

// approved remembers the last credential approved per description, so a daemon that
// fetches every few seconds does not rewrite ~/.git-credentials on each (git approves on
// every run; memd once per credential and process).
var approved sync.Map // string(desc) → [32]byte

func (hc *helperCred) input() []byte {
	return append(append(append([]byte(nil), hc.desc...), hc.answer...), '\n')
}

// approve tells the helpers the credential worked (`git credential approve`).
func (hc *helperCred) approve(ctx context.Context) {
	sum := sha256.Sum256(hc.answer)
	if prev, ok := approved.Load(string(hc.desc)); ok && prev.([32]byte) == sum {
		return
	}
	if _, err := runGit(ctx, hc.dir, hc.input(), "credential", "approve"); err == nil {
		approved.Store(string(hc.desc), sum)
	}
}

// reject tells the helpers the remote refused the credential (`git credential reject`):
// a store or keychain then drops it, as after a failed `git fetch`.
func (hc *helperCred) reject(ctx context.Context) {
	approved.Delete(string(hc.desc))
	_, _ = runGit(ctx, hc.dir, hc.input(), "credential", "reject")
}
