package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// IsolatedEnv is the environment for the processes of a test that plays one user whose
// home is home: the test process's own environment without what would tie a child to the
// real user or the service manager running the tests (GIT_*, MEMD_*, XDG_*, HOME,
// NOTIFY_SOCKET, WATCHDOG_*, JOURNAL_STREAM), then HOME and XDG_CONFIG_HOME under home,
// gitconfig as the only git config (no system one) and no terminal prompt, so a git that
// wants credentials fails instead of waiting for a human.
func IsolatedEnv(home, gitconfig string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "MEMD_") || strings.HasPrefix(k, "XDG_") ||
			k == "HOME" || k == "NOTIFY_SOCKET" || k == "WATCHDOG_USEC" || k == "WATCHDOG_PID" || k == "JOURNAL_STREAM" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"GIT_CONFIG_GLOBAL="+gitconfig, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

// Git runs the real git binary with one environment (usually IsolatedEnv's); the tests
// check memd's work with git itself, never with memd's own reading of the repo.
type Git struct {
	Env []string // the whole environment of every git it runs
}

// Run runs git in dir with extraEnv added to g.Env and returns its stdout. The error names
// the command and the directory and carries git's stderr.
func (g Git) Run(dir string, extraEnv []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.Env...), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.String(), nil
}

// RunAsPerson is Run as a person at a terminal runs git beside memd: a refusal for a held
// index lock ("Unable to create '.../index.lock': File exists": memd's commit, checkout or
// index refresh holds it for a moment, as any other git would) is retried after a short
// pause, as git's message tells a person to, at most 20 times (about half a second).
// retries is how many were refused; any other failure is returned at once.
func (g Git) RunAsPerson(dir string, extraEnv []string, args ...string) (out string, retries int, err error) {
	for {
		out, err = g.Run(dir, extraEnv, args...)
		if err == nil || retries == 20 || !strings.Contains(err.Error(), "index.lock': File exists") {
			return out, retries, err
		}
		retries++
		time.Sleep(25 * time.Millisecond)
	}
}

// Rev is the object rev names in dir ("HEAD", "refs/heads/main", "HEAD^{tree}"), "" when
// there is none (an unborn HEAD, say). It peels nothing rev does not ask for: a "^{commit}"
// added here would turn every "X^{tree}" into "", and two ""s compare equal.
func (g Git) Rev(dir, rev string) string {
	out, err := g.Run(dir, nil, "rev-parse", "-q", "--verify", rev)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// TreeDiff is git's own answer to "does HEAD hold exactly what is on disk in repo?": a
// throwaway index (in scratchDir) read from HEAD, with no stat cache so git hashes every
// file, and `git status` against it. Empty means every file's content, mode and symlink
// target on disk equals HEAD and HEAD has nothing the disk lacks. It does not depend on
// memd's own .git/index, which is one of the things under test.
func (g Git) TreeDiff(repo, scratchDir string) (string, error) {
	idx := filepath.Join(scratchDir, fmt.Sprintf("probe-index-%d", time.Now().UnixNano()))
	defer os.Remove(idx)
	env := []string{"GIT_INDEX_FILE=" + idx}
	if _, err := g.Run(repo, env, "read-tree", "HEAD"); err != nil {
		return "", err
	}
	return g.Run(repo, env, "-c", "core.quotepath=false", "status", "--porcelain", "--untracked-files=all")
}

// Objects reads many objects ("<rev>:<path>" specs) in dir with one `git cat-file --batch`
// (one git per poll, not one per file) and maps each spec to its content; a spec git reports
// missing is absent from the map. Output it cannot parse is an error, never a guess.
func (g Git) Objects(dir string, specs []string) (map[string]string, error) {
	got := make(map[string]string, len(specs))
	if len(specs) == 0 {
		return got, nil
	}
	var in bytes.Buffer
	for _, s := range specs {
		in.WriteString(s + "\n")
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, g.Env, &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git cat-file --batch (in %s): %w\n%s", dir, err, stderr.String())
	}
	r := bufio.NewReader(bytes.NewReader(out))
	for _, s := range specs {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("git cat-file --batch (in %s): short output at %q", dir, s)
		}
		// "<spec> missing" (the spec may hold spaces) or "<oid> <type> <size>".
		if strings.HasSuffix(header, " missing\n") || strings.HasSuffix(header, " ambiguous\n") {
			continue
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("git cat-file --batch (in %s): header %q for %q", dir, header, s)
		}
		size, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("git cat-file --batch (in %s): header %q for %q", dir, header, s)
		}
		body := make([]byte, size+1) // the content and a newline
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("git cat-file --batch (in %s): %q: %w", dir, s, err)
		}
		got[s] = string(body[:size])
	}
	return got, nil
}
