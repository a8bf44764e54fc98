package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tu "github.com/memd-dev/memd/internal/testutil"
)

// A commit that cannot be signed is not made: with commit.gpgsign and an ssh key that is
// gone, memd is in state error naming the signer, HEAD and the remote (which refuses
// unsigned commits) stay where they were and the file stays pending; with the key back the
// same file is committed, signed, and pushed without anyone asking.
func TestUnsignableCommitWaitsForTheKey(t *testing.T) {
	rig := newHookRig(t)
	home := t.TempDir()
	key, pub := tu.SSHSigningKey(t, home, "id_ed25519")
	tu.WriteFile(t, home, "allowed_signers", "memd@test "+pub+"\n")
	gitconfig := os.Getenv("GIT_CONFIG_GLOBAL")
	for _, kv := range [][2]string{{"commit.gpgsign", "true"}, {"gpg.format", "ssh"}, {"user.signingkey", key},
		{"gpg.ssh.allowedSignersFile", filepath.Join(home, "allowed_signers")}} {
		if out, err := hostGit.Run("", nil, "config", "--file", gitconfig, kv[0], kv[1]); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	for _, kv := range [][2]string{{"user.name", "memd test"}, {"user.email", "memd@test"}} {
		if out, err := hostGit.Run(rig.dir, nil, "config", kv[0], kv[1]); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	hookDir := t.TempDir()
	tu.VerifyingRemote(t, filepath.Join(hookDir, "v.git"))
	hook, err := os.ReadFile(filepath.Join(hookDir, "v.git", "hooks", "pre-receive"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rig.bare, "hooks", "pre-receive"), hook, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(key, key+".away"); err != nil {
		t.Fatal(err)
	}
	localBefore, remoteBefore := head(t, rig.dir), head(t, rig.bare)
	cfg := hookConfig(rig.dir)
	_, logs, stop := startAgent(t, cfg)
	defer stop()
	if err := os.WriteFile(filepath.Join(rig.dir, "signed.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		State, Error string
		Pending      int
	}
	status := func() {
		b, _ := os.ReadFile(filepath.Join(cfg.StateDir(), "status.json"))
		_ = json.Unmarshal(b, &doc)
	}
	tu.WaitFor(t, "state error naming the signer", 30*time.Second, func() bool {
		status()
		return doc.State == "error" && strings.Contains(doc.Error, "ssh key "+key+": ssh-keygen")
	}, func() string { return fmt.Sprintf("%+v\n%s", doc, logs.String()) })
	if doc.Pending == 0 {
		t.Errorf("nothing pending while the commit waits: %+v", doc)
	}
	if head(t, rig.dir) != localBefore || head(t, rig.bare) != remoteBefore {
		t.Fatal("a commit was made without its signature")
	}
	if err := os.Rename(key+".away", key); err != nil {
		t.Fatal(err)
	}
	tu.WaitFor(t, "the file committed and pushed, signed", 30*time.Second, func() bool {
		_, ok := committed(t, rig.bare, "signed.txt")
		return ok
	}, func() string { status(); return fmt.Sprintf("%+v\n%s", doc, logs.String()) })
	if out, err := hostGit.Run(rig.bare, nil, "verify-commit", "main"); err != nil {
		t.Fatalf("verify-commit: %v %s", err, out)
	}
	tu.WaitFor(t, "state back from error", 30*time.Second, func() bool { status(); return doc.State != "error" },
		func() string { return fmt.Sprintf("%+v", doc) })
}
