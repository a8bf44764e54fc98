package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SSHSigningKey makes an ed25519 key without a passphrase at dir/name (as a user makes one
// with ssh-keygen -t ed25519 and an empty -N) and returns the private key's path and the public
// key's line.
func SSHSigningKey(t testing.TB, dir, name string) (keyFile, pub string) {
	t.Helper()
	keyFile = filepath.Join(dir, name)
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "memd-test", "-f", keyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	b, err := os.ReadFile(keyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return keyFile, strings.TrimSpace(string(b))
}

// GPGSigningKey makes an OpenPGP signing key for uid ("Name <email>") without a
// passphrase in the keyring at gnupgHome, and returns its fingerprint. The keyring's
// gpg-agent is stopped when the test ends.
func GPGSigningKey(t testing.TB, gnupgHome, uid string) string {
	t.Helper()
	if err := os.MkdirAll(gnupgHome, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GNUPGHOME="+gnupgHome)
	t.Cleanup(func() {
		c := exec.Command("gpgconf", "--kill", "gpg-agent")
		c.Env = env
		_ = c.Run()
	})
	c := exec.Command("gpg", "--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "sign", "never")
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("gpg --quick-gen-key: %v\n%s", err, out)
	}
	c = exec.Command("gpg", "--batch", "--with-colons", "--list-secret-keys", uid)
	c.Env = env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("gpg --list-secret-keys: %v", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Split(l, ":"); len(f) > 9 && f[0] == "fpr" {
			return f[9]
		}
	}
	t.Fatalf("no fingerprint in gpg's listing:\n%s", out)
	return ""
}

// VerifyingRemote makes a bare repository at dir whose pre-receive hook refuses every push
// bringing a commit that `git verify-commit` does not accept (GitHub's "Require signed
// commits", as a hook). The hook runs with the pusher's environment, so verify-commit reads
// the pusher's gpg.ssh.allowedSignersFile and keyring.
func VerifyingRemote(t testing.TB, dir string) {
	t.Helper()
	RunGit(t, filepath.Dir(dir), "init", "-q", "--bare", "-b", "main", dir)
	hook := `#!/bin/sh
zero=0000000000000000000000000000000000000000
while read old new ref; do
	[ "$new" = "$zero" ] && continue
	if [ "$old" = "$zero" ]; then range="$new --not --all"; else range="$old..$new"; fi
	for c in $(git rev-list $range); do
		if ! git verify-commit "$c" >/dev/null 2>&1; then
			echo "refused: commit $c is not signed by a known key" >&2
			exit 1
		fi
	done
done
`
	if err := os.WriteFile(filepath.Join(dir, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
}

// X509SigningKey makes a self-signed X.509 signing certificate for "CN=<name>" with email,
// its RSA key without a passphrase, in the keyring at gnupgHome, trusted there as a root
// (trustlist.txt) with CRL checks off, and returns its fingerprint: what `gpgsm -bsau` and
// `git verify-commit` of an x509 signature need.
func X509SigningKey(t testing.TB, gnupgHome, name, email string) string {
	t.Helper()
	if err := os.MkdirAll(gnupgHome, 0o700); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "GNUPGHOME="+gnupgHome)
	t.Cleanup(func() {
		c := exec.Command("gpgconf", "--kill", "gpg-agent")
		c.Env = env
		_ = c.Run()
	})
	// gpgsm certifies a key the agent holds: an RSA one made without a passphrase by gpg.
	c := exec.Command("gpg", "--batch", "--passphrase", "", "--quick-gen-key", "x509 <"+email+">", "rsa2048", "sign", "never")
	c.Env = env
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("gpg --quick-gen-key rsa2048: %v\n%s", err, out)
	}
	c = exec.Command("gpg", "--batch", "--with-colons", "--with-keygrip", "--list-secret-keys", "x509 <"+email+">")
	c.Env = env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("gpg --list-secret-keys: %v", err)
	}
	grip := ""
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Split(l, ":"); len(f) > 9 && f[0] == "grp" {
			grip = f[9]
			break
		}
	}
	params := "Key-Type: RSA\nKey-Grip: " + grip + "\nKey-Usage: sign\nSerial: random\nName-DN: CN=" + name + "\nName-Email: " + email + "\n"
	c = exec.Command("gpgsm", "--batch", "--gen-key")
	c.Env, c.Stdin = env, strings.NewReader(params)
	cert, err := c.Output()
	if err != nil {
		t.Fatalf("gpgsm --gen-key: %v", err)
	}
	c = exec.Command("gpgsm", "--batch", "--import")
	c.Env, c.Stdin = env, strings.NewReader(string(cert))
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("gpgsm --import: %v\n%s", err, out)
	}
	c = exec.Command("gpgsm", "--with-colons", "--list-secret-keys")
	c.Env = env
	if out, err = c.Output(); err != nil {
		t.Fatalf("gpgsm --list-secret-keys: %v", err)
	}
	fpr := ""
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Split(l, ":"); len(f) > 9 && f[0] == "fpr" {
			fpr = f[9]
			break
		}
	}
	if fpr == "" {
		t.Fatalf("no certificate in gpgsm's listing:\n%s", out)
	}
	for f, body := range map[string]string{"trustlist.txt": fpr + " S relax\n", "gpgsm.conf": "disable-crl-checks\n"} {
		if err := os.WriteFile(filepath.Join(gnupgHome, f), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c = exec.Command("gpgconf", "--reload", "gpg-agent") // it reads trustlist.txt
	c.Env = env
	_ = c.Run()
	return fpr
}
