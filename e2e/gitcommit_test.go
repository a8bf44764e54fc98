package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestGlobalExcludesNeverCommitted: git's default core.excludesFile
// ($XDG_CONFIG_HOME/git/ignore) with .DS_Store and *.orig. Files matching it, written
// before memd starts (the reconcile) and while it runs (the watcher), are never committed;
// a tracked *.orig stays tracked; the user's `git status` in the same HOME shows nothing.
func TestGlobalExcludesNeverCommitted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	excl := filepath.Join(w.home, ".config", "git", "ignore")
	must(t, os.MkdirAll(filepath.Dir(excl), 0o755))
	must(t, os.WriteFile(excl, []byte(".DS_Store\n*.orig\n"), 0o644))
	w.write("areas/kept.orig", "tracked before\n")
	w.git("add", "-f", "areas/kept.orig")
	w.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a tracked .orig")
	w.write(".DS_Store", "finder\n")
	w.write("areas/before.html.orig", "offline\n")
	d := w.start()
	w.write("areas/.DS_Store", "finder\n")
	w.write("projects/p/.DS_Store", "finder\n")
	w.write("projects/p/a.html", "a\n")
	w.write("projects/p/a.html.orig", "merge leftover\n")
	w.write("areas/kept.orig", "tracked after\n")
	w.checkClean(d)
	if got, _ := w.committed("projects/p/a.html"); got != "a\n" {
		t.Fatalf("HEAD:projects/p/a.html = %q", got)
	}
	if got, _ := w.committed("areas/kept.orig"); got != "tracked after\n" {
		t.Fatalf("a tracked path stays tracked: HEAD:areas/kept.orig = %q", got)
	}
	for _, p := range []string{".DS_Store", "areas/.DS_Store", "projects/p/.DS_Store", "areas/before.html.orig", "projects/p/a.html.orig"} {
		w.neverCommitted(p)
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}
}

// hookScripts are a team's hooks, as sh scripts logging to log: pre-commit refuses an index
// holding FORBIDDEN (and logs the tree its index holds), commit-msg adds a trailer with
// git's own interpret-trailers, post-commit and pre-push log, pre-push refuses while
// refuseFile exists.
func hookScripts(log, refuseFile string) map[string]string {
	return map[string]string{
		"pre-commit": `#!/bin/sh
echo "pre-commit index=$GIT_INDEX_FILE tree=$(git write-tree)" >> '` + log + `'
if git grep --cached -q FORBIDDEN -- ':!.githooks'; then
	echo "checking for forbidden words" >&2
	echo "forbidden word in $(git grep --cached -l FORBIDDEN -- ':!.githooks' | tr '\n' ' ')" >&2
	exit 1
fi
`,
		"commit-msg": `#!/bin/sh
git interpret-trailers --in-place --trailer "Hooked-By: commit-msg" "$1"
`,
		"post-commit": `#!/bin/sh
echo "post-commit $(git rev-parse HEAD)" >> '` + log + `'
`,
		"pre-push": `#!/bin/sh
echo "pre-push $1 $2" >> '` + log + `'
sed 's/^/stdin /' >> '` + log + `'
if [ -e '` + refuseFile + `' ]; then echo "pushes are frozen today" >&2; exit 1; fi
`,
	}
}

// hookDoc is status.json's held list, state and error.
type hookDoc struct {
	State string `json:"state"`
	Error string `json:"error"`
	Held  []struct {
		Path, Reason, Rule, Message string
	} `json:"held"`
}

func (w *world) hookStatus() hookDoc {
	var d hookDoc
	if b, err := os.ReadFile(filepath.Join(w.repo, ".git", "memd", "status.json")); err == nil {
		_ = json.Unmarshal(b, &d)
	}
	return d
}

func (w *world) waitHookDoc(d *testutil.Daemon, what string, cond func(hookDoc) bool) hookDoc {
	w.t.Helper()
	var last hookDoc
	testutil.WaitFor(w.t, what, commitTimeout, func() bool { last = w.hookStatus(); return cond(last) },
		func() string { return fmt.Sprintf("status: %+v%s", last, d.Describe()) })
	return last
}

