package reliability

// The remote is untrusted (issue 12, docs/ARCHITECTURE.md §4 "What a fetched tree may write"): hostile
// commits built from raw objects (testutil.Objects: any entry name), served from a real
// bare remote, fetched by the real binary (`memd sync`, `memd run`). Each case asserts that
// nothing outside the work tree and nothing in .git's executable surface changed (a
// snapshot of names, modes, sizes and hashes), that the local branch keeps its local
// commits and the remote is not pushed over, that the error names the commit and the path,
// that `git pull` refuses the same commit, and that a later good commit recovers by itself.

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// utWorld is a memd repo cloned from a bare remote, a git clone of the same remote (the
// `git pull` comparison) and a folder outside both that symlinks point at.
type utWorld struct {
	*world
	obj     testutil.Objects
	gclone  string // a plain git clone of the remote
	outside string // a victim folder outside the repo
	when    time.Time
}

func newUTWorld(t *testing.T) *utWorld { return newUTWorldConfig(t, "") }

func newUTWorldConfig(t *testing.T, config string) *utWorld {
	w := newWorld(t, worldOpts{remote: true, config: config})
	u := &utWorld{world: w, obj: testutil.Objects{T: t, Dir: w.bare}, outside: filepath.Join(w.home, "outside"),
		when: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	must(t, os.MkdirAll(u.outside, 0o755))
	must(t, os.WriteFile(filepath.Join(u.outside, "victim.html"), []byte("victim\n"), 0o644))
	// A first memory, synced: the remote has a history memd and git share.
	w.write("areas/base.html", "base\n")
	u.sync(0)
	u.gclone = filepath.Join(w.home, "gitclone")
	w.gitIn(w.home, "clone", "-q", w.bare, u.gclone)
	return u
}

// sync runs `memd sync` and checks its exit code (-1: any non-zero).
func (u *utWorld) sync(want int) string {
	u.t.Helper()
	out, code := u.memd("sync", "--config", u.config, "--repo", u.repo)
	if (want == -1 && code == 0) || (want != -1 && code != want) {
		u.t.Fatalf("memd sync: exit %d, want %d\n%s", code, want, out)
	}
	return out
}

// push makes a commit of root on the remote's main (parent: the current main) and returns it.
func (u *utWorld) push(msg string, root ...testutil.Entry) string {
	u.t.Helper()
	u.when = u.when.Add(time.Minute)
	c := u.obj.Commit(u.obj.Tree(root...), []string{u.remoteHead()}, msg, u.when)
	u.obj.SetRef("refs/heads/main", c)
	return c
}

// remoteRoot is the remote main's root tree as entries, those named like one of extra
// replaced by it.
func (u *utWorld) remoteRoot(extra ...testutil.Entry) []testutil.Entry {
	return replaceEntries(u.obj.TreeOf(testutil.Git{Env: u.env}, "refs/heads/main"), extra...)
}

func replaceEntries(root []testutil.Entry, extra ...testutil.Entry) []testutil.Entry {
	var out []testutil.Entry
	for _, e := range root {
		if !slices.ContainsFunc(extra, func(x testutil.Entry) bool { return x.Name == e.Name }) {
			out = append(out, e)
		}
	}
	return append(out, extra...)
}

// outsideSnapshot covers everything in the home but the work tree (the remote, the git
// clone, the victim folder, HOME's files), plus the parts of .git that can run code or
// redirect git (config, hooks, info, HEAD, commondir, ...): all but objects, refs, logs,
// the index and memd's own state, which a fetch and a commit legitimately change.
func (u *utWorld) outsideSnapshot() map[string]string {
	all := snapshotDir(u.t, u.home)
	out := map[string]string{}
	gitDir := filepath.Join(u.repo, ".git")
	for p, v := range all {
		rel, _ := filepath.Rel(u.repo, p)
		switch {
		case p == u.repo:
			continue
		case !strings.HasPrefix(rel, ".."):
			// inside the repo: only .git's executable surface counts
			grel, err := filepath.Rel(gitDir, p)
			if err != nil || strings.HasPrefix(grel, "..") {
				continue
			}
			first, _, _ := strings.Cut(grel, string(filepath.Separator))
			switch first {
			case "objects", "refs", "logs", "memd", "index", "FETCH_HEAD", "ORIG_HEAD", "packed-refs", "index.lock", ".":
				continue
			}
			if strings.HasSuffix(grel, ".lock") {
				continue
			}
		case p == u.gclone || strings.HasPrefix(p, u.gclone+string(filepath.Separator)):
			continue // the comparison clone is git's to change
		case strings.HasPrefix(p, filepath.Join(u.bare, "objects")) || strings.HasPrefix(p, filepath.Join(u.bare, "refs")) || strings.HasPrefix(p, filepath.Join(u.bare, "logs")):
			continue // the test itself writes hostile objects and moves main
		case strings.HasPrefix(p, filepath.Join(u.home, ".config")):
			continue // memd's own state (status files)
		}
		// mtimes of directories change when memd adds its state files beside; keep
		// names, modes, sizes and hashes.
		out[p] = dropMtime(v)
	}
	return out
}

func dropMtime(v string) string {
	f := strings.SplitN(v, " ", 4)
	if len(f) < 3 {
		return v
	}
	return strings.Join(append(f[:2], f[3:]...), " ")
}

func utDiff(a, b map[string]string) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if bv, ok := b[k]; !ok {
			d = append(d, "- "+k)
		} else if bv != a[k] {
			d = append(d, "~ "+k+": "+a[k]+" -> "+bv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, ok := a[k]; !ok {
			d = append(d, "+ "+k+" "+b[k])
		}
	}
	return strings.Join(d, "\n")
}

// gitPull runs `git pull` in the comparison clone; it reports whether git refused.
func (u *utWorld) gitPull() (refused bool, out string) {
	o, err := u.gitRun(u.gclone, nil, "pull", "-q", "--ff-only", "origin", "main")
	if err != nil {
		return true, err.Error()
	}
	return false, o
}

// refusal is the common part of a refused hostile commit: memd sync fails naming the commit
// and path, nothing outside changed, the local commit stays and is not pushed over the
// remote, git refuses too; then a good commit (the offender removed) recovers.
func (u *utWorld) refusal(bad, wantPath string, gitMustRefuse bool) {
	t := u.t
	t.Helper()
	u.write("areas/local.html", "local work "+bad[:7]+"\n")
	before := u.outsideSnapshot()
	out := u.sync(-1)
	if !strings.Contains(out, bad[:12]) || !strings.Contains(out, wantPath) {
		t.Fatalf("memd sync output does not name commit %s and path %q:\n%s", bad[:12], wantPath, out)
	}
	if d := utDiff(before, u.outsideSnapshot()); d != "" {
		t.Fatalf("memd sync changed things outside the work tree or in .git:\n%s", d)
	}
	if u.remoteHead() != bad {
		t.Fatalf("remote main moved from the hostile commit to %s: pushed over it", u.remoteHead())
	}
	if got := u.git("show", "HEAD:areas/local.html"); !strings.Contains(got, "local work") {
		t.Fatalf("local commit missing: %q", got)
	}
	if u.isAncestor(u.repo, bad, "HEAD") {
		t.Fatal("the hostile commit was merged")
	}
	refused, gout := u.gitPull()
	if gitMustRefuse && !refused {
		t.Fatalf("git pull accepted what memd refused:\n%s", gout)
	}
	t.Logf("git pull: refused=%v %s", refused, firstLines(gout, 3))

	// Recovery: the offender reverted upstream, plus a new memory.
	root := u.obj.TreeOf(testutil.Git{Env: u.env}, bad+"^")
	good := u.push("revert", replaceEntries(root, testutil.TreeDir("recovered", testutil.TreeFile("after.html", "after "+bad[:7]+"\n")))...)
	u.sync(0)
	if got := u.git("show", "HEAD:recovered/after.html"); !strings.Contains(got, "after") {
		t.Fatalf("good commit not merged: %q", got)
	}
	if !u.isAncestor(u.repo, good, "HEAD") || u.remoteHead() != u.head() {
		t.Fatalf("not recovered: HEAD %s remote %s good %s", u.head(), u.remoteHead(), good)
	}
	if b, err := os.ReadFile(u.path("areas/local.html")); err != nil || !strings.Contains(string(b), "local work") {
		t.Fatalf("local file lost: %q %v", b, err)
	}
	if d := utDiff(before, u.outsideSnapshot()); d != "" && gitMustRefuse {
		t.Fatalf("recovery changed things outside the work tree:\n%s", d)
	}
	// git reaches the good commit as well.
	u.gitIn(u.gclone, "fetch", "-q", "origin")
	u.gitIn(u.gclone, "reset", "-q", "--hard", "origin/main")
}

func firstLines(s string, n int) string {
	l := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return strings.Join(l, " | ")
}

func TestUntrustedTreeRefused(t *testing.T) {
	t.Parallel()
	hook := "#!/bin/sh\ntouch \"$HOME/pwned-hook\"\n"
	cases := []struct {
		name, path string
		entries    func(u *utWorld) []testutil.Entry
		gitRefuses bool // git 2.39 on Linux; see docs/RELIABILITY.md for the others
	}{
		{"dotdot nested", "x/..", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir("x", testutil.TreeDir("..", testutil.TreeDir("..", testutil.TreeFile("escaped.html", "pwned\n"))))}
		}, true},
		{".git hooks", ".git", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir(".git", testutil.TreeDir("hooks", testutil.Entry{Name: "post-commit", Mode: "100755", Data: hook}))}
		}, true},
		{".GIT", ".GIT", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir(".GIT", testutil.TreeDir("hooks", testutil.Entry{Name: "post-commit", Mode: "100755", Data: hook}))}
		}, true},
		{".git. (NTFS)", ".git.", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir(".git.", testutil.TreeFile("config", "[core]\n"))}
		}, true},
		{"git~1 (NTFS short name)", "git~1", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir("areas", testutil.TreeDir("git~1", testutil.TreeFile("config", "[core]\n")))}
		}, true},
		{".g\u200cit (HFS+)", `.g\u200cit` /* as the error quotes it */, func(u *utWorld) []testutil.Entry {
			// .git on macOS (HFS+ drops U+200C); git on Linux checks it out (protectHFS is
			// off there), memd refuses it everywhere: the repo is shared with Macs.
			return []testutil.Entry{testutil.TreeDir(".g\u200cit", testutil.TreeDir("hooks", testutil.Entry{Name: "post-commit", Mode: "100755", Data: hook}))}
		}, false},
		{"slash in a name", "a/../../escape.html", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeFile("a/../../escape.html", "pwned\n")}
		}, true},
		{"duplicate names", "dup.html", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir("resources", testutil.TreeFile("dup.html", "one\n"), testutil.TreeFile("dup.html", "two\n"))}
		}, false},
		{"commondir + core.fsmonitor", ".git", func(u *utWorld) []testutil.Entry {
			cfg := "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = touch \"$HOME/pwned-fsmonitor\"; false\n"
			return []testutil.Entry{
				testutil.TreeDir(".git", testutil.TreeFile("commondir", "../areas/cd\n")),
				testutil.TreeDir("areas", testutil.TreeFile("base.html", "base\n"), testutil.TreeDir("cd", testutil.TreeFile("config", cfg))),
			}
		}, true},
		{"symlink and an entry beyond it", "link", func(u *utWorld) []testutil.Entry {
			return []testutil.Entry{testutil.TreeDir("projects", testutil.TreeLink("link", u.outside), testutil.TreeDir("link", testutil.TreeFile("pwned.html", "pwned\n")))}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := newUTWorld(t)
			bad := u.push("hostile "+c.name, u.remoteRoot(c.entries(u)...)...)
			u.refusal(bad, c.path, c.gitRefuses)
			for _, p := range []string{"pwned-hook", "pwned-fsmonitor", "escaped.html", "escape.html"} {
				if _, err := os.Lstat(filepath.Join(u.home, p)); err == nil {
					t.Fatalf("%s exists: the attack ran", p)
				}
			}
		})
	}
}

