package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestReliabilityCrash SIGKILLs memd at random (seeded) moments and restarts it: `memd run`
// during bursts of writes, during pushes and during merges with a peer pushing to the same
// remote; `memd sleep --phase X` during each phase; and the daemon during its own sleep.
// After every kill: git fsck --full clean (repo and remote), every write's final content in
// HEAD and on the remote, no conflict markers, no leftover lock that blocks the next run (the
// restarted memd commits), and a killed sleep resumed gives the same tree as one never killed.
func TestReliabilityCrash(t *testing.T) {
	t.Parallel()
	t.Run("run-burst", func(t *testing.T) { t.Parallel(); crashRun(t, "crash: memd run, write bursts", false, false) })
	t.Run("run-push", func(t *testing.T) { t.Parallel(); crashRun(t, "crash: memd run, pushes", true, false) })
	t.Run("run-merge", func(t *testing.T) { t.Parallel(); crashRun(t, "crash: memd run, merges", true, true) })
	t.Run("sleep", func(t *testing.T) { t.Parallel(); crashSleep(t) })
	t.Run("daemon-sleep", func(t *testing.T) { t.Parallel(); crashDaemonSleep(t) })
}

// expectation is what a path must hold after an iteration: content, or absent.
type expectation struct {
	content string
	deleted bool
}

// burst writes, overwrites, renames and deletes files under dir with short random gaps and
// records the final state of each path it touched.
func burst(w *world, rng *rand.Rand, dir string, iter, n int, exp map[string]expectation, mu *sync.Mutex) int {
	writes := 0
	for k := 0; k < n; k++ {
		rel := fmt.Sprintf("%s/f%03d.html", dir, rng.IntN(n*2))
		p := w.path(rel)
		switch op := rng.IntN(10); {
		case op < 7: // write (new or overwrite)
			c := fmt.Sprintf("<p>iter %d write %d %s</p>\n%s", iter, k, rel, strings.Repeat("x", rng.IntN(3000)))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil && os.WriteFile(p, []byte(c), 0o644) == nil {
				mu.Lock()
				exp[rel] = expectation{content: c}
				mu.Unlock()
				writes++
			}
		case op < 8: // atomic save (temp + rename), as editors and writers do
			c := fmt.Sprintf("<p>iter %d renamed-in %d %s</p>\n", iter, k, rel)
			tmp := p + ".tmp"
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err == nil && os.WriteFile(tmp, []byte(c), 0o644) == nil &&
				os.Rename(tmp, p) == nil {
				mu.Lock()
				exp[rel] = expectation{content: c}
				mu.Unlock()
				writes++
			}
		default: // delete
			if os.Remove(p) == nil {
				mu.Lock()
				exp[rel] = expectation{deleted: true}
				mu.Unlock()
				writes++
			}
		}
		time.Sleep(time.Duration(rng.IntN(15)) * time.Millisecond)
	}
	return writes
}

// peer is a second machine: a plain git clone that commits and pushes its own files.
type peer struct {
	w    *world
	dir  string
	n    int
	last map[string]string
}

func newPeer(w *world) *peer {
	p := &peer{w: w, dir: filepath.Join(w.home, "peer"), last: map[string]string{}}
	w.gitIn(w.home, "clone", "-q", w.bare, p.dir)
	return p
}

