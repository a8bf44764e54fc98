package gitsign

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/memd-dev/memd"
)

// literalKey is git's is_literal_ssh_key: "key::<public key>", or (deprecated) a value
// starting "ssh-"; the key without the prefix.
func literalKey(k string) (string, bool) {
	if rest, ok := strings.CutPrefix(k, "key::"); ok {
		return rest, true
	}
	if strings.HasPrefix(k, "ssh-") {
		return k, true
	}
	return "", false
}

// signSSH runs ssh-keygen as git's sign_buffer_ssh does: `-Y sign -n git -f <key file>`
// over a temp file holding the payload, the signature read from <file>.sig. A literal key
// (an agent's key) goes to a temp file of its own and `-U` says its private half is in
// the agent.
func (s *Signer) signSSH(ctx context.Context, payload []byte) ([]byte, error) {
	key := s.Key
	if key == "" {
		var err error
		if key, err = s.defaultSSHKey(ctx); err != nil {
			return nil, err
		}
	}
	args := []string{"-Y", "sign", "-n", "git", "-f"}
	if lit, ok := literalKey(key); ok {
		kf, err := tempFile(".git_signing_key_tmp*", []byte(strings.TrimSpace(lit)+"\n"))
		if err != nil {
			return nil, err
		}
		defer os.Remove(kf)
		args = append(args, kf, "-U")
	} else {
		args = append(args, memd.ExpandHome(key))
	}
	bf, err := tempFile(".git_signing_buffer_tmp*", payload)
	if err != nil {
		return nil, err
	}
	defer os.Remove(bf)
	defer os.Remove(bf + ".sig")
	c := exec.CommandContext(ctx, s.Program, append(args, bf)...)
	c.Env = signEnv()
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		if bytes.Contains(stderr.Bytes(), []byte("usage:")) {
			return nil, fmt.Errorf("%s: ssh-keygen -Y sign is needed for ssh signing (OpenSSH 8.2p1+)", s.Program)
		}
		return nil, fmt.Errorf("%s: %w%s", s.Program, err, lastLines(stderr.Bytes(), true))
	}
	sig, err := os.ReadFile(bf + ".sig")
	if err != nil {
		return nil, fmt.Errorf("%s: read its signature: %w", s.Program, err)
	}
	return bytes.ReplaceAll(sig, []byte("\r\n"), []byte("\n")), nil
}

// defaultSSHKey is git's get_default_ssh_signing_key: the first line of
// gpg.ssh.defaultKeyCommand's output, which must be a literal key.
func (s *Signer) defaultSSHKey(ctx context.Context) (string, error) {
	if s.KeyCmd == "" {
		return "", errors.New("user.signingKey needs to be set for ssh signing")
	}
	argv := splitCmdline(s.KeyCmd)
	if len(argv) == 0 {
		return "", errors.New("gpg.ssh.defaultKeyCommand is empty")
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = signEnv()
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("gpg.ssh.defaultKeyCommand %s: %w%s", argv[0], err, lastLines(stderr.Bytes(), true))
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if _, ok := literalKey(strings.TrimSpace(first)); !ok {
		return "", fmt.Errorf("gpg.ssh.defaultKeyCommand %s succeeded but returned no keys", argv[0])
	}
	return strings.TrimSpace(first), nil
}

// splitCmdline splits a command line as git's split_cmdline does: blanks separate words,
// single and double quotes group them, a backslash escapes the next character.
func splitCmdline(s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	esc := false
	for _, r := range s {
		switch {
		case esc:
			w.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, inWord = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words
}

// tempFile writes b to a new temp file named as git names its own, and returns its path.
func tempFile(pattern string, b []byte) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("temp file for signing: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("temp file for signing: %w", err)
	}
	return f.Name(), nil
}
