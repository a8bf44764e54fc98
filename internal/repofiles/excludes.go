package repofiles

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// excludesTimeout bounds the one `git config` run per build of the rules.
const excludesTimeout = 10 * time.Second

// ExcludesFile is the file git reads as core.excludesFile for the repo at root: the key as
// `git config --path` resolves it there (every config file git reads, includes, `~`
// expanded as git expands it; a relative value is relative to the work tree root, where git
// runs), else git's default $XDG_CONFIG_HOME/git/ignore, else ~/.config/git/ignore.
// Asking git itself is the only way to read its config as it does; without git on PATH the
// default applies. "" when there is no home to resolve the default against.
func ExcludesFile(root string) string {
	if v, ok := gitExcludesValue(root); ok {
		if v == "" {
			return "" // set to empty: git reads no global excludes
		}
		if !filepath.IsAbs(v) {
			v = filepath.Join(root, v)
		}
		return v
	}
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "git", "ignore")
	}
	if home := os.Getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "git", "ignore")
	}
	return ""
}

// gitExcludesValue is core.excludesFile as git reads it in root; ok false when unset (or
// git cannot say).
func gitExcludesValue(root string) (string, bool) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(context.Background(), excludesTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "config", "--path", "--get", "core.excludesFile")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	if err != nil {
		return "", false // exit 1: unset
	}
	return strings.TrimRight(string(bytes.TrimRight(out, "\n")), "\r"), true
}

// readExcludes parses the global excludes file; a missing or unreadable one is no rules,
// as in git.
func readExcludes(path string) []entry {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return parseIgnoreFile(data, nil)
}