// push commits one new file and pushes, merging (no conflicts: own paths) when rejected.
func (p *peer) push() error {
	p.n++
	rel := fmt.Sprintf("projects/peer/p%04d.html", p.n)
	c := fmt.Sprintf("<p>peer write %d</p>\n", p.n)
	full := filepath.Join(p.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
		return err
	}
	id := []string{"-c", "user.name=peer", "-c", "user.email=peer@example.invalid"}
	if _, err := p.w.gitRun(p.dir, nil, "add", "-A"); err != nil {
		return err
	}
	if _, err := p.w.gitRun(p.dir, nil, append(id, "commit", "-q", "-m", "peer "+rel)...); err != nil {
		return err
	}
	p.last[rel] = c
	for try := 0; try < 10; try++ {
		if _, err := p.w.gitRun(p.dir, nil, "push", "-q", "origin", "HEAD:main"); err == nil {
			return nil
		}
		if _, err := p.w.gitRun(p.dir, nil, append(id, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")...); err != nil {
			return err
		}
	}
	return fmt.Errorf("peer push kept failing")
}

// verifyRepo checks the invariants after an iteration and returns the problems found.
func (w *world) verifyRepo(exp map[string]expectation) (found int, problems []string) {
	if s := w.fsck(w.repo); s != "" {
		// Say what the broken ref holds (an empty file is a ref rewritten in place and cut
		// by the kill).
		for _, ref := range []string{"refs/remotes/origin/main", "refs/heads/main"} {
			if strings.Contains(s, ref) {
				b, err := os.ReadFile(filepath.Join(w.repo, ".git", filepath.FromSlash(ref)))
				s += fmt.Sprintf(" [%s holds %q, %v]", ref, b, err)
			}
		}
		problems = append(problems, "git fsck (repo): "+s)
	}
	if w.bare != "" {
		if s := w.fsck(w.bare); s != "" {
			problems = append(problems, "git fsck (remote): "+s)
		}
	}
	if m := w.conflictMarkers(); len(m) > 0 {
		problems = append(problems, fmt.Sprintf("conflict markers in HEAD: %v", m))
	}
	paths := make([]string, 0, len(exp))
	for p := range exp {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var local, remote []string
	for _, p := range paths {
		local = append(local, "HEAD:"+p)
		remote = append(remote, "refs/heads/main:"+p)
	}
	inHead := w.blobs(w.repo, local)
	var inRemote map[string]string
	if w.bare != "" {
		inRemote = w.blobs(w.bare, remote)
	}
	for _, p := range paths {
		e := exp[p]
		h, okH := inHead["HEAD:"+p]
		ok := true
		switch {
		case e.deleted && okH:
			problems = append(problems, fmt.Sprintf("%s: deleted, still in HEAD", p))
			ok = false
		case !e.deleted && (!okH || h != e.content):
			problems = append(problems, fmt.Sprintf("%s: HEAD has %.60q (present %v), want %.60q", p, h, okH, e.content))
			ok = false
		}
		if w.bare != "" {
			r, okR := inRemote["refs/heads/main:"+p]
			if e.deleted == okR || (!e.deleted && r != e.content) {
				problems = append(problems, fmt.Sprintf("%s: remote has %.60q (present %v)", p, r, okR))
				ok = false
			}
		}
		if ok {
			found++
		}
	}
	return found, problems
}

func crashRun(t *testing.T, name string, remote, merge bool) {
	rng := scenarioRand(t, name)
	n := iterations(t, 3, 200)
	// The bursts delete a few files an iteration: 200 iterations are ~600 deletions within
	// the brake's 10-minute window (sync/gitrepo/massdelete.go), a mass deletion by its
	// count though none is one, so the brake is out of this run's way.
	w := newWorld(t, worldOpts{remote: remote, config: strings.Replace(fastConfig, "timeout: 3s}", "timeout: 3s, max_deletes: 1000000}", 1)})
	var p *peer
	if merge {
		p = newPeer(w)
	}
	start := time.Now()
	// writes: the final state of every path an iteration touched (its last write, rename or
	// delete, and the peer's files); ops: every write operation made.
	var writes, ops, found, corruptions, busyKills, liveTorn, aimed int
	known := knownIssues{}
	d := w.start()
	for i := 0; i < n; i++ {
		exp := map[string]expectation{}
		var mu sync.Mutex
		wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
		burstN := 10 + rng.IntN(30)
		// The kill lands anywhere from the first write to well after the last (the commit,
		// the push, the merge of the peer's commits all happen in that window).
		delay := time.Duration(rng.Int64N(int64(time.Duration(burstN)*8*time.Millisecond + 1500*time.Millisecond)))
		var wg sync.WaitGroup
		var made int
		stopPeer := make(chan struct{})
		var peerErr error
		wg.Add(1)
		go func() { defer wg.Done(); made = burst(w, wrng, "areas/crash", i, burstN, exp, &mu) }()
		if p != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stopPeer:
						return
					default:
					}
					if err := p.push(); err != nil {
						peerErr = err
						return
					}
				}
			}()
		}
		if remote && i%2 == 1 {
			// Odd iterations aim at the sync that follows a commit: wait for the next
			// commit, then kill within the next 150 ms (the fetch, merge and push).
			commits := strings.Count(d.Logs(), "msg=committed")
			testutil.Poll(5*time.Second, func() bool { return strings.Count(d.Logs(), "msg=committed") > commits })
			delay = time.Duration(rng.Int64N(int64(150 * time.Millisecond)))
			aimed++
		}
		time.Sleep(delay)
		if st := w.status(); st.State == "busy" {
			busyKills++
		}
		d.Kill()
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		close(stopPeer)
		wg.Wait()
		if peerErr != nil {
			t.Fatalf("iteration %d: peer: %v", i, peerErr)
		}
		ops += made
		d = w.start()
		ok, why := w.settled(settleTimeout)
		if !ok && w.clearEmptyLock(t, known, fmt.Sprintf("iteration %d", i)) {
			ok, why = w.settled(settleTimeout)
		}
		if !ok {
			t.Errorf("iteration %d (kill after %s): not settled: %s%s", i, delay, why, d.Describe())
			corruptions++
			n = i + 1 // the table counts the iterations run
			break
		}
		if p != nil {
			for rel, c := range p.last {
				exp[rel] = expectation{content: c}
			}
			p.last = map[string]string{}
		}
		// A git reader beside a running memd (this fsck) may catch the remote-tracking ref
		// mid-rewrite: counted and reported, not a corruption (see docs/RELIABILITY.md).
		if s := w.fsck(w.repo); s != "" {
			liveTorn++
			t.Logf("iteration %d: fsck beside the running memd: %s", i, s)
		}
		// Stop cleanly, then check: a SIGTERM must exit 0 and leave no writer lock.
		if code := d.Stop(); code != 0 {
			t.Errorf("iteration %d: SIGTERM: exit %d%s", i, code, d.Describe())
			corruptions++
		}
		if _, err := os.Stat(w.path(".memory.lock")); err == nil {
			t.Errorf("iteration %d: .memory.lock left behind after a clean stop", i)
			corruptions++
		}
		writes += len(exp)
		f, problems := w.verifyRepo(exp)
		found += f
		if len(problems) > 0 {
			corruptions += len(problems)
			t.Errorf("iteration %d (kill after %s): %s", i, delay, strings.Join(problems, "\n"))
		}
		if i < n-1 {
			d = w.start()
		}
	}
	record(t, row{Scenario: name, Iterations: n, Writes: writes, Found: found, Corruptions: corruptions + known.total(),
		Time: time.Since(start), Note: fmt.Sprintf("%d write ops; %d kills aimed just after a commit (the sync); %d kills while status said busy; %d torn tracking-ref reads by a live git fsck; %s",
			ops, aimed, busyKills, liveTorn, known.note())})
}

