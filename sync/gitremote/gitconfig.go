package gitremote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/gitconfig"
)

// gitBinary is the git that memd asks for config and credentials; "" = not installed
// (then memd reaches remotes with its own keys and the ssh config only). A variable for
// tests.
var gitBinary = func() string { p, _ := exec.LookPath("git"); return p }()

// gitTimeout bounds one `git config` or `git credential` run (a credential helper that
// hangs must not hold the sync).
const gitTimeout = 20 * time.Second

// gitEnv is the environment of memd's git runs: never a prompt on a terminal or an askpass
// window (memd is a daemon), nor a credential manager's dialog.
func gitEnv() []string {
	return append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GCM_INTERACTIVE=never")
}

// runGit runs git in dir with stdin; stdout is returned, stderr only in the error
// (redacted: a helper may echo a URL with credentials).
func runGit(ctx context.Context, dir string, stdin []byte, args ...string) ([]byte, error) {
	if gitBinary == "" {
		return nil, errNoGit
	}
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, gitBinary, args...)
	c.Dir = dir
	c.Env = gitEnv()
	if stdin != nil {
		c.Stdin = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	stderr := &cappedBuffer{max: 1024}
	c.Stdout, c.Stderr = &stdout, stderr
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		return stdout.Bytes(), &gitRunError{args: args[0] + " " + args[1], msg: RedactURL(msg), err: err}
	}
	return stdout.Bytes(), nil
}

var errNoGit = errors.New("git is not installed")

type gitRunError struct {
	args, msg string
	err       error
}

func (e *gitRunError) Error() string {
	if e.msg == "" {
		return fmt.Sprintf("git %s: %v", e.args, e.err)
	}
	return fmt.Sprintf("git %s: %v: %s", e.args, e.err, e.msg)
}

// exitCode is git's exit status, -1 for anything else.
func (e *gitRunError) exitCode() int {
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// gitConfigList runs `git config -z args...` and returns its key/value pairs in order
// (keys lower-cased by git). Exit 1 is "nothing set".
func gitConfigList(ctx context.Context, dir string, args ...string) ([][2]string, error) {
	out, err := runGit(ctx, dir, nil, append([]string{"config", "-z"}, args...)...)
	var ge *gitRunError
	if errors.As(err, &ge) && ge.exitCode() == 1 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return gitconfig.Parse(out), nil
}

// RepoConfig is the config git applies in the repository whose git directory is gitDir (a
// bare one too): its own file, the user's and the system's, includes followed, keys
// lower-cased, as `git config --list` prints them. A file remote's receive-pack reads the
// same (gitrepo/filepush.go).
func RepoConfig(ctx context.Context, gitDir string) ([][2]string, error) {
	if gitBinary == "" {
		return nil, errNoGit
	}
	return gitconfig.Read(ctx, gitDir)
}

// rewriteURL applies url.<base>.insteadOf (and, for a push, url.<base>.pushInsteadOf
// first) as git does: the longest matching prefix wins; with no git, the URL as written.
//
// A local path or file:// remote is taken as written, without asking git: rewriting one is
// vanishingly rare, and it spares the git run on every sync of a local remote.
func rewriteURL(ctx context.Context, dir, op, raw string) (string, error) {
	if gitBinary == "" || strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, "file://") {
		return raw, nil
	}
	kv, err := gitConfigList(ctx, dir, "--get-regexp", `^url\..*\.(push)?insteadof$`)
	if err != nil {
		return raw, fmt.Errorf("read url.*.insteadOf: %w", err)
	}
	if op == "push" {
		if u, ok := longestRewrite(kv, ".pushinsteadof", raw); ok {
			return u, nil
		}
	}
	if u, ok := longestRewrite(kv, ".insteadof", raw); ok {
		return u, nil
	}
	return raw, nil
}

func longestRewrite(kv [][2]string, suffix, raw string) (string, bool) {
	best, base := -1, ""
	for _, p := range kv {
		if !strings.HasSuffix(p[0], suffix) || !strings.HasPrefix(p[0], "url.") {
			continue
		}
		if !strings.HasPrefix(raw, p[1]) || len(p[1]) <= best {
			continue
		}
		best, base = len(p[1]), strings.TrimSuffix(strings.TrimPrefix(p[0], "url."), suffix)
	}
	if best < 0 {
		return raw, false
	}
	return base + raw[best:], true
}

// httpConfig is what git would use for one http(s) URL: http.<url>.* best match, then
// http.*, as `git config --get-urlmatch http <url>` answers.
type httpConfig struct {
	Proxy, CAInfo string
	SSLVerify     bool
}

func readHTTPConfig(ctx context.Context, dir, rawURL string) (httpConfig, error) {
	hc := httpConfig{SSLVerify: true}
	if gitBinary != "" {
		kv, err := gitConfigList(ctx, dir, "--get-urlmatch", "http", rawURL)
		if err != nil {
			return hc, fmt.Errorf("read http.* for %s: %w", RedactURL(rawURL), err)
		}
		for _, p := range kv {
			switch p[0] {
			case "http.proxy":
				hc.Proxy = p[1]
			case "http.sslcainfo":
				hc.CAInfo = memd.ExpandHome(p[1])
			case "http.sslverify":
				hc.SSLVerify = !GitFalse(p[1])
			}
		}
	}
	// git's environment overrides (git-config(1) http.sslCAInfo, http.sslVerify).
	if v := os.Getenv("GIT_SSL_CAINFO"); v != "" {
		hc.CAInfo = v
	}
	if os.Getenv("GIT_SSL_NO_VERIFY") != "" {
		hc.SSLVerify = false
	}
	return hc, nil
}

// GitFalse and GitTrue read a config boolean as git does; a key given with no value
// (`git config --list` prints it bare) is true.
func GitFalse(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "false", "no", "off", "0":
		return true
	}
	return false
}

func GitTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "true", "yes", "on", "1", "":
		return true
	}
	return false
}

// StartAutoGC starts `git gc --auto` in the repository whose git directory is gitDir, as
// receive-pack runs it after a push (receive.autogc), and does not wait for it: gc decides
// whether anything is due, and a repack of a busy remote takes seconds (5.3 s in the
// ten-machine swarm, under gc.autoDetach's foreground part and all) that a push must not.
// Its output goes nowhere; a failure is gc's to report (gc.log) on its next run.
func StartAutoGC(gitDir string) error {
	if gitBinary == "" {
		return errNoGit
	}
	c := exec.Command(gitBinary, "--git-dir=.", "gc", "--auto", "--quiet")
	c.Dir, c.Env = gitDir, gitEnv()
	if err := c.Start(); err != nil {
		return fmt.Errorf("git gc --auto in %s: %w", gitDir, err)
	}
	go func() { _ = c.Wait() }() // reaped, whenever it ends
	return nil
}
