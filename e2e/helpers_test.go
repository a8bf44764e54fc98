// Package e2e drives the real memd binary as a process against real git repos: `memd run`
// watches, commits, survives kills and restarts; the real `git` binary checks every result.
package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// memdBin is the memd binary built once in TestMain (without -race: the daemon is the thing
// under test, the race detector runs on the test process).
var memdBin string

func TestMain(m *testing.M) {
	bin, remove, err := testutil.BuildMemd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	memdBin = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// Timeouts for conditions. They are deadlines, not sleeps: every wait polls a condition.
const (
	startTimeout  = 20 * time.Second
	commitTimeout = 20 * time.Second
	exitTimeout   = 30 * time.Second
	memdTimeout   = 2 * time.Minute // a one-shot memd command
)

// baseConfig is what every test runs with unless it says otherwise: fast debounce, an
// ephemeral loopback port, no sleep catch-up (so no sleep commit mixes into what we count).
const baseConfig = `watch: {quiet: 200ms, max_delay: 2s}
http: {listen: "127.0.0.1:0"}
sleep: {catch_up: false}
`

// world is one isolated user: HOME, XDG_CONFIG_HOME, git config and a memory repo made by
// `memd init`.
type world struct {
	t      *testing.T
	home   string
	repo   string
	config string
	env    []string
}

// newWorld makes a fresh home and a repo made by `memd init`, with baseConfig. Tests that
// need other settings pass a whole config to newWorldConfig (YAML refuses a repeated key).
func newWorld(t *testing.T) *world { return newWorldConfig(t, baseConfig) }

func newWorldConfig(t *testing.T, config string) *world {
	t.Helper()
	home := t.TempDir()
	w := &world{t: t, home: home, repo: filepath.Join(home, "memory"), config: filepath.Join(home, "memd.yaml")}
	gitconfig := filepath.Join(home, "gitconfig")
	// No user identity on purpose: memd must commit on a machine without one.
	if err := os.WriteFile(gitconfig, []byte("[core]\n\tquotepath = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = testutil.IsolatedEnv(home, gitconfig)
	out, code := w.memd("init", "--config", w.config, w.repo)
	if code != 0 {
		t.Fatalf("memd init: exit %d\n%s", code, out)
	}
	return w
}

// memd runs a short memd command to completion and returns its combined output and exit
// code; a hang fails the test.
func (w *world) memd(args ...string) (string, int) {
	w.t.Helper()
	return testutil.Run(w.t, memdBin, w.procOptions(), memdTimeout, args...)
}

// procOptions is how this world runs memd: its environment, e2e's deadlines, and the whole
// log of every process at cleanup when the test failed (always with MEMD_E2E_LOGS set).
func (w *world) procOptions() testutil.Options {
	return testutil.Options{Env: w.env, StartTimeout: startTimeout, ExitTimeout: exitTimeout,
		LogOnFailure: true, LogAlways: os.Getenv("MEMD_E2E_LOGS") != ""}
}

// path is the absolute path of a repo-relative one.
func (w *world) path(rel string) string { return filepath.Join(w.repo, filepath.FromSlash(rel)) }

func (w *world) write(rel, content string) {
	w.t.Helper()
	p := w.path(rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) read(rel string) string {
	w.t.Helper()
	b, err := os.ReadFile(w.path(rel))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// sh runs a shell command line in the repo, as a user or an agent would.
func (w *world) sh(script string) {
	w.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir, cmd.Env = w.repo, w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("sh %q: %v\n%s", script, err, out)
	}
}

// gitRun runs the user's git in the repo with extra environment; a refusal for memd's
// index.lock held for a moment is retried as a person would (testutil.Git.RunAsPerson).
func (w *world) gitRun(extraEnv []string, args ...string) (string, error) {
	out, retries, err := testutil.Git{Env: w.env}.RunAsPerson(w.repo, extraEnv, args...)
	if retries > 0 {
		w.t.Logf("git %s: refused %d times for a held index.lock, retried", strings.Join(args, " "), retries)
	}
	return out, err
}

// git runs git and fails the test on error.
func (w *world) git(args ...string) string {
	w.t.Helper()
	out, err := w.gitRun(nil, args...)
	if err != nil {
		w.t.Fatal(err)
	}
	return out
}

// head is HEAD's commit, "" before the first one.
func (w *world) head() string { return testutil.Git{Env: w.env}.Rev(w.repo, "HEAD") }

func (w *world) commitCount() int {
	w.t.Helper()
	n, err := strconv.Atoi(strings.TrimSpace(w.git("rev-list", "--count", "HEAD")))
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

// committed returns HEAD's content at rel, or ok=false when HEAD has no such path.
func (w *world) committed(rel string) (string, bool) {
	out, err := w.gitRun(nil, "cat-file", "-p", "HEAD:"+rel)
	if err != nil {
		return "", false
	}
	return out, true
}

// committedMany reads HEAD's content at many paths with one `git cat-file --batch`; a path
// HEAD lacks is absent from the map.
func (w *world) committedMany(paths []string) map[string]string {
	w.t.Helper()
	specs := make([]string, len(paths))
	for i, p := range paths {
		specs[i] = "HEAD:" + p
	}
	objs, err := testutil.Git{Env: w.env}.Objects(w.repo, specs)
	if err != nil {
		w.t.Fatal(err)
	}
	got := make(map[string]string, len(objs))
	for i, p := range paths {
		if c, ok := objs[specs[i]]; ok {
			got[p] = c
		}
	}
	return got
}

// commitsTouching lists the commits (newest first) whose diff names rel.
func (w *world) commitsTouching(rel string) []string {
	w.t.Helper()
	out := strings.TrimSpace(w.git("--literal-pathspecs", "log", "--format=%H", "--", rel))
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// namesInCommit lists the paths commit h changed against its first parent.
func (w *world) namesInCommit(h string) []string {
	w.t.Helper()
	out := w.git("-c", "core.quotepath=false", "show", "--format=", "--name-only", "--no-renames", h)
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			names = append(names, l)
		}
	}
	return names
}

// treeDiff is git's own answer to "does HEAD hold exactly what is on disk?" (see
// testutil.Git.TreeDiff); empty means yes.
func (w *world) treeDiff() (string, error) {
	return testutil.Git{Env: w.env}.TreeDiff(w.repo, w.home)
}

// waitCommitted waits until HEAD holds exactly the tree on disk and memd's .git/index has
// followed HEAD (memd brings the index in step just after a commit, off the commit's path:
// sync/gitrepo/index.go). A person's `git rebase` or `git checkout` in that moment is told
// the index "contains uncommitted changes"; the tests' own git comes after it.
func (w *world) waitCommitted(d *testutil.Daemon) {
	w.t.Helper()
	var last string
	testutil.WaitFor(w.t, "HEAD to equal the work tree and the index", commitTimeout, func() bool {
		out, err := w.treeDiff()
		if err != nil {
			last = err.Error()
			return false
		}
		last = out
		if out != "" {
			return false
		}
		// No optional locks: the probe must not take index.lock beside memd's refresh.
		staged, err := w.gitRun([]string{"GIT_OPTIONAL_LOCKS=0"}, "diff", "--cached", "--name-status")
		last = "index against HEAD:\n" + staged
		return err == nil && staged == ""
	}, func() string { return "differences:\n" + last + d.Describe() })
}

// waitHeadMoves waits until HEAD is no longer from.
func (w *world) waitHeadMoves(d *testutil.Daemon, from string) string {
	w.t.Helper()
	var h string
	testutil.WaitFor(w.t, "a new commit", commitTimeout, func() bool {
		h = w.head()
		return h != "" && h != from
	}, d.Describe)
	return h
}

// checkClean is the invariant after every scenario: HEAD equals the disk (by git, not by
// memd's index), memd's .git/index has caught up (`git status --porcelain` empty), and the
// object store is sound (`git fsck --full`).
func (w *world) checkClean(d *testutil.Daemon) {
	w.t.Helper()
	w.waitCommitted(d)
	var st string
	testutil.WaitFor(w.t, "git status --porcelain to be empty", commitTimeout, func() bool {
		out, err := w.gitRun(nil, "status", "--porcelain", "--untracked-files=all")
		st = out
		if err != nil {
			st = err.Error()
		}
		return err == nil && out == ""
	}, func() string { return "git status:\n" + st + d.Describe() })
	out, err := w.gitRun(nil, "fsck", "--full", "--no-dangling")
	if err != nil || strings.TrimSpace(out) != "" {
		w.t.Fatalf("git fsck --full: %v\n%s", err, out)
	}
}

// neverCommitted fails when any commit in history ever named rel.
func (w *world) neverCommitted(rel string) {
	w.t.Helper()
	if cs := w.commitsTouching(rel); len(cs) > 0 {
		w.t.Fatalf("%s was committed (%d commits), it must never be", rel, len(cs))
	}
}

// start runs `memd run` and waits until it says it is running (start-up reconcile done).
func (w *world) start(extra ...string) *testutil.Daemon {
	w.t.Helper()
	return testutil.Start(w.t, memdBin, w.procOptions(), w.runArgs(extra)...)
}

// spawn starts `memd run` without waiting for anything.
func (w *world) spawn(extra ...string) *testutil.Daemon {
	w.t.Helper()
	return testutil.Spawn(w.t, memdBin, w.procOptions(), w.runArgs(extra)...)
}

func (w *world) runArgs(extra []string) []string {
	return append([]string{"run", "--config", w.config, "--repo", w.repo}, extra...)
}

// waitLog waits until the daemon's log contains s.
func waitLog(t *testing.T, d *testutil.Daemon, s string) {
	t.Helper()
	testutil.WaitFor(t, "log line "+strconv.Quote(s), commitTimeout, func() bool {
		return strings.Contains(d.Logs(), s)
	}, d.Describe)
}

// inotifyWatches counts the inotify watches a process holds (from /proc/<pid>/fdinfo), so a
// test can see that the watcher has taken in a new directory without guessing with a sleep.
func inotifyWatches(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		n += bytes.Count(b, []byte("inotify wd:"))
	}
	return n
}

// writerLock creates the writer lock the way the Python memory writer does (O_EXCL, pid of a
// live process, hostname, acquired_at) and returns its release.
func (w *world) writerLock() (release func()) {
	w.t.Helper()
	p := w.path(".memory.lock")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		w.t.Fatalf("take writer lock: %v", err)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(f, "pid: %d\nhostname: %s\nacquired_at: %s\ncontext: e2e writer\n",
		os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	if err := f.Close(); err != nil {
		w.t.Fatal(err)
	}
	return func() {
		if err := os.Remove(p); err != nil {
			w.t.Fatalf("release writer lock: %v", err)
		}
	}
}
