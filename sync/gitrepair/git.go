package gitrepair

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// git runs the git binary in the work tree; stdout is returned, a failure carries stderr.
func git(ctx context.Context, o Options, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + o.GitDir, "--work-tree=" + o.WorkDir}, args...)...)
	cmd.Dir = o.WorkDir
	cmd.Env = append(append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0"), o.GitEnv...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), &gitError{op: args[0], err: err, stderr: strings.TrimSpace(errb.String())}
	}
	return out.String(), nil
}

// gitError is a failed git command: its message is stderr's last line, the whole is kept.
type gitError struct {
	op     string
	err    error
	stderr string
}

func (e *gitError) Error() string {
	msg := e.stderr
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	return fmt.Sprintf("git %s: %v: %s", e.op, e.err, msg)
}

func (e *gitError) Unwrap() error { return e.err }

// unreadable are the ids git's stderr says it could not read ("Could not read <id>", "bad
// object <id>"), not the commits whose parents it was walking.
var unreadable = regexp.MustCompile(`(?:Could not read|bad object|unable to read|missing (?:commit|tree|blob)) ([0-9a-f]{40})`)

// missingObjects asks git which objects the refs, HEAD and (when it reads) the index need
// but the repo lacks. A missing commit stops git's walk with an error naming it (git 2.39
// prints only missing trees and blobs): that id is returned.
func missingObjects(ctx context.Context, o Options) ([]string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, nil // memd runs without git; only this look and the repairs need it
	}
	// A partial clone lacks objects on purpose (its remote promises them): not asked here.
	if v, _ := git(ctx, o, "config", "--get", "extensions.partialClone"); strings.TrimSpace(v) != "" {
		return nil, nil
	}
	args := []string{"rev-list", "--objects", "--missing=print", "--all"}
	if _, err := os.Stat(o.GitDir + "/index"); err == nil {
		args = append(args, "--indexed-objects")
	}
	if _, err := git(ctx, o, "rev-parse", "-q", "--verify", "HEAD^{commit}"); err == nil {
		args = append(args, "HEAD")
	}
	out, err := git(ctx, o, args...)
	var ids []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "?") && isHex40(l[1:]) {
			ids = append(ids, l[1:])
		}
	}
	if err != nil {
		var ge *gitError
		var m [][]string
		if errors.As(err, &ge) {
			m = unreadable.FindAllStringSubmatch(ge.stderr, -1)
		}
		if len(m) == 0 {
			return ids, fmt.Errorf("list missing objects: %w", err)
		}
		for _, x := range m {
			ids = append(ids, x[1])
		}
	}
	return dedupe(ids), nil
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
