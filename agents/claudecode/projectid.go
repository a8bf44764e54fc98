// Package claudecode keeps Claude Code's auto memory of every project on this machine in the
// memory repo, at agents/claude-code/<project id>/ (README, "Claude Code's memory"): it finds the projects from what Claude Code records, names each by its
// origin (so one project at two paths on two machines shares one memory) and copies the
// memory files both ways. It never touches sync/ or agent/: agent/ calls it.
package claudecode

import (
	"errors"
	"fmt"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/memd-dev/memd"
)

// RepoDir is the folder of the memory repo that holds every project's Claude Code memory.
const RepoDir = memd.ClaudeCodeDir

// ErrNoID: a checkout with neither an origin nor a commit has no id and is not synced.
var ErrNoID = errors.New("no project id")

// segmentRE is what one segment of an id may hold: a host or a path part of a git URL.
var segmentRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._~+-]*$`)

// NormalizeRemote turns an origin URL into host/owner/repo: lower-case host; no scheme,
// user, password or port; no trailing .git or slash. ssh (scp-like or ssh://), https and
// git:// spellings of one repository agree. ok is false for a URL with no host (a local
// path, file://) or a segment unfit for a path ("..", a leading dot, a control character).
func NormalizeRemote(url string) (id string, ok bool) {
	u := strings.TrimSpace(url)
	if i := strings.Index(u, "::"); i > 0 && !strings.Contains(u[:i], "/") {
		u = u[i+2:] // <transport>::<address>: the address names the repository
	}
	var host, p string
	if i := strings.Index(u, "://"); i >= 0 {
		if strings.EqualFold(u[:i], "file") {
			return "", false
		}
		rest := u[i+3:]
		host, p, _ = strings.Cut(rest, "/")
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
		if h, port, found := strings.Cut(host, ":"); found && !strings.HasPrefix(host, "[") {
			_ = port
			host = h
		}
	} else {
		colon := strings.IndexByte(u, ':')
		slash := strings.IndexByte(u, '/')
		if colon <= 0 || (slash >= 0 && slash < colon) {
			return "", false // a local path
		}
		host, p = u[:colon], u[colon+1:]
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
	}
	host = strings.ToLower(host)
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	p = strings.TrimRight(p, "/")
	segs := append([]string{host}, strings.Split(p, "/")...)
	if len(segs) < 2 {
		return "", false
	}
	for _, s := range segs {
		if !segmentRE.MatchString(s) || strings.HasSuffix(s, ".") {
			return "", false
		}
	}
	return strings.Join(segs, "/"), true
}

// gitOut runs git in dir and returns its trimmed stdout.
func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %w", strings.Join(args, " "), dir, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Toplevel is the work tree root of the checkout holding dir (Claude Code keys a project's
// memory by it).
func Toplevel(dir string) (string, error) {
	return gitOut(dir, "rev-parse", "--show-toplevel")
}

// ProjectID names the project checked out at dir: its origin normalised (NormalizeRemote),
// else root-<first 12 hex of its root commit> (the smallest, when history has several). An
// error wrapping ErrNoID says why there is none.
func ProjectID(dir string) (string, error) {
	if url, err := gitOut(dir, "remote", "get-url", "origin"); err == nil && url != "" {
		if id, ok := NormalizeRemote(url); ok {
			return id, nil
		}
	}
	out, err := gitOut(dir, "rev-list", "--max-parents=0", "HEAD")
	if err != nil || out == "" {
		return "", fmt.Errorf("%w: %s has no origin with a host and no commit yet", ErrNoID, dir)
	}
	roots := strings.Fields(out)
	slices.Sort(roots)
	if len(roots[0]) < 12 {
		return "", fmt.Errorf("%w: %s: root commit %q", ErrNoID, dir, roots[0])
	}
	return "root-" + roots[0][:12], nil
}

// RepoPath is the project's folder in the memory repo (slash-separated, repo-relative).
func RepoPath(id string) string { return path.Join(RepoDir, id) }
