package gitpath

import "testing"

func TestCheckName(t *testing.T) {
	bad := []string{"", ".", "..", "a/b", "a\x00b", ".git", ".GIT", ".Git", ".git.", ".git ", ".git. . ", "git~1", "GIT~1",
		".git::$INDEX_ALLOCATION", ".git:x", "a\\b", ".g\u200cit", "\ufeff.git", ".gi\u200dT", ".git\u200f"}
	for _, n := range bad {
		if CheckName(n, false) == nil {
			t.Errorf("%q accepted", n)
		}
	}
	good := []string{"a", ".gitignore", ".gitx", "git", "git~2", ".git-x", "x.git", "...", ".g", "記憶.md", ".gitmodules", "gitmod~1"}
	for _, n := range good {
		if err := CheckName(n, false); err != nil {
			t.Errorf("%q refused: %v", n, err)
		}
	}
	badLink := []string{".gitmodules", ".GITMODULES", ".gitmodules .", "gitmod~1", "GITMOD~4", "gi7eba~1", ".gitattributes", ".gitignore", ".mailmap", ".g\u200citmodules", "maba30~9"}
	for _, n := range badLink {
		if CheckName(n, true) == nil {
			t.Errorf("symlink %q accepted", n)
		}
	}
	for _, n := range []string{"link", "gitmodules", ".gitmodulesx", "gitmod~5", "gi7eba"} {
		if err := CheckName(n, true); err != nil {
			t.Errorf("symlink %q refused: %v", n, err)
		}
	}
}
