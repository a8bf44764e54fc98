package gitremote

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Deepen deepens the shallow clone at workTree by `by` commits below its graft points,
// from remote's branch ref ("refs/heads/<name>"), as `git fetch --deepen=<by>` does, by
// asking the git binary (memd's own fetch speaks no deepen): .git/shallow moves down, the
// objects come in, and no ref moves (no destination, an empty --refmap, no FETCH_HEAD), so
// memd's view of the remote stays what it vetted. by <= 0 is --unshallow.
func Deepen(ctx context.Context, workTree, remote, ref string, by int, timeout time.Duration) error {
	depth := "--unshallow"
	if by > 0 {
		depth = "--deepen=" + strconv.Itoa(by)
	}
	return GitFetch(ctx, workTree, remote, ref, timeout, depth)
}

// GitFetch is `git fetch <extra> <remote> <ref>` in workTree that moves no ref (no
// destination, an empty --refmap, no FETCH_HEAD, no tags): only objects (and, in a shallow
// clone, .git/shallow) change.
func GitFetch(ctx context.Context, workTree, remote, ref string, timeout time.Duration, extra ...string) error {
	if gitBinary == "" {
		return errNoGit
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append(append([]string{"fetch", "--quiet"}, extra...), "--no-tags", "--no-write-fetch-head", "--refmap=", "--no-auto-gc", "--", remote, ref)
	c := exec.CommandContext(ctx, gitBinary, args...)
	c.Dir = workTree
	c.Env = gitEnv()
	stderr := &cappedBuffer{max: 1024}
	c.Stderr = stderr
	if err := c.Run(); err != nil {
		return &gitRunError{args: strings.Join(args[:len(extra)+1], " "), msg: RedactURL(strings.TrimSpace(stderr.String())), err: err}
	}
	return nil
}

// DeepenStep is how many commits the first Deepen of a merge asks for; each next one asks
// for twice as many, so a base n commits down costs about log2(n) fetches.
const DeepenStep = 16

// FetchMissing has the git binary read object h in the partial clone at workTree (`git
// cat-file -e`), which fetches it from the promisor remote when it is missing, as any read
// of git's does (promisor-remote.c); the object is in the repo after it.
func FetchMissing(ctx context.Context, workTree string, h string, timeout time.Duration) error {
	if gitBinary == "" {
		return errNoGit
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := exec.CommandContext(ctx, gitBinary, "cat-file", "-e", h)
	c.Dir = workTree
	c.Env = gitEnv()
	stderr := &cappedBuffer{max: 1024}
	c.Stderr = stderr
	if err := c.Run(); err != nil {
		return &gitRunError{args: "cat-file -e", msg: RedactURL(strings.TrimSpace(stderr.String())), err: err}
	}
	return nil
}