// A symlink first (a valid commit: checked out as a link), then, in the next commit, an
// entry beyond it (the link kept: refused), then the link replaced by a real directory
// (valid: the link goes, the directory is made, nothing is written through the link).
func TestUntrustedTreeLinkThenEntry(t *testing.T) {
	t.Parallel()
	u := newUTWorld(t)
	before := u.outsideSnapshot()
	u.push("link", u.remoteRoot(testutil.TreeDir("projects", testutil.TreeLink("link", u.outside)))...)
	u.sync(0)
	if tgt, err := os.Readlink(u.path("projects/link")); err != nil || tgt != u.outside {
		t.Fatalf("link not checked out as a link: %q %v", tgt, err)
	}
	bad := u.push("beyond", u.remoteRoot(testutil.TreeDir("projects", testutil.TreeLink("link", u.outside),
		testutil.TreeDir("link", testutil.TreeFile("pwned.html", "pwned\n"))))...)
	u.refusal(bad, "projects/link", false)
	// The link replaced by a directory: valid, and git does the same.
	u.push("dir", u.remoteRoot(testutil.TreeDir("projects", testutil.TreeDir("link", testutil.TreeFile("inside.html", "inside\n"))))...)
	u.sync(0)
	if fi, err := os.Lstat(u.path("projects/link")); err != nil || !fi.IsDir() {
		t.Fatalf("projects/link: %v %v, want a real directory", fi, err)
	}
	if d := utDiff(before, u.outsideSnapshot()); d != "" {
		t.Fatalf("changed outside the work tree:\n%s", d)
	}
	if _, err := os.Stat(filepath.Join(u.outside, "inside.html")); err == nil {
		t.Fatal("written through the link")
	}
}

