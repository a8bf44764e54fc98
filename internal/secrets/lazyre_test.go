package secrets

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// TestDefaultRulesCompile: the embedded rules compile lazily in memd (lazyRE), so this
// compiles every one of their patterns now, the way a user's config is checked at load.
func TestDefaultRulesCompile(t *testing.T) {
	var tc tomlConfig
	if err := toml.Unmarshal([]byte(defaultTOML), &tc); err != nil {
		t.Fatal(err)
	}
	rs, _, err := translate(&tc, "embedded", true)
	if err != nil {
		t.Fatalf("the embedded gitleaks rules: %v", err)
	}
	if len(rs.rules) < 200 {
		t.Fatalf("%d rules compiled, want gitleaks' ~220", len(rs.rules))
	}
}

// TestUserConfigBadRegexStops: a user's config is compiled at load, so a bad pattern is an
// error naming it, not a silent rule that never matches.
func TestUserConfigBadRegexStops(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gitleaks.toml")
	if err := os.WriteFile(p, []byte("[[rules]]\nid = \"broken\"\nregex = '''(unclosed'''\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Load of a bad regex: %v, want ErrBadConfig", err)
	}
	al := filepath.Join(t.TempDir(), "al.toml")
	if err := os.WriteFile(al, []byte("[extend]\nuseDefault = true\n[[allowlists]]\nregexes = ['''(bad''']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(al); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("Load of a bad allowlist regex: %v, want ErrBadConfig", err)
	}
}
