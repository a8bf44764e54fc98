package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/secrets/secretstest"
)

// TestDoctorSecrets: `memd doctor --secrets` names each secret in history by commit, path
// and rule, with the advice, never the secret, and exits 1; a clean history exits 0.
func TestDoctorSecrets(t *testing.T) {
	c := secretstest.New(3)
	dir := t.TempDir()
	gitIn := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitIn("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "clean.html"), []byte("<p>nothing here</p>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn("add", "-A")
	gitIn("commit", "-q", "-m", "clean")
	if code, out, errs := runMemd(t, "doctor", "--secrets", "--repo", dir); code != 0 || !strings.Contains(out, "0 secrets in history") {
		t.Fatalf("clean history: exit %d\n%s%s", code, out, errs)
	}
	leak := c.Dirty[0]
	if err := os.MkdirAll(filepath.Join(dir, "areas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, leak), []byte(c.Files[leak]), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn("add", "-A")
	gitIn("commit", "-q", "-m", "leak")
	commit := gitIn("rev-parse", "HEAD")
	code, out, errs := runMemd(t, "doctor", "--secrets", "--repo", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	for _, want := range []string{commit[:12], leak + ":", "rule aws-access-token", "rotate", "never force-pushes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, js, _ := runMemd(t, "doctor", "--secrets", "--json", "--repo", dir)
	var rep struct {
		Findings []struct{ Commit, Path, Rule string }
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil || code != 1 || len(rep.Findings) != 1 || rep.Findings[0].Commit != commit {
		t.Errorf("--json: exit %d, %v: %s", code, err, js)
	}
	for _, s := range c.Secrets {
		if strings.Contains(out+errs+js, s) {
			t.Error("the output carries the secret")
		}
	}
}