// A remote commit that adds the ignored .memory.lock (an accidental `git add -A` while a
// writer held it) is taken like git takes it and never wedges a later commit or sync.
func TestUntrustedTreeIgnoredLockFile(t *testing.T) {
	t.Parallel()
	u := newUTWorld(t)
	u.push("lock added by accident", u.remoteRoot(testutil.TreeFile(".memory.lock", "pid: 1\nhostname: elsewhere\nacquired_at: 2026-11-30T12:00:00.000000Z\n"),
		testutil.TreeFile(".gitignored-by-remote.tmp", "tmp\n"))...)
	if refused, out := u.gitPull(); refused {
		t.Fatalf("git pull refused a valid commit: %s", out)
	}
	for i := range 3 {
		u.write(fmt.Sprintf("areas/after-%d.html", i), "after\n")
		u.sync(0)
		if u.head() != u.remoteHead() {
			t.Fatalf("round %d: HEAD %s remote %s", i, u.head(), u.remoteHead())
		}
	}
	if got := u.git("show", "HEAD:areas/after-2.html"); got != "after\n" {
		t.Fatalf("local commit missing: %q", got)
	}
	// memd run: not wedged either (state ok, a new memory reaches the remote).
	d := u.start()
	u.write("areas/run.html", "run\n")
	testutil.WaitFor(t, "the memory written under memd run on the remote", settleTimeout, func() bool {
		return u.rev(u.bare, "refs/heads/main:areas/run.html") != ""
	}, func() string { return d.Describe() })
	if st := u.status(); st.State == "error" || st.State == "offline" {
		t.Fatalf("state %s: %s", st.State, st.Error)
	}
	d.Stop()
}

