package gitconfig

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/gitlayout"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// isolate gives git a HOME of its own and no system config.
func isolate(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	os.Unsetenv("GIT_CONFIG_GLOBAL") // set but empty, git reads no user file at all
	return home
}

// Path expands what `git config --path` expands, the same way, on the same values.
func TestPathAsGitExpandsIt(t *testing.T) {
	home := isolate(t)
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q")
	for _, v := range []string{"~/hooks", "~", "~root/x/y", "rel/dir", "/abs/dir", "~/"} {
		gitIn(t, dir, "config", "core.hooksPath", v)
		want := strings.TrimRight(gitIn(t, dir, "config", "--path", "--get", "core.hooksPath"), "\n")
		got, ok := Path(v)
		if !ok || got != want {
			t.Errorf("Path(%q) = %q, %v; git config --path says %q (HOME %s)", v, got, ok, want, home)
		}
	}
	if _, ok := Path("%(prefix)/share/hooks"); ok {
		t.Error("Path expanded %(prefix)/, which only git can")
	}
	if _, ok := Path("~no-such-user-here/x"); ok {
		t.Error("Path expanded an unknown user's home")
	}
}

// ForRepo reads once per state of the config files, and again when one changes; Last is
// git config --get's answer.
func TestForRepoReadsAgainWhenConfigChanges(t *testing.T) {
	home := isolate(t)
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q")
	gitIn(t, dir, "config", "core.excludesFile", "~/one")
	l, err := gitlayout.Resolve(dir)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := ForRepo(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := kv.Last("core.excludesFile"); !ok || v != "~/one" {
		t.Fatalf("core.excludesFile = %q, %v", v, ok)
	}
	// The user's config file appears: a new stamp, a new read, the later file's value
	// under the repo's own (git's order: global before local).
	must(t, os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\texcludesFile = ~/global\n\thooksPath = h\n"), 0o644))
	kv, err = ForRepo(context.Background(), l)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := kv.Last("core.excludesfile"); v != strings.TrimRight(gitIn(t, dir, "config", "--get", "core.excludesFile"), "\n") {
		t.Fatalf("core.excludesFile after the user's config: %q", v)
	}
	if v, ok := kv.Last("core.hooksPath"); !ok || v != "h" {
		t.Fatalf("core.hooksPath from the user's config = %q, %v", v, ok)
	}
	gitIn(t, dir, "config", "--unset", "core.excludesFile")
	kv, _ = ForRepo(context.Background(), l)
	if v, _ := kv.Last("core.excludesfile"); v != "~/global" {
		t.Fatalf("after the repo's key went: %q, want the user's", v)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
