package reliability

// Issue 12, items 3, 4, 7 and 8: the remote is untrusted. Each attack is a normal,
// fsck-clean commit made with the plain git binary (symlinks under memd's own names, folders
// replaced by links to elsewhere, an ignored episode) pushed to a real bare remote, and the
// real memd binary (sync, run, sleep, status) run over it. Everything outside the work tree
// and the parts of .git a tree must never reach are snapshotted (names, modes, sizes,
// hashes) before and compared after.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ulWorld is a world with a remote, an attacker's plain-git clone of it and a folder
// outside the repo full of things worth overwriting.
type ulWorld struct {
	*world
	attacker string // the attacker's clone
	outside  string // victims: a file, a folder, a folder for arcs
	victim   string
	// plantedState: the test planted links in .git/memd itself; those memd does not use may
	// stay, so only what is outside the work tree (where they point) is compared.
	plantedState bool
}

func newULWorld(t *testing.T, demo bool) *ulWorld {
	t.Helper()
	w := newWorld(t, worldOpts{remote: true, demo: demo, config: `watch: {quiet: 150ms, max_delay: 1s}
http: {listen: "127.0.0.1:0"}
sync: {pull_interval: 1s, timeout: 5s}
sleep: {catch_up: false}
`})
	u := &ulWorld{world: w, attacker: filepath.Join(w.home, "attacker"), outside: filepath.Join(w.home, "outside")}
	u.victim = filepath.Join(u.outside, "victim.txt")
	must(t, os.MkdirAll(filepath.Join(u.outside, "dir"), 0o755))
	must(t, os.MkdirAll(filepath.Join(u.outside, "arcs"), 0o755))
	must(t, os.MkdirAll(filepath.Join(u.outside, "statedir"), 0o755))
	must(t, os.WriteFile(u.victim, []byte("precious, not memd's\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(u.outside, "dir", "keep.html"), []byte(episode("Outside", "2020-01-01")), 0o644))
	w.gitIn(w.home, "clone", "-q", w.bare, u.attacker)
	w.gitIn(u.attacker, "config", "user.name", "Mallory")
	w.gitIn(u.attacker, "config", "user.email", "mallory@example.invalid")
	return u
}

// push commits everything in the attacker's clone and pushes it.
func (u *ulWorld) push(msg string) {
	u.t.Helper()
	u.gitIn(u.attacker, "add", "-A")
	u.gitIn(u.attacker, "commit", "-q", "-m", msg)
	u.gitIn(u.attacker, "push", "-q", "origin", "HEAD:main")
	if f := u.fsck(u.bare); f != "" {
		u.t.Fatalf("the hostile commit is not fsck-clean: %s", f)
	}
}

// sync runs `memd sync` once.
func (u *ulWorld) sync() (string, int) {
	u.t.Helper()
	return u.memd("sync", "--config", u.config, "--repo", u.repo)
}

// ulSnapshot is every entry under the world's home except the work tree, the remote, the
// attacker's clone (which memd may change) and memd's registry, plus the parts of .git no tree may reach:
// hooks, config, info, and whether anything in .git/memd is a symlink.
func (u *ulWorld) snapshot() map[string]string {
	u.t.Helper()
	out := map[string]string{}
	skip := map[string]bool{u.repo: true, u.bare: true, u.attacker: true, filepath.Join(u.home, ".cache"): true,
		// $XDG_STATE_HOME (~/.local/state): memd's machine registry (internal/registry),
		// which every memd run writes by design.
		filepath.Join(u.home, ".local"): true}
	add := func(p string, fi fs.FileInfo) {
		v := fmt.Sprintf("%v %d", fi.Mode(), fi.Size())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			v += " -> " + tgt
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			must(u.t, err)
			v += fmt.Sprintf(" %x", sha256.Sum256(b))
		}
		out[p] = v
	}
	walk := func(root string) {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if skip[p] {
				return filepath.SkipDir
			}
			fi, err := os.Lstat(p)
			if err != nil {
				return err
			}
			add(p, fi)
			return nil
		})
		must(u.t, err)
	}
	walk(u.home)
	for _, rel := range []string{"hooks", "config", "info"} {
		walk(filepath.Join(u.repo, ".git", rel))
	}
	ents, _ := os.ReadDir(filepath.Join(u.repo, ".git", "memd"))
	if u.plantedState {
		ents = nil
	}
	for _, e := range ents {
		if e.Type()&fs.ModeSymlink != 0 {
			out[".git/memd/"+e.Name()] = "a symlink"
		}
	}
	return out
}