// memd run shows the refusal in its status (state error, commit and path) and recovers by
// itself once the remote moves on.
func TestUntrustedTreeRunState(t *testing.T) {
	t.Parallel()
	u := newUTWorld(t)
	d := u.start()
	bad := u.push("hostile", u.remoteRoot(testutil.TreeDir(".git", testutil.TreeDir("hooks", testutil.Entry{Name: "post-commit", Mode: "100755", Data: "#!/bin/sh\ntouch \"$HOME/pwned\"\n"})))...)
	testutil.WaitFor(t, "state error naming the commit and .git", settleTimeout, func() bool {
		st := u.status()
		return st.State == "error" && strings.Contains(st.Error, bad[:12]) && strings.Contains(st.Error, ".git")
	}, func() string { return fmt.Sprintf("%+v\n%s", u.status(), d.Describe()) })
	u.write("areas/during.html", "during\n")
	testutil.WaitFor(t, "the local commit", settleTimeout, func() bool {
		return u.rev(u.repo, "HEAD:areas/during.html") != ""
	}, d.Describe)
	root := u.obj.TreeOf(testutil.Git{Env: u.env}, bad+"^")
	u.push("revert", root...)
	testutil.WaitFor(t, "recovery: the local commit on the remote", 3*settleTimeout, func() bool {
		return u.rev(u.bare, "refs/heads/main:areas/during.html") != "" && u.status().State != "error"
	}, func() string { return fmt.Sprintf("%+v\n%s", u.status(), d.Describe()) })
	d.Stop()
	if _, err := os.Lstat(filepath.Join(u.home, "pwned")); err == nil {
		t.Fatal("the hook ran")
	}
}