const sleepNow = "2026-11-30T03:00:00Z"

// Known issues are problems already reported (docs/RELIABILITY.md, Findings) that belong to
// another package. They are counted in the table either way; they fail the long setting
// (make reliability) and are logged in the short one, so make test stays a signal for new
// breakage while make reliability stays red until they are fixed.
type knownIssues map[string]int

func (k knownIssues) add(t testing.TB, issue, detail string) {
	k[issue]++
	if isLong() {
		t.Errorf("known issue (%s): %s", issue, detail)
	} else {
		t.Logf("known issue (%s), fails only in the long setting: %s", issue, detail)
	}
}

func (k knownIssues) note() string {
	var parts []string
	for issue, n := range k {
		parts = append(parts, fmt.Sprintf("known: %s ×%d", issue, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func (k knownIssues) total() int {
	n := 0
	for _, v := range k {
		n += v
	}
	return n
}

// emptyLockIssue is the known issue of an empty .memory.lock: a SIGKILL between creating
// the lock (O_EXCL) and writing its lines leaves an empty file, which writerlock.Acquire treats as
// held for LockUnreadableStaleAfter (10 minutes), blocking memd and every writer.
const emptyLockIssue = "a kill between creating .memory.lock and writing it leaves an empty lock that blocks all writers for 10 min"

// clearEmptyLock removes an empty .memory.lock (what memd's message tells a user to do) and
// records the known issue; it reports whether it found one.
func (w *world) clearEmptyLock(t testing.TB, known knownIssues, where string) bool {
	p := w.path(".memory.lock")
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 0 {
		return false
	}
	known.add(t, emptyLockIssue, where)
	_ = os.Remove(p)
	return true
}

// sleepTempRE matches the temp files memd writes beside their targets and a kill leaves in
// the work tree: safefs's "<dir>/.memd-<16 base32>.tmp" (sleep's apply, the writer lock's
// temp), an older memd's "<dir>/.<name>.memd-<n>.tmp" and ".memory.lock.<pid>.tmp".
var sleepTempRE = regexp.MustCompile(`(\.memd-(\d+|[a-z2-7]{16})\.tmp|^\?\? \.memory\.lock\.[0-9a-z.-]+\.tmp)$`)

// splitTempLitter separates leftover sleep temp files from the rest of a porcelain diff.
func splitTempLitter(diff string) (rest string, litter []string) {
	var keep []string
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "?? ") && sleepTempRE.MatchString(l) {
			litter = append(litter, strings.TrimPrefix(l, "?? "))
			continue
		}
		keep = append(keep, l)
	}
	if len(keep) == 0 {
		return "", litter
	}
	return strings.Join(keep, "\n") + "\n", litter
}

// sleepReference runs an uninterrupted `memd sleep` on a copy of the template and returns
// the tree it made and how long it took.
func sleepReference(t *testing.T, tmpl *world, args []string) (tree string, took time.Duration) {
	ref := tmpl.copyRepo(t, "ref")
	start := time.Now()
	if out, code := ref.memd(append([]string{"sleep", "--repo", ref.repo, "--config", ref.config}, args...)...); code != 0 {
		t.Fatalf("reference memd sleep %v: exit %d\n%s", args, code, out)
	}
	took = time.Since(start)
	// An empty tree id would make every comparison with it pass.
	if tree = ref.rev(ref.repo, "HEAD^{tree}"); tree == "" {
		t.Fatalf("reference memd sleep %v: no HEAD tree", args)
	}
	return tree, took
}

// copyRepo is a world sharing tmpl's home and env whose repo is a fresh copy of tmpl's.
func (w *world) copyRepo(t *testing.T, name string) *world {
	dir, err := os.MkdirTemp(w.home, name+"-")
	must(t, err)
	c := *w
	c.t = t
	c.repo = filepath.Join(dir, "memory")
	cp(t, w.repo, c.repo)
	return &c
}

// crashSleep kills `memd sleep --phase X` (and a whole run) at random moments, runs it again
// with the same --now (the same run id: resume) and compares the result with a run never
// killed.
func crashSleep(t *testing.T) {
	name := "crash: memd sleep per phase"
	rng := scenarioRand(t, name)
	// Per case: 5 cases (four phases and a whole run), so the long setting is 200 kills.
	n := iterations(t, 1, 40)
	tmpl := newWorld(t, worldOpts{demo: true})
	start := time.Now()
	cases := [][]string{{"--phase", "expire"}, {"--phase", "arcs"}, {"--phase", "archive"}, {"--phase", "tidy"}, nil}
	var runs, corruptions, afterCommit int
	known := knownIssues{}
	files := strings.Count(tmpl.git("ls-files"), "\n")
	for _, phase := range cases {
		args := append([]string{"--now", sleepNow, "--no-gc"}, phase...)
		want, took := sleepReference(t, tmpl, args)
		label := "all"
		if phase != nil {
			label = phase[1]
		}
		for i := 0; i < n; i++ {
			it := tmpl.copyRepo(t, "it")
			before := it.head()
			cmdArgs := append([]string{"sleep", "--repo", it.repo, "--config", it.config}, args...)
			d := it.spawnArgs(nil, cmdArgs)
			delay := time.Duration(rng.Int64N(int64(took + took/5 + time.Millisecond)))
			time.Sleep(delay)
			d.Kill()
			if it.head() != before {
				afterCommit++
			}
			out, code := it.memd(cmdArgs...)
			if code != 0 && strings.Contains(out, "unreadable lock file") && it.clearEmptyLock(t, known, fmt.Sprintf("%s #%d", label, i)) {
				out, code = it.memd(cmdArgs...)
			}
			if code != 0 && strings.Contains(out, "git lock held") {
				// The killed run's refs/heads/main.lock blocks commits until it is 10 s old
				// (sync's stale age); a run started at once fails. Wait that out, run again.
				known.add(t, "a killed sleep's ref lock fails the next run for 10 s", fmt.Sprintf("%s #%d", label, i))
				lock := it.path(".git/refs/heads/main.lock")
				testutil.Poll(20*time.Second, func() bool {
					fi, err := os.Stat(lock)
					return err != nil || time.Since(fi.ModTime()) > 11*time.Second
				})
				out, code = it.memd(cmdArgs...)
			}
			if code != 0 {
				t.Errorf("%s iteration %d: memd sleep after a kill at %s: exit %d\n%s", label, i, delay, code, out)
				corruptions++
				continue
			}
			runs++
			var problems []string
			if got := it.rev(it.repo, "HEAD^{tree}"); got != want {
				problems = append(problems, fmt.Sprintf("tree %s, a run never killed makes %s:\n%s", got, want,
					it.git("diff", "--stat", want, "HEAD^{tree}")))
			}
			diff, err := it.treeDiff()
			rest, litter := splitTempLitter(diff)
			if err != nil || rest != "" {
				problems = append(problems, fmt.Sprintf("work tree differs from HEAD after the resumed run: %v\n%s", err, rest))
			}
			if len(litter) > 0 {
				known.add(t, "a killed memd's temp files stay in the work tree", fmt.Sprintf("%s #%d: %v", label, i, litter))
			}
			if s := it.fsck(it.repo); s != "" {
				problems = append(problems, "git fsck: "+s)
			}
			if m := it.conflictMarkers(); len(m) > 0 {
				problems = append(problems, fmt.Sprintf("conflict markers: %v", m))
			}
			if _, err := os.Stat(it.path(".git/index.lock")); err == nil {
				problems = append(problems, ".git/index.lock left behind")
			}
			if it.clearEmptyLock(t, known, fmt.Sprintf("%s #%d, after the resumed run", label, i)) {
				// counted above
			} else if b, err := os.ReadFile(it.path(".memory.lock")); err == nil {
				known.add(t, "the resumed sleep leaves the killed sleep's .memory.lock", fmt.Sprintf("%s #%d: %q", label, i, b))
			}
			if len(problems) > 0 {
				corruptions += len(problems)
				t.Errorf("sleep %s iteration %d (kill after %s of ~%s): %s", label, i, delay, took, strings.Join(problems, "\n"))
			}
			os.RemoveAll(filepath.Dir(it.repo))
		}
	}
	record(t, row{Scenario: name, Iterations: runs, Writes: files, Found: files, Corruptions: corruptions + known.total(),
		Time: time.Since(start), Note: fmt.Sprintf("expire, arcs, archive, tidy and all; %d kills after a phase commit; %s", afterCommit, known.note())})
}

// crashDaemonSleep kills `memd run` while its catch-up sleep runs, restarts it, and checks
// the finished sleep gives the tree an uninterrupted daemon makes.
func crashDaemonSleep(t *testing.T) {
	name := "crash: memd run during its sleep"
	rng := scenarioRand(t, name)
	n := iterations(t, 2, 200)
	tmpl := newWorld(t, worldOpts{demo: true, config: `watch: {quiet: 150ms, max_delay: 1s}
http: {listen: ""}
sleep: {catch_up: true}
`})
	start := time.Now()
	const now = "2026-11-30T03:30:00Z"
	run := func(it *world) (*testutil.Daemon, time.Time) {
		must(t, os.MkdirAll(filepath.Join(it.repo, ".git", "memd"), 0o700))
		must(t, os.WriteFile(filepath.Join(it.repo, ".git", "memd", "sleep.json"),
			[]byte(`{"version":1,"baseline":"2026-11-28T00:00:00Z","phases":{}}`), 0o600))
		return it.spawn(nil, "--now", now), time.Now()
	}
	done := func(it *world) bool {
		b, err := os.ReadFile(filepath.Join(it.repo, ".git", "memd", "sleep.json"))
		return err == nil && strings.Count(string(b), `"run": "20261130T030000Z"`) == 4
	}
	ref := tmpl.copyRepo(t, "ref")
	d, t0 := run(ref)
	testutil.WaitFor(t, "the reference daemon sleep", 2*time.Minute, func() bool { return done(ref) }, d.Describe)
	took := time.Since(t0)
	if ok, why := ref.settled(settleTimeout); !ok {
		t.Fatalf("reference: %s", why)
	}
	want := ref.rev(ref.repo, "HEAD^{tree}")
	if want == "" { // it would compare equal to a failed read of a resumed run's tree
		t.Fatal("reference daemon sleep: no HEAD tree")
	}
	d.Stop()
	var corruptions, runs int
	known := knownIssues{}
	tmplHead := tmpl.head()
	for i := 0; i < n; i++ {
		it := tmpl.copyRepo(t, "it")
		d, _ := run(it)
		delay := time.Duration(rng.Int64N(int64(took + time.Millisecond)))
		time.Sleep(delay)
		d.Kill()
		d = it.spawn(nil, "--now", now)
		finished := testutil.Poll(time.Minute, func() bool { return done(it) })
		if !finished && it.clearEmptyLock(t, known, fmt.Sprintf("daemon sleep #%d", i)) {
			finished = testutil.Poll(2*time.Minute, func() bool { return done(it) })
		}
		if !finished && strings.Contains(d.Logs(), "git lock held") {
			// The killed daemon's refs/heads/main.lock failed a phase (see the sleep case);
			// the scheduler fires a slot once, so that phase waits for the next night.
			known.add(t, "a killed sleep's ref lock fails the next run for 10 s", fmt.Sprintf("daemon sleep #%d: a phase failed and waits for the next night", i))
			d.Kill()
			continue
		}
		if !finished {
			t.Errorf("iteration %d (kill after %s): the sleep never finished after the restart%s", i, delay, d.Describe())
			corruptions++
			d.Kill()
			continue
		}
		runs++
		var problems []string
		if !testutil.Poll(settleTimeout, func() bool {
			diff, err := it.treeDiff()
			rest, _ := splitTempLitter(diff)
			return err == nil && rest == ""
		}) {
			diff, err := it.treeDiff()
			problems = append(problems, fmt.Sprintf("work tree differs from HEAD: %v\n%s", err, diff))
		}
		if diff, _ := it.treeDiff(); diff != "" {
			if _, litter := splitTempLitter(diff); len(litter) > 0 {
				known.add(t, "a killed memd's temp files stay in the work tree", fmt.Sprintf("#%d: %v", i, litter))
			}
		}
		// Only sleep commits may follow the template: a change commit here is the start-up
		// reconcile committing the killed sleep's half-applied phase.
		if subj := it.git("log", "--format=%s", tmplHead+"..HEAD"); strings.Contains(subj, "memd: ") {
			known.add(t, "the start-up reconcile commits a killed sleep's half-applied phase",
				fmt.Sprintf("#%d (kill after %s): %q", i, delay, strings.TrimSpace(subj)))
		}
		if got := it.rev(it.repo, "HEAD^{tree}"); got != want {
			problems = append(problems, fmt.Sprintf("tree %s, an uninterrupted daemon makes %s:\n%s", got, want,
				it.git("diff", "--stat", want, "HEAD^{tree}")))
		}
		if s := it.fsck(it.repo); s != "" {
			problems = append(problems, "git fsck: "+s)
		}
		if m := it.conflictMarkers(); len(m) > 0 {
			problems = append(problems, fmt.Sprintf("conflict markers: %v", m))
		}
		if code := d.Stop(); code != 0 {
			problems = append(problems, fmt.Sprintf("SIGTERM: exit %d", code))
		}
		if len(problems) > 0 {
			corruptions += len(problems)
			t.Errorf("iteration %d (kill after %s of ~%s): %s%s", i, delay, took, strings.Join(problems, "\n"), d.Describe())
		}
		os.RemoveAll(filepath.Dir(it.repo))
	}
	files := strings.Count(tmpl.git("ls-files"), "\n")
	record(t, row{Scenario: name, Iterations: runs, Writes: files, Found: files, Corruptions: corruptions + known.total(),
		Time: time.Since(start), Note: "catch-up sleep at start, killed and restarted; " + known.note()})
}