// ulDiff lists what changed between two snapshots.
func ulDiff(before, after map[string]string) []string {
	var d []string
	for p, v := range before {
		if a, ok := after[p]; !ok {
			d = append(d, "removed "+p)
		} else if a != v {
			d = append(d, fmt.Sprintf("changed %s: %s -> %s", p, v, a))
		}
	}
	for p, v := range after {
		if _, ok := before[p]; !ok {
			d = append(d, "added "+p+" ("+v+")")
		}
	}
	sort.Strings(d)
	return d
}

func (u *ulWorld) expectUnchanged(before map[string]string, what string, problems *[]string) {
	if d := ulDiff(before, u.snapshot()); len(d) > 0 {
		*problems = append(*problems, fmt.Sprintf("%s changed things outside the work tree or in .git:\n  %s", what, strings.Join(d, "\n  ")))
	}
}

func ulReport(t *testing.T, scenario string, start time.Time, checks int, problems []string, note string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
	record(t, row{Scenario: scenario, Iterations: 1, Writes: checks, Found: max(0, checks-len(problems)), Corruptions: len(problems),
		Time: time.Since(start), Note: note})
}

// Item 3: symlinks under the names of memd's own files. The old lock temp name was
// predictable (".memory.lock.<pid>.tmp", ignored as *.tmp so nobody sees it): links for a
// range of pids around the next one, and the lock itself, all pointing at a victim.
func TestUntrustedLinksLockFiles(t *testing.T) {
	t.Parallel()
	start := time.Now()
	u := newULWorld(t, false)
	var problems []string
	if out, code := u.sync(); code != 0 {
		t.Fatalf("first sync: exit %d\n%s", code, out)
	}
	next := exec.Command("true")
	must(t, next.Run())
	p := next.Process.Pid
	for n := p; n < p+400; n++ {
		must(t, os.Symlink(u.victim, filepath.Join(u.attacker, fmt.Sprintf(".memory.lock.%d.tmp", n))))
	}
	must(t, os.Symlink(u.victim, filepath.Join(u.attacker, "notes.lock.tmp")))
	u.push("add some links")
	before := u.snapshot()

	if out, code := u.sync(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sync over the links: exit %d\n%s", code, out))
	}
	u.write("areas/inbox/20261130-after-links.html", episode("After links", "2026-11-30"))
	if out, code := u.sync(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sync committing a local memory: exit %d\n%s", code, out))
	}
	if out, code := u.memd("sleep", "--phase", "tidy", "--now", sleepNow, "--config", u.config, "--repo", u.repo); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sleep: exit %d\n%s", code, out))
	}
	d := u.start()
	if ok, why := u.settled(settleTimeout); !ok {
		problems = append(problems, "memd run never settled: "+why)
	}
	if code := d.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd run: exit %d\n%s", code, d.Logs()))
	}
	u.expectUnchanged(before, "memd sync/sleep/run over lock-named symlinks", &problems)
	if b, _ := os.ReadFile(u.victim); string(b) != "precious, not memd's\n" {
		problems = append(problems, fmt.Sprintf("victim overwritten: %q", b))
	}
	if objs := u.blobs(u.bare, []string{"main:areas/inbox/20261130-after-links.html"}); len(objs) != 1 {
		problems = append(problems, "the local memory never reached the remote")
	}
	ulReport(t, "untrusted: lock-named symlinks", start, 4, problems, "400 .memory.lock.<pid>.tmp -> victim; sync, sync, sleep, run")
}