// A 10,000-deep tree is refused with bounded memory (the path limit stops the walk long
// before the depth), and git fails on it too.
func TestUntrustedTreeDeep(t *testing.T) {
	t.Parallel()
	// go-git takes a while to receive 10,000 trees: a network timeout above the suite's 3s.
	u := newUTWorldConfig(t, strings.Replace(fastConfig, "timeout: 3s", "timeout: 2m", 1))
	t0 := time.Now()
	deep := u.obj.Deep(10000, "d", testutil.TreeFile("leaf.html", "deep\n"))
	bad := u.push("deep", u.remoteRoot(testutil.TreeRaw("deep", "40000", deep))...)
	// memd sync with its peak memory measured (the figure in docs/RELIABILITY.md).
	u.write("areas/local.html", "local work "+bad[:7]+"\n")
	before := u.outsideSnapshot()
	// Peak RSS is the least of up to three runs: on a loaded machine the GC lags the fetch's
	// allocations (one CI run peaked at 231 MiB, quiet runs at 110). A refused sync changes
	// nothing, so each run meets the same tree; an unbounded walk would fail every one.
	var rss int64 = -1
	for run := 0; run < 3 && (rss < 0 || rss > 200*1024); run++ {
		cmd := exec.Command(memdBin, "sync", "--config", u.config, "--repo", u.repo)
		cmd.Env, cmd.Dir = u.env, u.home
		t1 := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("build %s, memd sync %s", t1.Sub(t0), time.Since(t1))
		if err == nil || !strings.Contains(string(out), "deep/d/d") || !strings.Contains(string(out), bad[:12]) {
			t.Fatalf("memd sync on a 10,000-deep tree: %v\n%s", err, out)
		}
		r := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
		t.Logf("memd sync peak RSS on a 10,000-deep tree: %d MiB", r/1024)
		if rss < 0 || r < rss {
			rss = r
		}
	}
	if rss > 200*1024 {
		t.Fatalf("memd sync used %d MiB on a deep tree (the least of three runs): not bounded", rss/1024)
	}
	if d := utDiff(before, u.outsideSnapshot()); d != "" {
		t.Fatalf("changed outside:\n%s", d)
	}
	refused, gout := u.gitPull()
	t.Logf("git pull on the deep tree: refused=%v %s", refused, firstLines(gout, 2))
	root := u.obj.TreeOf(testutil.Git{Env: u.env}, bad+"^")
	u.push("revert", root...)
	u.sync(0)
	if u.head() != u.remoteHead() || u.rev(u.repo, "HEAD:areas/local.html") == "" {
		t.Fatal("not recovered after the deep tree was reverted")
	}
}

// An 80-CJK-character memory name (245 bytes with ".html"): the checkout's temp name fits
// beside it, the file arrives byte-exact, and the remote still has it after two more rounds.
func TestUntrustedTreeLongName(t *testing.T) {
	t.Parallel()
	u := newUTWorld(t)
	name := strings.Repeat("記", 80) + ".html"
	if len(name) != 245 {
		t.Fatalf("name is %d bytes", len(name))
	}
	content := "<!-- long name -->\n" + strings.Repeat("憶", 1000) + "\n"
	areas := u.obj.TreeOf(testutil.Git{Env: u.env}, "refs/heads/main:areas")
	c := u.push("long name", u.remoteRoot(testutil.TreeDir("areas", append(areas, testutil.TreeFile(name, content))...))...)
	u.sync(0)
	if b, err := os.ReadFile(u.path("areas/" + name)); err != nil || string(b) != content {
		t.Fatalf("long name not byte-exact: %v", err)
	}
	if !u.isAncestor(u.repo, c, "HEAD") {
		t.Fatal("long-name commit not in HEAD")
	}
	for i := range 2 {
		u.write(fmt.Sprintf("resources/round-%d.html", i), "round\n")
		u.sync(0)
		if u.rev(u.bare, "refs/heads/main:areas/"+name) == "" {
			t.Fatalf("round %d: the remote lost the long-name memory", i)
		}
	}
	if refused, out := u.gitPull(); refused {
		t.Fatalf("git pull refused the long name: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(u.gclone, "areas", name)); err != nil || string(b) != content {
		t.Fatalf("git's checkout of the long name differs: %v", err)
	}
}
