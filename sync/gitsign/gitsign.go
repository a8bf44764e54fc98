// Package gitsign signs memd's commits as `git commit` signs them: it reads
// the signing config git reads (commit.gpgsign, gpg.format, user.signingKey, gpg.program,
// gpg.<format>.program, gpg.ssh.defaultKeyCommand) through git's own config reader, runs
// the program git runs with git's arguments over the commit object, and puts the signature
// into a gpgsig header where git puts it, so `git verify-commit` accepts it.
package gitsign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// ErrSign is what every failure to sign wraps: the commit was not made (an unsigned commit
// is never made where git would have signed).
var ErrSign = errors.New("cannot sign commit")

// Formats git knows (gpg.format).
const (
	OpenPGP = "openpgp"
	SSH     = "ssh"
	X509    = "x509"
)

// signTimeout bounds one signing run. git has none, but memd's owner loop waits on it: a
// pinentry nobody answers must not hold every other job for good. The commit fails (ErrSign)
// and is tried again.
var signTimeout = 60 * time.Second

// Signer signs commits with one configured key.
type Signer struct {
	Format  string // openpgp, ssh, x509
	Program string // what git runs: gpg.program / gpg.<format>.program, else git's default
	Key     string // user.signingKey as configured ("" = git's default for the format)
	KeyCmd  string // gpg.ssh.defaultKeyCommand (ssh, no Key)
}

// FromConfig is the signer git would use for `git commit` with kv (the pairs of
// `git config --list`, keys lower-cased, later ones winning as in git). nil: git would not
// sign (commit.gpgsign unset or false). An unknown gpg.format is an error, as in git.
func FromConfig(kv [][2]string) (*Signer, error) {
	sign := false
	s := &Signer{Format: OpenPGP}
	programs := map[string]string{}
	for _, p := range kv {
		switch p[0] {
		case "commit.gpgsign":
			sign = configTrue(p[1])
		case "gpg.format":
			s.Format = strings.ToLower(p[1])
		case "user.signingkey":
			s.Key = p[1]
		case "gpg.program", "gpg.openpgp.program":
			programs[OpenPGP] = p[1]
		case "gpg.ssh.program":
			programs[SSH] = p[1]
		case "gpg.x509.program":
			programs[X509] = p[1]
		case "gpg.ssh.defaultkeycommand":
			s.KeyCmd = p[1]
		}
	}
	if !sign {
		return nil, nil
	}
	defaults := map[string]string{OpenPGP: "gpg", SSH: "ssh-keygen", X509: "gpgsm"}
	def, ok := defaults[s.Format]
	if !ok {
		return nil, fmt.Errorf("%w: gpg.format %q: git knows openpgp, ssh and x509", ErrSign, s.Format)
	}
	s.Program = def
	if v := programs[s.Format]; v != "" {
		s.Program = v // run as git runs it: a name on PATH or a path, no ~ expansion
	}
	return s, nil
}

// configTrue reads a config boolean as git does (a bare key is true).
func configTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1", "":
		return true
	}
	return false
}

// String names the signer for errors and logs: "ssh key ~/.ssh/id_ed25519".
func (s *Signer) String() string {
	key := s.Key
	switch {
	case key == "" && s.Format == SSH && s.KeyCmd != "":
		key = "from gpg.ssh.defaultKeyCommand"
	case key == "" && s.Format == SSH:
		key = "(user.signingKey unset)"
	case key == "":
		key = "of the committer"
	case strings.HasPrefix(key, "key::") || strings.HasPrefix(key, "ssh-"):
		key = "(literal) " + shortKey(key)
	}
	return s.Format + " key " + key
}

// shortKey is a literal public key's type and the head of its data, for messages.
func shortKey(k string) string {
	f := strings.Fields(strings.TrimPrefix(k, "key::"))
	if len(f) >= 2 && len(f[1]) > 16 {
		return f[0] + " " + f[1][:16] + "…"
	}
	return strings.Join(f, " ")
}

// SignCommit returns commit (an encoded commit object without a signature) with git's
// gpgsig header holding the signature of commit's bytes. committer is "Name <email>", the
// key git uses for openpgp and x509 when user.signingKey is unset.
func (s *Signer) SignCommit(ctx context.Context, commit []byte, committer string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, signTimeout)
	defer cancel()
	var sig []byte
	var err error
	if s.Format == SSH {
		sig, err = s.signSSH(ctx, commit)
	} else {
		key := s.Key
		if key == "" {
			key = committer
		}
		sig, err = s.signGPG(ctx, commit, key)
	}
	if err != nil {
		return nil, fmt.Errorf("%w with %s: %w", ErrSign, s, err)
	}
	return InsertSignature(commit, sig), nil
}

// InsertSignature puts sig into commit as git's do_sign_commit does: a "gpgsig" header line
// and continuation lines each led by a space, at the end of the header (before the blank
// line that starts the message).
func InsertSignature(commit, sig []byte) []byte {
	pos := len(commit)
	if i := bytes.Index(commit, []byte("\n\n")); i >= 0 {
		pos = i + 1
	}
	var b bytes.Buffer
	b.Grow(len(commit) + len(sig) + 64)
	b.Write(commit[:pos])
	b.WriteString("gpgsig")
	for rest := sig; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		b.WriteByte(' ')
		b.Write(line)
		rest = rest[len(line):]
	}
	if len(sig) > 0 && sig[len(sig)-1] != '\n' {
		b.WriteByte('\n') // git's signers end in one; a header line must
	}
	b.Write(commit[pos:])
	return b.Bytes()
}

// signGPG runs gpg (or gpgsm) as git's sign_buffer_gpg does: `--status-fd=2 -bsau <key>`,
// the payload on stdin, the armored signature on stdout; success needs gpg's SIG_CREATED.
func (s *Signer) signGPG(ctx context.Context, payload []byte, key string) ([]byte, error) {
	c := exec.CommandContext(ctx, s.Program, "--status-fd=2", "-bsau", key)
	c.Env = signEnv()
	c.Stdin = bytes.NewReader(payload)
	var out, status bytes.Buffer
	c.Stdout, c.Stderr = &out, &status
	err := c.Run()
	if err == nil && !bytes.Contains(status.Bytes(), []byte("\n[GNUPG:] SIG_CREATED ")) {
		err = errors.New("no SIG_CREATED")
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w%s", s.Program, err, lastLines(status.Bytes(), false))
	}
	return bytes.ReplaceAll(out.Bytes(), []byte("\r\n"), []byte("\n")), nil
}

// lastLines is the tail of a signer's stderr worth showing: gpg's own words, without its
// [GNUPG:] status lines unless nothing else is there.
func lastLines(b []byte, all bool) string {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || (!all && strings.HasPrefix(l, "[GNUPG:]")) {
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) == 0 {
		if !all {
			return lastLines(b, true)
		}
		return ""
	}
	if len(keep) > 3 {
		keep = keep[len(keep)-3:]
	}
	msg := strings.Join(keep, "; ")
	if len(msg) > 400 {
		msg = msg[:400] + "…"
	}
	return ": " + msg
}

// signEnv is the signer's environment: the user's (gpg needs GNUPGHOME and its agent,
// ssh-keygen SSH_AUTH_SOCK, as under git), without memd's own MEMD_* variables (the push
// token among them).
func signEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MEMD_") {
			env = append(env, kv)
		}
	}
	return env
}
