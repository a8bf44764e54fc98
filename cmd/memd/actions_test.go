package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The commands' human side: a hostile name reaches the terminal as text without its control
// characters, bad usage is exit 2, and each failure names what was asked and what to do.
func TestConflictResolveLogRestoreCommands(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "memory")
	if err := os.MkdirAll(filepath.Join(dir, "areas"), 0o755); err != nil {
		t.Fatal(err)
	}
	sleepGit(t, dir, "init", "-q", "-b", "main")
	bad := "areas/x\x1b]0;pwned\x07.conflict-laptop-20261130T143135Z.html"
	for rel, data := range map[string]string{"areas/x\x1b]0;pwned\x07.html": "theirs\n", bad: "ours\n"} {
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sleepGit(t, dir, "add", "-A")
	sleepGit(t, dir, "commit", "-qm", "base")

	code, out, errOut := runMemd(t, "conflicts", "--repo", dir)
	if code != 0 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "from    laptop") || !strings.Contains(out, "memd resolve PATH --keep") {
		t.Fatalf("memd conflicts: exit %d\n%q\n%s", code, out, errOut)
	}
	if code, _, _ := runMemd(t, "resolve", "--repo", dir, bad); code != exitUsage {
		t.Errorf("resolve without --keep: exit %d, want 2", code)
	}
	if code, _, errOut := runMemd(t, "resolve", "--repo", dir, "areas/none.html", "--keep", "ours"); code != exitFailed || !strings.Contains(errOut, "no conflict copy") || !strings.Contains(errOut, "memd conflicts lists them") {
		t.Errorf("resolve of no conflict: exit %d %s", code, errOut)
	}
	if code, _, errOut := runMemd(t, "restore", "--repo", dir, "/etc/passwd"); code != exitFailed || !strings.Contains(errOut, "outside the memory repo") {
		t.Errorf("restore outside: exit %d %s", code, errOut)
	}
	code, out, errOut = runMemd(t, "resolve", "--repo", dir, bad, "--keep", "theirs")
	if code != 0 || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, "kept theirs") {
		t.Fatalf("resolve: exit %d %q %s", code, out, errOut)
	}
	if _, err := os.Lstat(filepath.Join(dir, bad)); err == nil {
		t.Error("the copy is still there")
	}
	code, out, errOut = runMemd(t, "log", "--repo", dir, bad)
	if code != 0 || !strings.Contains(out, "deleted") || !strings.Contains(out, "memd: resolve") || strings.ContainsAny(out, "\x1b\x07") {
		t.Errorf("log of the copy: exit %d\n%q\n%s", code, out, errOut)
	}
	if code, _, errOut := runMemd(t, "log", "--repo", dir, "areas/never\x1b[2J.html"); code != exitFailed || !strings.Contains(errOut, "no history") || strings.Contains(errOut, "\x1b") {
		t.Errorf("log of nothing: exit %d %s", code, errOut)
	}
	if code, _, errOut := runMemd(t, "restore", "--repo", dir, bad, "--at", "yesterday"); code != exitFailed || !strings.Contains(errOut, "RFC3339") {
		t.Errorf("restore --at yesterday: exit %d %s", code, errOut)
	}
}