// Item 3: memd's state directory. A tree cannot reach .git (the checkout refuses it), so
// these links are planted locally, as a second line of defence: memd.pid, the status files,
// sleep's state and journal, the merge marker's temp name; then .git/memd itself.
func TestUntrustedLinksStateDir(t *testing.T) {
	t.Parallel()
	start := time.Now()
	u := newULWorld(t, false)
	var problems []string
	state := filepath.Join(u.repo, ".git", "memd")
	must(t, os.MkdirAll(state, 0o700))
	for _, name := range []string{"memd.pid", "status.json", "status.plain", "status.claude", "sleep.json", "merge-in-progress", "merge-in-progress.tmp"} {
		_ = os.Remove(filepath.Join(state, name))
		must(t, os.Symlink(u.victim, filepath.Join(state, name)))
	}
	must(t, os.Symlink(filepath.Join(u.outside, "dir"), filepath.Join(state, "sleep-journal")))
	u.plantedState = true
	before := u.snapshot()

	d := u.start()
	if fi, err := os.Lstat(filepath.Join(state, "memd.pid")); err != nil || !fi.Mode().IsRegular() {
		problems = append(problems, fmt.Sprintf("memd.pid while running: %v %v (want a regular file)", fi, err))
	}
	u.write("areas/inbox/20261130-state.html", episode("State", "2026-11-30"))
	if ok, why := u.settled(settleTimeout); !ok {
		problems = append(problems, "memd run never settled: "+why)
	}
	if code := d.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd run: exit %d\n%s", code, d.Logs()))
	}
	if out, code := u.memd("sleep", "--now", sleepNow, "--config", u.config, "--repo", u.repo); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sleep: exit %d\n%s", code, out))
	}
	out, code := u.memd("status", "--repo", u.repo)
	if code != 0 || strings.Contains(out, "precious") {
		problems = append(problems, fmt.Sprintf("memd status: exit %d: %s", code, out))
	}
	u.expectUnchanged(before, "memd run/sleep with symlinks in .git/memd", &problems)

	// .git/memd itself a link to a folder outside: refused, naming it; its target keeps its
	// mode (the old code chmodded it 0700) and gets no file.
	must(t, os.RemoveAll(state))
	must(t, os.Symlink(filepath.Join(u.outside, "statedir"), state))
	before = u.snapshot()
	d = u.spawn(nil)
	code = d.WaitExit()
	if code == 0 || !strings.Contains(d.Logs(), ".git/memd") {
		problems = append(problems, fmt.Sprintf("memd run with a symlinked .git/memd: exit %d, want a refusal naming it:\n%s", code, d.Logs()))
	}
	if out, code := u.memd("sleep", "--phase", "tidy", "--now", sleepNow, "--config", u.config, "--repo", u.repo); code == 0 {
		problems = append(problems, "memd sleep with a symlinked .git/memd: exit 0:\n"+out)
	}
	if out, code := u.memd("status", "--repo", u.repo); code != 0 {
		problems = append(problems, fmt.Sprintf("memd status: exit %d: %s", code, out))
	}
	u.expectUnchanged(before, "memd run/sleep with .git/memd a symlink", &problems)
	if fi, err := os.Stat(filepath.Join(u.outside, "statedir")); err != nil || fi.Mode().Perm() != 0o755 {
		problems = append(problems, fmt.Sprintf("the link's target was chmodded: %v %v", fi.Mode(), err))
	}
	ulReport(t, "untrusted: symlinks in .git/memd", start, 8, problems, "memd.pid, status.*, sleep.json, merge marker, journal; then .git/memd itself")
}

