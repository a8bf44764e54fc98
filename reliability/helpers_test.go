package reliability

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

const (
	startTimeout  = 30 * time.Second
	settleTimeout = 60 * time.Second
	exitTimeout   = 30 * time.Second
)

// fastConfig: quick debounce, an ephemeral loopback port, syncs kicked by every commit and a
// short pull interval, a short network timeout so a hung remote is noticed in seconds.
const fastConfig = `watch: {quiet: 150ms, max_delay: 1s}
http: {listen: "127.0.0.1:0"}
sync: {pull_interval: 1s, timeout: 3s}
`

// world is one isolated user: a HOME, a git config without identity, a config file, a
// memory repo and (optionally) a bare remote.
type world struct {
	t      testing.TB
	home   string
	repo   string
	bare   string // "" without a remote
	config string
	env    []string
}

type worldOpts struct {
	config string // the config file's text; "" = fastConfig
	remote bool   // a bare remote at <home>/remote.git, origin of the repo
	demo   bool   // memd init --demo
	noInit bool   // make no repo (hostile tests build their own)
}

func newWorld(t testing.TB, o worldOpts) *world {
	t.Helper()
	home := t.TempDir()
	w := &world{t: t, home: home, repo: filepath.Join(home, "memory"), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	must(t, os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n[init]\n\tdefaultBranch = main\n"), 0o600))
	cfg := o.config
	if cfg == "" {
		cfg = fastConfig
	}
	must(t, os.WriteFile(w.config, []byte(cfg), 0o600))
	w.env = testutil.IsolatedEnv(home, gitconfig)
	if o.noInit {
		return w
	}
	args := []string{"init", "--config", w.config, w.repo}
	if o.remote {
		w.bare = filepath.Join(home, "remote.git")
		w.gitIn(home, "init", "-q", "--bare", "-b", "main", w.bare)
		// A push runs `git gc --auto` on the remote; detached, it would pack and prune loose
		// objects under a later `git fsck` and make it report objects missing.
		w.gitIn(w.bare, "config", "gc.autoDetach", "false")
		args = append(args, "--remote", w.bare)
	}
	if o.demo {
		args = append(args, "--demo")
	}
	if out, code := w.memd(args...); code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	return w
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// memd runs a short memd command to completion (with a deadline: a hang is a failure).
func (w *world) memd(args ...string) (string, int) {
	w.t.Helper()
	return w.memdEnv(nil, 2*time.Minute, args...)
}

func (w *world) memdEnv(extraEnv []string, timeout time.Duration, args ...string) (string, int) {
	w.t.Helper()
	return testutil.Run(w.t, memdBin, w.procOptions(extraEnv), timeout, args...)
}

// procOptions is how this world runs memd: its environment plus extraEnv, in its home, with
// the suite's deadlines. Failure messages quote the log (Describe); no cleanup dump, which a
// crash loop of hundreds of daemons would drown the output in.
func (w *world) procOptions(extraEnv []string) testutil.Options {
	return testutil.Options{Env: append(append([]string(nil), w.env...), extraEnv...), Dir: w.home,
		StartTimeout: startTimeout, ExitTimeout: exitTimeout}
}

func (w *world) path(rel string) string { return filepath.Join(w.repo, filepath.FromSlash(rel)) }

func (w *world) write(rel, content string) {
	w.t.Helper()
	p := w.path(rel)
	must(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(w.t, os.WriteFile(p, []byte(content), 0o644))
}

// gitIn runs git in dir and fails the test on error.
func (w *world) gitIn(dir string, args ...string) string {
	w.t.Helper()
	out, err := w.gitRun(dir, nil, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

func (w *world) gitRun(dir string, extraEnv []string, args ...string) (string, error) {
	return testutil.Git{Env: w.env}.Run(dir, extraEnv, args...)
}

func (w *world) git(args ...string) string { w.t.Helper(); return w.gitIn(w.repo, args...) }

// rev is the object a revision names in dir, "" when it does not exist.
func (w *world) rev(dir, ref string) string { return testutil.Git{Env: w.env}.Rev(dir, ref) }

func (w *world) head() string       { return w.rev(w.repo, "HEAD") }
func (w *world) remoteHead() string { return w.rev(w.bare, "refs/heads/main") }

// isAncestor reports whether commit a is an ancestor of (or equal to) b in dir.
func (w *world) isAncestor(dir, a, b string) bool {
	_, err := w.gitRun(dir, nil, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// treeDiff is git's answer to "does HEAD hold exactly the work tree?" (see
// testutil.Git.TreeDiff); empty means yes.
func (w *world) treeDiff() (string, error) {
	return testutil.Git{Env: w.env}.TreeDiff(w.repo, w.home)
}

// blobs reads many "<rev>:<path>" objects in one `git cat-file --batch`; a missing one is
// absent from the map.
func (w *world) blobs(dir string, specs []string) map[string]string {
	w.t.Helper()
	objs, err := testutil.Git{Env: w.env}.Objects(dir, specs)
	if err != nil {
		w.t.Fatal(err)
	}
	return objs
}

// fsck returns a problem text, "" when `git fsck --full` is clean.
func (w *world) fsck(dir string) string {
	out, err := w.gitRun(dir, nil, "fsck", "--full", "--no-dangling", "--no-progress")
	if err != nil {
		return err.Error()
	}
	if s := strings.TrimSpace(out); s != "" {
		return s
	}
	return ""
}

// conflictMarkers lists HEAD's files that hold a git conflict marker line.
func (w *world) conflictMarkers() []string {
	out, err := w.gitRun(w.repo, nil, "grep", "-I", "-l", "-E", "-e", "^(<<<<<<<|>>>>>>>) ", "HEAD")
	if err != nil || strings.TrimSpace(out) == "" {
		return nil // exit 1: no match
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// statusDoc is the part of status.json the tests read.
type statusDoc struct {
	State   string `json:"state"`
	Detail  string `json:"detail"`
	Error   string `json:"error"`
	Ahead   int    `json:"ahead"`
	PID     int    `json:"pid"`
	Summary struct {
		Text string `json:"text"`
	} `json:"summary"`
}

func (w *world) status() statusDoc {
	var d statusDoc
	b, err := os.ReadFile(filepath.Join(w.repo, ".git", "memd", "status.json"))
	if err == nil {
		_ = json.Unmarshal(b, &d)
	}
	return d
}

// start runs `memd run` and waits until it says it is running.
func (w *world) start(extra ...string) *testutil.Daemon {
	w.t.Helper()
	return testutil.Start(w.t, memdBin, w.procOptions(nil), w.runArgs(extra)...)
}

// spawn starts `memd run` without waiting.
func (w *world) spawn(extraEnv []string, extra ...string) *testutil.Daemon {
	w.t.Helper()
	return w.spawnArgs(extraEnv, w.runArgs(extra))
}

// spawnArgs starts any memd command as a killable process.
func (w *world) spawnArgs(extraEnv []string, args []string) *testutil.Daemon {
	w.t.Helper()
	return testutil.Spawn(w.t, memdBin, w.procOptions(extraEnv), args...)
}

func (w *world) runArgs(extra []string) []string {
	return append([]string{"run", "--config", w.config, "--repo", w.repo}, extra...)
}

// settled waits until HEAD equals the work tree and, with a remote, the remote's main is
// HEAD; it returns false (with what it saw) when that does not happen in time.
func (w *world) settled(timeout time.Duration) (bool, string) {
	var last string
	ok := testutil.Poll(timeout, func() bool {
		diff, err := w.treeDiff()
		if err != nil {
			last = err.Error()
			return false
		}
		if diff != "" {
			last = "work tree differs from HEAD:\n" + diff
			return false
		}
		if w.bare != "" {
			h, r := w.head(), w.remoteHead()
			if h != r {
				last = fmt.Sprintf("HEAD %s, remote main %s", h, r)
				return false
			}
		}
		return true
	})
	return ok, last
}

// writeLockFile creates the writer lock exactly as the Python writer does: O_CREAT|O_EXCL,
// 0644, pid/hostname/acquired_at lines. It returns os.ErrExist when the lock is held.
func writeLockFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	_, err = fmt.Fprintf(f, "pid: %d\nhostname: %s\nacquired_at: %s\n", os.Getpid(), host,
		time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// cp copies a directory tree with cp -a (a template repo per iteration).
func cp(t testing.TB, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v\n%s", from, to, err, out)
	}
}
