package repofiles

import (
	"os"
	"path/filepath"
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
