// Package registry is the list of memory repos memd runs on this machine:
// $XDG_STATE_HOME/memd/repos/ (default ~/.local/state/memd/repos/), one small JSON file per
// repo, written by each `memd run` as it starts. `memd status --all` and `memd service list`
// read it to find every repo's status document; nothing in it is a secret or a state of its
// own (the repo's .git/memd holds that).
//
// One file per repo, written atomically, so instances never need to lock each other out.
package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/safefs"
)

// Entry is one repo memd has run on.
type Entry struct {
	Repo      string    `json:"repo"`
	PID       int       `json:"pid"`
	HTTP      string    `json:"http"` // the address the page and /metrics listen on; "" when off
	StartedAt time.Time `json:"started_at"`
}

// Dir is the registry directory under env's XDG_STATE_HOME (an absolute one; else
// HOME/.local/state), as the XDG base directory spec says.
func Dir(getenv func(string) string) (string, error) {
	if s := getenv("XDG_STATE_HOME"); filepath.IsAbs(s) {
		return filepath.Join(s, "memd", "repos"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("registry: neither $XDG_STATE_HOME nor $HOME is an absolute path")
	}
	return filepath.Join(home, ".local", "state", "memd", "repos"), nil
}

// fileName is a repo's file: its base name (readable) and a hash of the whole path (unique).
func fileName(repo string) string {
	sum := sha256.Sum256([]byte(filepath.Clean(repo)))
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, filepath.Base(repo))
	if len(base) > 40 {
		base = base[:40]
	}
	return base + "-" + hex.EncodeToString(sum[:6]) + ".json"
}

// Register records e in dir (made 0700 if missing), replacing what the repo had.
func Register(dir string, e Entry) error {
	if !filepath.IsAbs(e.Repo) {
		return fmt.Errorf("registry: repo %q is not an absolute path", e.Repo)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	t, err := safefs.Open(dir)
	if err != nil {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	defer t.Close()
	if err := t.WriteFileAtomic(fileName(e.Repo), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("registry %s: %w", dir, err)
	}
	return nil
}

// Forget removes repo's entry; none is no error.
func Forget(dir, repo string) error {
	err := os.Remove(filepath.Join(dir, fileName(repo)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// List reads every entry, sorted by repo. A file that is not an entry is skipped and named
// in the returned error (the rest are still listed); no directory is an empty list.
func List(dir string) ([]Entry, error) {
	names, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", dir, err)
	}
	var out []Entry
	var bad []string
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".json") || !n.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n.Name()))
		var e Entry
		if err == nil {
			err = json.Unmarshal(b, &e)
		}
		if err != nil || !filepath.IsAbs(e.Repo) {
			bad = append(bad, n.Name())
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Repo < out[j].Repo })
	if len(bad) > 0 {
		return out, fmt.Errorf("registry %s: not an entry, skipped: %s", dir, strings.Join(bad, ", "))
	}
	return out, nil
}

// Names gives each repo a short name for one line: its base name, or, for repos whose base
// names clash, as many trailing path elements as it takes to tell them apart.
func Names(repos []string) []string {
	out := make([]string, len(repos))
	depth := make([]int, len(repos))
	for i, r := range repos {
		depth[i] = 1
		out[i] = tail(r, 1)
	}
	for round := 0; round < 32; round++ {
		seen := map[string][]int{}
		for i, n := range out {
			seen[n] = append(seen[n], i)
		}
		clash := false
		for _, idx := range seen {
			if len(idx) < 2 {
				continue
			}
			for _, i := range idx {
				if longer := tail(repos[i], depth[i]+1); longer != out[i] {
					depth[i]++
					out[i] = longer
					clash = true
				}
			}
		}
		if !clash {
			break
		}
	}
	return out
}

func tail(p string, n int) string {
	parts := strings.Split(strings.Trim(filepath.ToSlash(filepath.Clean(p)), "/"), "/")
	if n > len(parts) {
		n = len(parts)
	}
	return strings.Join(parts[len(parts)-n:], "/")
}