// Item 4: a valid pushed commit turns archive/2023, archive/2024 and areas/arcs into links to
// folders outside. `memd sleep` must refuse the phases that would move or write through them
// (naming the path), commit and push nothing for them, and work again once the links are
// reverted upstream.
func TestUntrustedLinksSleepFolders(t *testing.T) {
	t.Parallel()
	start := time.Now()
	u := newULWorld(t, true)
	var problems []string
	must(t, os.MkdirAll(filepath.Join(u.attacker, "archive"), 0o755))
	// 2026 is the run's year (sleepNow): memhtml's archive rule files every move there.
	for _, y := range []string{"2023", "2024", "2025", "2026"} {
		must(t, os.Symlink(filepath.Join(u.outside, "dir"), filepath.Join(u.attacker, "archive", y)))
	}
	u.push("tidy the archive")
	// The folder goes in one commit, the link takes its name in the next.
	u.gitIn(u.attacker, "rm", "-q", "-r", "--ignore-unmatch", "areas/arcs")
	must(t, os.RemoveAll(filepath.Join(u.attacker, "areas", "arcs")))
	if _, err := os.Stat(filepath.Join(u.attacker, "areas", "arcs")); err == nil {
		t.Fatal("areas/arcs still there")
	}
	u.gitIn(u.attacker, "commit", "-q", "--allow-empty", "-m", "drop arcs")
	u.gitIn(u.attacker, "push", "-q", "origin", "HEAD:main")
	if out, code := u.sync(); code != 0 {
		t.Fatalf("memd sync of the link commit: exit %d\n%s", code, out)
	}
	must(t, os.Symlink("../../outside/arcs", filepath.Join(u.attacker, "areas", "arcs")))
	u.push("arcs live elsewhere now")
	if out, code := u.sync(); code != 0 {
		t.Fatalf("memd sync of the link commit: exit %d\n%s", code, out)
	}
	if fi, err := os.Lstat(u.path("archive/2024")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link was not checked out as a link: %v %v", fi, err)
	}
	head, remote := u.head(), u.remoteHead()
	episodes := u.countHTML()
	before := u.snapshot()

	for _, c := range []struct{ phase, path string }{{"archive", "archive/20"}, {"arcs", "areas/arcs"}} {
		out, code := u.memd("sleep", "--phase", c.phase, "--now", sleepNow, "--config", u.config, "--repo", u.repo)
		if code != 1 || !strings.Contains(out, c.path) || !strings.Contains(out, "symbolic link") {
			problems = append(problems, fmt.Sprintf("memd sleep --phase %s over a symlinked folder: exit %d, want 1 naming %s and the link:\n%s", c.phase, code, c.path, out))
		}
	}
	u.expectUnchanged(before, "memd sleep over symlinked folders", &problems)
	if h := u.head(); h != head {
		problems = append(problems, "sleep committed over the links: HEAD "+h+", was "+head)
	}
	if n := u.countHTML(); n != episodes {
		problems = append(problems, fmt.Sprintf("memories in the work tree: %d, were %d", n, episodes))
	}
	if out, code := u.sync(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sync after the refusals: exit %d\n%s", code, out))
	}
	if r := u.remoteHead(); r != remote {
		problems = append(problems, "something was pushed for the refused phases: remote "+r+", was "+remote)
	}

	// Reverted upstream: the next sync brings real folders back and the phases work.
	for _, y := range []string{"2023", "2024", "2025", "2026"} {
		must(t, os.Remove(filepath.Join(u.attacker, "archive", y)))
	}
	must(t, os.Remove(filepath.Join(u.attacker, "areas", "arcs")))
	u.push("links reverted")
	if out, code := u.sync(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sync of the revert: exit %d\n%s", code, out))
	}
	out, code := u.memd("sleep", "--phase", "archive", "--phase", "arcs", "--now", sleepNow, "--config", u.config, "--repo", u.repo)
	if code != 0 {
		problems = append(problems, fmt.Sprintf("memd sleep after the revert: exit %d\n%s", code, out))
	}
	if fi, err := os.Lstat(u.path("archive/2026")); err != nil || !fi.IsDir() {
		problems = append(problems, fmt.Sprintf("archive/2026 after the revert and a sleep: %v %v (want a real folder)", fi, err))
	}
	u.expectUnchanged(before, "memd sleep after the revert", &problems)
	ulReport(t, "untrusted: sleep through symlinked folders", start, 7, problems, "archive/2023-2026 and areas/arcs -> outside; refused naming the path; recovered after a revert")
}

