package repofiles

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/gitlayout"
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
// git cannot say). The process's one read of git's config (gitconfig.ForRepo) answers
// unless the value needs git itself to expand it.
func gitExcludesValue(root string) (string, bool) {
	if l, err := gitlayout.Resolve(root); err == nil {
		if kv, err := gitconfig.ForRepo(context.Background(), l); err == nil {
			v, set := kv.Last("core.excludesfile")
			if !set || v == "" {
				return v, set
			}
			if p, ok := gitconfig.Path(v); ok {
				return p, true
			}
		} else if errors.Is(err, gitconfig.ErrNoGit) {
			return "", false
		}
	}
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

// excludes is the global excludes file as one build of the rules read it.
type excludes struct {
	path    string // "" none
	stamp   string // its size, mtime and inode then (ExcludesChanged)
	entries []entry
}

// readGlobal reads the global excludes file of the repo at root; a missing or unreadable
// one is no rules, as in git.
func readGlobal(root string) excludes {
	g := excludes{path: ExcludesFile(root)}
	g.stamp = fileStamp(g.path)
	if g.path == "" {
		return g
	}
	if data, err := os.ReadFile(g.path); err == nil {
		g.entries = parseIgnoreFile(data, nil)
	}
	return g
}

// ExcludesChanged reports whether the global excludes file these rules read has changed
// since (then Reload reads it again): one stat. The agent asks at every reconcile.
func (ig *Ignorer) ExcludesChanged() bool {
	return ig != nil && fileStamp(ig.global.path) != ig.global.stamp
}

// fileStamp is path's size, mtime and inode ("-" when there is none).
func fileStamp(path string) string {
	if path == "" {
		return "-"
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "-"
	}
	ino := uint64(0)
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf("%d.%d.%d", fi.Size(), fi.ModTime().UnixNano(), ino)
}