// TestGitHooksAsGitRunsThem: the repo's hooks, in a committed .githooks directory named by
// core.hooksPath (relative, as teams set it), run around memd's commits and pushes as
// around plain git's. A pre-commit refusal holds only the refused path (reason hook, the
// hook's last stderr line) and the rest is committed; the path is retried when it changes.
// commit-msg's trailer is on every memd commit; pre-push gets git's arguments and stdin
// lines; a pre-push refusal is state error with its message until it passes again.
func TestGitHooksAsGitRunsThem(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, baseConfig+"sync: {pull_interval: 1s, timeout: 10s}\n")
	bare := filepath.Join(w.home, "remote.git")
	log := filepath.Join(w.home, "hooks.log")
	refuse := filepath.Join(w.home, "refuse-push")
	w.sh("git init -q --bare -b main " + bare + " && git remote add origin " + bare)
	for name, body := range hookScripts(log, refuse) {
		w.write(".githooks/"+name, body)
		must(t, os.Chmod(w.path(".githooks/"+name), 0o755))
	}
	w.git("config", "core.hooksPath", ".githooks")
	w.git("add", ".githooks")
	w.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the team's hooks")
	start := w.head()

	// The reference: plain git in the same HOME refuses the same content with the same words.
	ref := filepath.Join(w.home, "reference")
	w.sh("git clone -q " + w.repo + " " + ref + " && cd " + ref + " && git config core.hooksPath .githooks" +
		" && echo FORBIDDEN > bad.html && git add bad.html")
	if out, err := (testutil.Git{Env: w.env}).Run(ref, nil, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"); err == nil ||
		!strings.Contains(err.Error(), "forbidden word in bad.html") {
		t.Fatalf("plain git commit with the hook: %v %s", err, out)
	}
	must(t, os.Remove(log))

	d := w.start()
	w.write("areas/ok.html", "fine\n")
	w.write("areas/bad.html", "a FORBIDDEN word\n")
	w.write("projects/p/ok2.html", "fine too\n")
	held := w.waitHookDoc(d, "areas/bad.html held by the hook, the rest committed", func(s hookDoc) bool {
		_, ok1 := w.committed("areas/ok.html")
		_, ok2 := w.committed("projects/p/ok2.html")
		return ok1 && ok2 && len(s.Held) == 1
	})
	if h := held.Held[0]; h.Path != "areas/bad.html" || h.Reason != "hook" || h.Rule != "pre-commit" ||
		h.Message != "forbidden word in areas/bad.html" {
		t.Fatalf("held %+v, want areas/bad.html, hook, pre-commit, the hook's last stderr line", h)
	}
	w.neverCommitted("areas/bad.html")
	if m := d.Metrics(`memd_held_files{reason="hook"}`); m[`memd_held_files{reason="hook"}`] != 1 {
		t.Errorf("memd_held_files{reason=hook} = %v, want 1", m)
	}
	announced := false
	for _, e := range w.events() {
		announced = announced || e.Text == "held areas/bad.html: refused by git hook pre-commit: forbidden word in areas/bad.html; not committed"
	}
	if !announced {
		t.Errorf("no held event: %+v", w.events())
	}

	// Retried when it changes: clean now, committed.
	w.write("areas/bad.html", "a fine word\n")
	w.waitHookDoc(d, "areas/bad.html committed, nothing held", func(s hookDoc) bool {
		c, _ := w.committed("areas/bad.html")
		return c == "a fine word\n" && len(s.Held) == 0
	})
	waitPushed(t, w, d, bare)

	// A pre-push refusal: state error with the hook's words; local commits go on; pushed
	// again once the hook lets it.
	must(t, os.WriteFile(refuse, nil, 0o644))
	w.write("areas/later.html", "later\n")
	hd := w.waitHookDoc(d, "state error from pre-push", func(s hookDoc) bool { return s.State == "error" })
	if !strings.Contains(hd.Error, "pushes are frozen today") {
		t.Fatalf("error %q, want the pre-push hook's message", hd.Error)
	}
	must(t, os.Remove(refuse))
	w.write("areas/after.html", "after\n")
	w.checkClean(d)
	waitPushed(t, w, d, bare)
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}
	if got, want := w.git("rev-parse", "HEAD"), (testutil.Git{Env: w.env}).Rev(bare, "main")+"\n"; got != want {
		t.Fatalf("remote main %s, local %s", want, got)
	}
	checkHookLog(t, w, start, log)
}

// waitPushed waits until the remote's main is the local HEAD and the state is no error.
func waitPushed(t *testing.T, w *world, d *testutil.Daemon, bare string) {
	t.Helper()
	g := testutil.Git{Env: w.env}
	testutil.WaitFor(t, "pushed, state not error", commitTimeout, func() bool {
		h := w.head()
		return h != "" && g.Rev(bare, "main") == h && w.hookStatus().State != "error"
	}, d.Describe)
}

