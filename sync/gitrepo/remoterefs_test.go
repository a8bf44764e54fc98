package gitrepo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOpenDropsTornRemoteTrackingRef(t *testing.T) {
	dir := newGitDir(t)
	refs := filepath.Join(dir, ".git", "refs", "remotes", "origin")
	if err := os.MkdirAll(refs, 0o755); err != nil {
		t.Fatal(err)
	}
	good := "0123456789abcdef0123456789abcdef01234567\n"
	files := map[string]string{"main": "", "torn": "01234", "good": good, "HEAD": "ref: refs/remotes/origin/main\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(refs, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	openTest(t, dir, testOptions())
	for name, keep := range map[string]bool{"main": false, "torn": false, "good": true, "HEAD": true} {
		_, err := os.Stat(filepath.Join(refs, name))
		if kept := err == nil; kept != keep {
			t.Errorf("%s: kept=%v, want %v", name, kept, keep)
		}
	}
}
