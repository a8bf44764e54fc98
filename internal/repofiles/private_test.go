package repofiles

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestPrivateIsOneDefinition(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("!writer.lock\n!*.lock\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ig, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	ig = ig.WithLockFile("writer.lock")
	for _, tc := range []struct {
		rel  string
		want bool
	}{
		{"writer.lock", true}, {"Writer.Lock", true}, {".memory.lock", true},
		{".git/memd/status.json", true}, {"sub/.git", true}, {"a/.memd-abcdefghijklmnop.tmp", true},
		{".memd-tmp-1", true}, {"notes/writer.lock.html", false}, {"notes/a.html", false},
	} {
		if got := ig.Private(tc.rel); got != tc.want {
			t.Errorf("Private(%q) = %v, want %v", tc.rel, got, tc.want)
		}
		if tc.want && !ig.Ignored(tc.rel, false) {
			t.Errorf("Ignored(%q) false for a private path (a .gitignore cannot re-include it)", tc.rel)
		}
	}
	re, err := ig.Reload()
	if err != nil {
		t.Fatal(err)
	}
	if !re.Ignored("writer.lock", false) || re.LockFile() != "writer.lock" {
		t.Fatal("Reload forgot the configured lock file")
	}
	if Private("writer.lock") {
		t.Fatal("the package default knows only the default lock name")
	}
}

func TestSkipNeverAppliesToTrackedPaths(t *testing.T) {
	root := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	for _, p := range []string{"memory.jsonl", "old/x.html", "notes/a.html", "writer.lock"} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run("add", "-f", "memory.jsonl", "old/x.html", "notes/a.html", "writer.lock")
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("*.jsonl\nold/\n*.html\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ig, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	ig = ig.WithLockFile("writer.lock")
	for _, tc := range []struct {
		rel         string
		dir, ignore bool
	}{
		{"memory.jsonl", false, false}, {"old", true, false}, {"old/x.html", false, false},
		{"notes/a.html", false, false}, {"notes/b.html", false, true}, {"old/y.html", false, true},
		{"other.jsonl", false, true}, {"writer.lock", false, true}, {"notes", true, false},
	} {
		if got := ig.Skip(tc.rel, tc.dir); got != tc.ignore {
			t.Errorf("Skip(%q) = %v, want %v", tc.rel, got, tc.ignore)
		}
	}
}

// The names-only index reader reads back the names git wrote: version 2,
// a name over 0xfff bytes, and version 3 (an intent-to-add entry sets the extended flags).
func TestIndexNamesReadWhatGitWrote(t *testing.T) {
	root := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run("init", "-q", "-b", "main")
	long := strings.Repeat(strings.Repeat("d", 200)+"/", 22) + "x.html" // 4428 bytes
	var info strings.Builder
	for _, p := range []string{"a.html", "b/c.jsonl", long, "z"} {
		fmt.Fprintf(&info, "100644 %s\t%s\n", strings.Repeat("1", 40), p)
	}
	cmd := exec.Command("git", "update-index", "--index-info")
	cmd.Dir, cmd.Stdin = root, strings.NewReader(info.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-index: %v %s", err, out)
	}
	want := []string{"a.html", "b/c.jsonl", long, "z"}
	if got := indexNames(root); !slices.Equal(got, want) {
		t.Fatalf("v2 names %q", got)
	}
	if err := os.WriteFile(filepath.Join(root, "ita.html"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("add", "--intent-to-add", "ita.html")
	got := indexNames(root)
	if !slices.Contains(got, "ita.html") || !slices.Contains(got, long) || len(got) != 5 {
		t.Fatalf("v3 names %q", got)
	}
	data, _ := os.ReadFile(filepath.Join(root, ".git", "index"))
	if v := data[7]; v != 3 {
		t.Fatalf("index version %d, want 3 (the test's point)", v)
	}
}