// checkHookLog: every memd commit since start carries commit-msg's trailer, had its tree
// in a pre-commit's index and a post-commit; pre-push got git's arguments and stdin.
func checkHookLog(t *testing.T, w *world, start, log string) {
	t.Helper()
	b, err := os.ReadFile(log)
	must(t, err)
	text := string(b)
	commits := strings.Fields(w.git("rev-list", start+"..HEAD"))
	if len(commits) < 3 {
		t.Fatalf("%d memd commits", len(commits))
	}
	for _, c := range commits {
		if tr := strings.TrimSpace(w.git("log", "-1", "--format=%(trailers:key=Hooked-By,valueonly)", c)); tr != "commit-msg" {
			t.Errorf("commit %s: trailer %q, want commit-msg's", c, tr)
		}
		tree := strings.TrimSpace(w.git("rev-parse", c+"^{tree}"))
		if !strings.Contains(text, "tree="+tree+"\n") {
			t.Errorf("commit %s: its tree %s was in no pre-commit's index", c, tree)
		}
		if !strings.Contains(text, "post-commit "+c+"\n") {
			t.Errorf("commit %s: no post-commit", c)
		}
	}
	if strings.Contains(text, "index="+filepath.Join(w.repo, ".git", "index")+" ") {
		t.Errorf("pre-commit ran on the repo's own index, not the commit's")
	}
	if !strings.Contains(text, "pre-push origin "+filepath.Join(w.home, "remote.git")+"\n") {
		t.Errorf("pre-push without git's arguments:\n%s", text)
	}
	if !strings.Contains(text, "stdin refs/heads/main "+commits[0]+" refs/heads/main ") {
		t.Errorf("pre-push stdin without the pushed head %s:\n%s", commits[0], text)
	}
}

// TestGitHooksNoVerify: commit.hooks false is git's --no-verify: a pre-commit that refuses
// everything and commit-msg do not run; post-commit does.
func TestGitHooksNoVerify(t *testing.T) {
	t.Parallel()
	w := newWorldConfig(t, baseConfig+"commit: {hooks: false}\n")
	log := filepath.Join(w.home, "hooks.log")
	scripts := hookScripts(log, filepath.Join(w.home, "refuse-push"))
	scripts["pre-commit"] = "#!/bin/sh\necho pre-commit >> '" + log + "'\nexit 1\n"
	must(t, os.MkdirAll(filepath.Join(w.repo, ".git", "hooks"), 0o755))
	for name, body := range scripts {
		p := filepath.Join(w.repo, ".git", "hooks", name)
		must(t, os.WriteFile(p, []byte(body), 0o755))
	}
	d := w.start()
	w.write("areas/a.html", "a FORBIDDEN word\n")
	w.checkClean(d)
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}
	b, _ := os.ReadFile(log)
	if strings.Contains(string(b), "pre-commit") || !strings.Contains(string(b), "post-commit "+w.head()) {
		t.Fatalf("hooks log with commit.hooks false:\n%s", b)
	}
	if tr := strings.TrimSpace(w.git("log", "-1", "--format=%(trailers:key=Hooked-By,valueonly)")); tr != "" {
		t.Fatalf("commit-msg ran under --no-verify: trailer %q", tr)
	}
}

// TestGitLFSPrePushThroughMemd: git-lfs's own hooks (`git lfs install --local`) in the repo;
// a pointer committed by plain git; memd's push runs git-lfs's pre-push with git's
// arguments and stdin, which uploads the object to the remote as `git push` would.
func TestGitLFSPrePushThroughMemd(t *testing.T) {
	if _, err := exec.LookPath("git-lfs"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git-lfs not installed: .ci/run installs it")
		}
		t.Skip("git-lfs not installed (apt-get install git-lfs)")
	}
	t.Parallel()
	w := newWorldConfig(t, baseConfig+"sync: {pull_interval: 1s, timeout: 10s}\n")
	bare := filepath.Join(w.home, "remote.git")
	w.sh("git init -q --bare -b main " + bare + " && git remote add origin " + bare +
		" && git lfs install --local >/dev/null && git lfs track '*.bin' >/dev/null" +
		" && head -c 4096 /dev/urandom > big.bin && git add .gitattributes big.bin" +
		" && git -c user.name=t -c user.email=t@t commit -qm 'an LFS file'")
	ptr, _ := w.committed("big.bin")
	oid := ""
	for _, l := range strings.Split(ptr, "\n") {
		if v, ok := strings.CutPrefix(l, "oid sha256:"); ok {
			oid = v
		}
	}
	if oid == "" {
		t.Fatalf("plain git did not commit an LFS pointer: %q", ptr)
	}
	d := w.start()
	w.write("areas/a.html", "a\n")
	w.checkClean(d)
	waitPushed(t, w, d, bare)
	obj := filepath.Join(bare, "lfs", "objects", oid[:2], oid[2:4], oid)
	if _, err := os.Stat(obj); err != nil {
		t.Fatalf("git-lfs's pre-push did not upload the object: %v%s", err, d.Describe())
	}
	if code := d.Stop(); code != 0 {
		t.Fatalf("SIGTERM: exit %d%s", code, d.Describe())
	}
}