// countHTML counts the memory files in the work tree (not through links).
func (u *ulWorld) countHTML() int {
	n := 0
	_ = filepath.WalkDir(u.repo, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".html") {
			n++
		}
		if err == nil && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		return nil
	})
	return n
}

// Item 7: an episode in a folder .gitignore excludes is old enough to archive. `memd sleep`
// must leave it where it is and neither commit nor push it.
func TestUntrustedSleepIgnoredFile(t *testing.T) {
	t.Parallel()
	start := time.Now()
	u := newULWorld(t, true)
	var problems []string
	u.write(".gitignore", "areas/private/\n")
	if out, code := u.sync(); code != 0 {
		t.Fatalf("memd sync of .gitignore: exit %d\n%s", code, out)
	}
	private := "areas/private/20230105-my-diary.html"
	u.write(private, episode("My diary", "2023-01-05"))
	out, code := u.memd("sleep", "--phase", "archive", "--now", sleepNow, "--config", u.config, "--repo", u.repo)
	if code != 0 {
		problems = append(problems, fmt.Sprintf("memd sleep --phase archive: exit %d\n%s", code, out))
	}
	if _, err := os.Stat(u.path(private)); err != nil {
		problems = append(problems, "the ignored episode was moved: "+err.Error())
	}
	if strings.Contains(out, "private") {
		problems = append(problems, "sleep planned the ignored episode:\n"+out)
	}
	if out, code := u.sync(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd sync: exit %d\n%s", code, out))
	}
	for _, dir := range []string{u.repo, u.bare} {
		ls := u.gitIn(dir, "ls-tree", "-r", "--name-only", "main")
		if strings.Contains(ls, "private") {
			problems = append(problems, "the ignored episode is committed in "+dir)
		}
	}
	ulReport(t, "untrusted: sleep and ignored files", start, 4, problems, ".gitignore'd 2023 episode: not archived, not committed, not pushed")
}

// Item 8: a status.json that is a FIFO, a link to /dev/zero or 2 MiB: `memd status` (the
// fast path and the full command) answers at once with an error line, exit 0.
func TestUntrustedStatusFile(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{})
	var problems []string
	state := filepath.Join(w.repo, ".git", "memd")
	must(t, os.MkdirAll(state, 0o700))
	doc := filepath.Join(state, "status.json")
	cases := []struct {
		name string
		make func()
	}{
		{"a FIFO", func() { must(t, syscall.Mkfifo(doc, 0o600)) }},
		{"a symlink to /dev/zero", func() { must(t, os.Symlink("/dev/zero", doc)) }},
		{"2 MiB", func() {
			must(t, os.WriteFile(doc, []byte(`{"version":1,"pad":"`+strings.Repeat("x", 2<<20)+`"}`), 0o600))
		}},
	}
	checks := 0
	for _, c := range cases {
		_ = os.Remove(doc)
		c.make()
		for _, env := range [][]string{nil, {"MEMD_NO_FASTPATH=1"}} {
			checks++
			t0 := time.Now()
			out, code := w.memdEnv(env, 10*time.Second, "status", "--repo", w.repo)
			if code != 0 || !strings.Contains(out, "error") || !strings.Contains(out, "status.json") {
				problems = append(problems, fmt.Sprintf("status.json %s (%v): exit %d, want 0 with an error line naming it:\n%.500s", c.name, env, code, out))
			}
			if d := time.Since(t0); d > 5*time.Second {
				problems = append(problems, fmt.Sprintf("status.json %s: memd status took %s", c.name, d))
			}
		}
	}
	ulReport(t, "untrusted: status.json FIFO, /dev/zero, 2 MiB", start, checks, problems, "memd status, fast path and full: error line, exit 0, at once")
}

