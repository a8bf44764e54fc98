// Package gitconfig is the config git applies in a repository, read the way git reads it:
// `git config -z --list` (the repository's file, the user's, the XDG and system ones,
// includes followed), once per state of the files git reads it from (Stamp). The filters,
// the signer, the repo's hooks directory and the global excludes of one process all take
// their keys from one run: a one-shot command (`memd restore`) asked git four times before,
// ~4 ms each (issue 48).
package gitconfig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd/internal/gitlayout"
)

// ErrNoGit: there is no git binary to ask; callers use git's defaults.
var ErrNoGit = errors.New("git is not installed")

// timeout bounds one `git config` run.
const timeout = 20 * time.Second

// Pairs is git config's key/value pairs in git's order (keys lower-cased by git). It is
// shared: never modify one.
type Pairs [][2]string

// Last is key's value as git answers `git config --get` for a single-valued key: the last
// one set. key is matched as git prints it (section and name lower-cased).
func (p Pairs) Last(key string) (string, bool) {
	key = strings.ToLower(key)
	for i := len(p) - 1; i >= 0; i-- {
		if p[i][0] == key {
			return p[i][1], true
		}
	}
	return "", false
}

// Read runs `git config -z --list` for the repository whose git directory is gitDir.
func Read(ctx context.Context, gitDir string) (Pairs, error) {
	bin, err := exec.LookPath("git")
	if err != nil {
		return nil, ErrNoGit
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "--git-dir=.", "config", "-z", "--list")
	c.Dir = gitDir
	c.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0")
	var out, stderr bytes.Buffer
	c.Stdout, c.Stderr = &out, &stderr
	if err := c.Run(); err != nil {
		return nil, fmt.Errorf("git config --list in %s: %w: %s", gitDir, err, strings.TrimSpace(stderr.String()))
	}
	return Parse(out.Bytes()), nil
}

// Parse splits `git config -z` output (--list, --get-regexp) into its pairs.
func Parse(out []byte) Pairs {
	var kv Pairs
	for _, rec := range strings.Split(string(out), "\x00") {
		if rec == "" {
			continue
		}
		k, v, _ := strings.Cut(rec, "\n")
		kv = append(kv, [2]string{k, v})
	}
	return kv
}

// cache holds one read per git directory, valid while its stamp holds.
var cache struct {
	sync.Mutex
	m map[string]cached
}

type cached struct {
	stamp string
	kv    Pairs
}

// ForRepo is Read for the repository of layout l, run again only when Stamp(l) moved:
// one process's readers share it. A failed read is not kept.
func ForRepo(ctx context.Context, l gitlayout.Layout) (Pairs, error) {
	stamp := Stamp(l)
	cache.Lock()
	c, ok := cache.m[l.GitDir]
	cache.Unlock()
	if ok && c.stamp == stamp {
		return c.kv, nil
	}
	kv, err := Read(ctx, l.GitDir)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	if cache.m == nil {
		cache.m = map[string]cached{}
	}
	cache.m[l.GitDir] = cached{stamp: stamp, kv: kv}
	cache.Unlock()
	return kv, nil
}

// Stamp is the size and mtime of each file git reads its config from for the repo of
// layout l (git-config(1) FILES), of ~/.git-credentials, and of extra: a change to any of
// them is a change of what a read would find. A few stats, no process. (A file an
// include names is not in it: edit the including file, or restart, for that.)
func Stamp(l gitlayout.Layout, extra ...string) string {
	files := []string{l.Path("config"), l.Path("config.worktree")}
	home, _ := os.UserHomeDir()
	if g, set := os.LookupEnv("GIT_CONFIG_GLOBAL"); set { // set but empty: git reads no user file
		files = append(files, g)
	} else {
		xdg := os.Getenv("XDG_CONFIG_HOME")
		if xdg == "" && home != "" {
			xdg = filepath.Join(home, ".config")
		}
		if xdg != "" {
			files = append(files, filepath.Join(xdg, "git", "config"))
		}
		if home != "" {
			files = append(files, filepath.Join(home, ".gitconfig"))
		}
	}
	if os.Getenv("GIT_CONFIG_NOSYSTEM") == "" {
		if s, set := os.LookupEnv("GIT_CONFIG_SYSTEM"); set {
			files = append(files, s)
		} else {
			files = append(files, "/etc/gitconfig")
		}
	}
	if home != "" {
		files = append(files, filepath.Join(home, ".git-credentials"))
	}
	for _, f := range extra {
		if f != "" {
			files = append(files, f)
		}
	}
	var b strings.Builder
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	// `git -c` and GIT_CONFIG_COUNT settings reach every git memd runs.
	fmt.Fprintf(&b, "%s\x00%s\x00%s", os.Getenv("GIT_CONFIG_PARAMETERS"), os.Getenv("GIT_CONFIG_COUNT"), os.Getenv("HOME"))
	return b.String()
}

// Path is v as `git config --path` expands it: a leading `~/` (or a lone `~`) is the home
// directory, `~user/` that user's; anything else as it is (a relative path stays relative:
// the caller knows what git resolves it against). ok false for what only git itself can
// expand (`%(prefix)/`, an unknown user): ask it.
func Path(v string) (string, bool) {
	switch {
	case strings.HasPrefix(v, "%(prefix)/"):
		return "", false
	case v == "~" || strings.HasPrefix(v, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			return "", false
		}
		return home + v[1:], true
	case strings.HasPrefix(v, "~"):
		name, rest, _ := strings.Cut(v[1:], "/")
		u, err := user.Lookup(name)
		if err != nil {
			return "", false
		}
		if rest == "" && !strings.Contains(v, "/") {
			return u.HomeDir, true
		}
		return filepath.Join(u.HomeDir, rest), true
	}
	return v, true
}