// Item 8: a DNS-rebinding page reaches 127.0.0.1 with its own name in Host.
func TestUntrustedHostHeader(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{})
	var problems []string
	d := w.start()
	defer d.Stop()
	addr := d.Addr()
	if addr == "" {
		t.Fatal("no http address")
	}
	do := func(host, p string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+p, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			problems = append(problems, fmt.Sprintf("GET %s Host %s: %v", p, host, err))
			return 0
		}
		defer resp.Body.Close()
		if p != "/status/events" || resp.StatusCode != 200 {
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		return resp.StatusCode
	}
	checks := 0
	for _, p := range []string{"/status.json", "/status/events", "/metrics", "/"} {
		checks += 2
		if code := do("evil.example", p); code != http.StatusMisdirectedRequest {
			problems = append(problems, fmt.Sprintf("Host evil.example %s: %d, want 421", p, code))
		}
		if code := do(addr, p); code != http.StatusOK {
			problems = append(problems, fmt.Sprintf("Host %s %s: %d, want 200", addr, p, code))
		}
	}
	ulReport(t, "untrusted: Host header (DNS rebinding)", start, checks, problems, "evil.example: 421 on /status.json, /status/events, /metrics, /; loopback: 200")
}

// Item 8: a password with ', @, : and % in the remote URL never appears in what memd prints
// or writes (sync output, status.json, the status lines).
func TestUntrustedRemotePasswordRedacted(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{})
	var problems []string
	const pw = "it's@P4ss:w%rd"
	w.git("remote", "add", "origin", "http://alice:"+pw+"@127.0.0.1:1/memory.git")
	out, _ := w.memd("sync", "--config", w.config, "--repo", w.repo)
	texts := map[string]string{"memd sync output": out}
	for _, name := range []string{"status.json", "status.plain", "status.claude"} {
		b, _ := os.ReadFile(filepath.Join(w.repo, ".git", "memd", name))
		texts[name] = string(b)
	}
	st, _ := w.memd("status", "--repo", w.repo)
	texts["memd status"] = st
	for what, s := range texts {
		for _, leak := range []string{pw, "it's", "P4ss", "w%rd", "s@P4"} {
			if strings.Contains(s, leak) {
				problems = append(problems, fmt.Sprintf("%s leaks %q:\n%.800s", what, leak, s))
				break
			}
		}
	}
	if !strings.Contains(out, "127.0.0.1:1") {
		problems = append(problems, "sync output does not name the remote host:\n"+out)
	}
	ulReport(t, "untrusted: remote password redacted", start, len(texts), problems, "password it's@P4ss:w%rd in the URL: not in sync output, status.json, status lines")
}

// Item 8: a config error names the key and ${VAR}, never the secret the variable held.
func TestUntrustedConfigSecret(t *testing.T) {
	t.Parallel()
	start := time.Now()
	w := newWorld(t, worldOpts{noInit: true})
	var problems []string
	const secret = "ghp_s3cr'et@:%TOKEN"
	env := []string{"MEMD_TEST_SECRET=" + secret}
	bodies := []string{
		"sync: {remote: \"${MEMD_TEST_SECRET}\"}\n",
		"sync: {timeout: \"${MEMD_TEST_SECRET}\"}\n",
		"arcs: {min_episodes: \"${MEMD_TEST_SECRET}\"}\n",
		"http: {listen: \"${MEMD_TEST_SECRET}\"}\n",
	}
	for i, body := range bodies {
		cfg := filepath.Join(w.home, fmt.Sprintf("secret-%d.yaml", i))
		must(t, os.WriteFile(cfg, []byte(body), 0o600))
		for _, cmd := range []string{"doctor", "run"} {
			out, code := w.memdEnv(env, time.Minute, cmd, "--config", cfg, "--repo", w.repo)
			if code != 2 || !strings.Contains(out, "${MEMD_TEST_SECRET}") {
				problems = append(problems, fmt.Sprintf("memd %s with %q: exit %d, want 2 naming ${MEMD_TEST_SECRET}:\n%s", cmd, body, code, out))
			}
			for _, leak := range []string{"s3cr", "TOKEN", "ghp_"} {
				if strings.Contains(out, leak) {
					problems = append(problems, fmt.Sprintf("memd %s with %q leaks the secret:\n%s", cmd, body, out))
					break
				}
			}
		}
	}
	ulReport(t, "untrusted: ${VAR} secret in a config error", start, 2*len(bodies), problems, "4 bad values from ${VAR}; doctor and run exit 2 naming the key and variable only")
}
