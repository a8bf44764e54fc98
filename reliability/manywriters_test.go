package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// TestReliabilityManyWriters (MEMD_RELIABILITY=long; MEMD_WRITERS_DURATION, default 5m): memd
// as one writer among several (docs/ARCHITECTURE.md §11). Clone A: `memd run` and a person with plain git
// (branch switches with commits on the branch, merges that stop on a conflict and are
// resolved by hand, `commit --amend`, `stash` / `stash pop`, `pull --rebase`). Clone B:
// `memd run`, a plain writer of memory files, and the real memhtml CLI (`memhtml write`,
// `memhtml sleep run` then `memhtml sleep merge`; manywriters_memhtml_test.go). Clone C: a client that commits and pushes straight to the
// remote, as a forge's web editor does. At the end: one HEAD everywhere, every write of
// every writer present (or in a conflict copy), no file of a branch never merged on main,
// no conflict markers in any commit, `git fsck` clean.
func TestReliabilityManyWriters(t *testing.T) {
	if !isLong() {
		t.Skip("the many-writers run is MEMD_RELIABILITY=long (make reliability)")
	}
	t.Parallel()
	dur := 5 * time.Minute
	if v := os.Getenv("MEMD_WRITERS_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("MEMD_WRITERS_DURATION=%q: %v", v, err)
		}
		dur = d
	}
	name := fmt.Sprintf("many writers (git user, writer, forge; %s)", dur)
	rng := scenarioRand(t, name)
	start := time.Now()
	w := newWorld(t, worldOpts{remote: true})
	w.write("areas/shared.html", "shared\n")
	w.git("add", "-A")
	w.git("-c", "user.name=seed", "-c", "user.email=seed@example.invalid", "commit", "-q", "-m", "seed")
	w.git("push", "-q", "origin", "main")
	b := filepath.Join(w.home, "clone-b")
	c := filepath.Join(w.home, "clone-c")
	w.gitIn(w.home, "clone", "-q", w.bare, b)
	w.gitIn(w.home, "clone", "-q", w.bare, c)
	for _, dir := range []string{w.repo, c} {
		w.gitIn(dir, "config", "user.name", "A Person")
		w.gitIn(dir, "config", "user.email", "person@example.invalid")
	}
	da := w.start()
	db := w.start("--repo", b)

	mw := &manyWriters{w: w, want: map[string]string{}}
	installMemhtml(mw)
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	seeds := []uint64{rng.Uint64(), rng.Uint64(), rng.Uint64(), rng.Uint64()}
	wg.Add(4)
	go func() { defer wg.Done(); mw.person(rand.New(rand.NewPCG(seeds[0], 1)), stop) }()
	go func() { defer wg.Done(); mw.fileWriter(b, rand.New(rand.NewPCG(seeds[1], 2)), stop) }()
	go func() { defer wg.Done(); mw.forge(c, rand.New(rand.NewPCG(seeds[2], 3)), stop) }()
	go func() { defer wg.Done(); mw.memhtmlAgent(b, rand.New(rand.NewPCG(seeds[3], 4)), stop) }()
	wg.Wait()

	var problems []string
	// A settled, then B's last push (memhtml's merge near the end) moves the remote again:
	// both are settled once a pass finds them so with the remote unmoved.
	for deadline := time.Now().Add(2 * settleTimeout); ; {
		problems = problems[:0]
		before := w.remoteHead()
		for _, dir := range []string{w.repo, b} {
			ok, last := (&world{t: t, home: w.home, repo: dir, bare: w.bare, env: w.env}).settled(settleTimeout)
			if !ok {
				problems = append(problems, dir+": not settled: "+last)
			}
		}
		if w.remoteHead() == before || !time.Now().Before(deadline) {
			break
		}
	}
	if len(problems) > 0 {
		t.Logf("not settled; the daemons' logs:%s%s", da.Describe(), db.Describe())
	}
	heads := map[string]string{"A": w.rev(w.repo, "HEAD"), "B": w.rev(b, "HEAD"), "remote": w.remoteHead()}
	if heads["A"] != heads["remote"] || heads["B"] != heads["remote"] {
		problems = append(problems, fmt.Sprintf("heads differ: %v", heads))
	}
	if out := strings.TrimSpace(w.gitIn(w.repo, "stash", "list")); out != "" {
		problems = append(problems, "clone A: the person's stash was left: "+out)
	}
	for _, f := range mw.popFailures {
		problems = append(problems, "clone A: git stash pop failed: "+f)
	}
	found, more := mw.verify()
	problems = append(problems, more...)
	mhFound, more := mw.verifyMemhtml()
	problems = append(problems, more...)
	for _, d := range []string{w.repo, b, w.bare} {
		if f := w.fsck(d); f != "" {
			problems = append(problems, d+": fsck: "+f)
		}
	}
	if code := da.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd on A: SIGTERM: exit %d", code))
	}
	if code := db.Stop(); code != 0 {
		problems = append(problems, fmt.Sprintf("memd on B: SIGTERM: exit %d", code))
	}
	record(t, row{Scenario: name, Iterations: mw.ops, Writes: len(mw.want) + len(mw.mhs.titles), Found: found + mhFound, Corruptions: len(problems),
		Time: time.Since(start), Note: fmt.Sprintf("%d branch switches, %d conflicted merges, %d amends, %d stashes (%d pops refused), %d pull --rebase, %d forge pushes; %d of the person's git commands refused for a held index.lock (retried); memhtml on B: %d writes (%d failed), %d sleep runs (%d refused), %d merges accepted (%d refused)",
			mw.count["switch"], mw.count["conflict"], mw.count["amend"], mw.count["stash"], len(mw.popFailures), mw.count["pull"], mw.count["forge"], mw.lockRetries,
			mw.mhs.writes, mw.mhs.writeFails, mw.mhs.runs, mw.mhs.runsRefused, mw.mhs.merges, mw.mhs.mergesRefused)})
	if len(mw.mhs.refusals) > 0 {
		t.Logf("memhtml refusals: %q", mw.mhs.refusals)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// manyWriters is the run's record: the final content each writer gave each path.
type manyWriters struct {
	w        *world
	mu       sync.Mutex
	want     map[string]string // path → final content
	unmerged []string          // files committed only on branches never merged
	ops      int
	count    map[string]int
	// lockRetries counts the person's git commands refused for a held index.lock.
	lockRetries int
	popFailures []string // `git stash pop` refused: memd moved HEAD during the stash
	mh          testutil.Memhtml
	mhs         mhStats    // memhtml on clone B (manywriters_memhtml_test.go)
	bMu         sync.Mutex // clone B's agent does one thing at a time: a write or a sleep
}

func (m *manyWriters) put(dir, rel, content string) {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	must(m.w.t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(m.w.t, os.WriteFile(p, []byte(content), 0o644))
	m.mu.Lock()
	m.want[rel] = content
	m.mu.Unlock()
}

func (m *manyWriters) note(op string) {
	m.mu.Lock()
	if m.count == nil {
		m.count = map[string]int{}
	}
	m.count[op]++
	m.ops++
	m.mu.Unlock()
}

// git runs the person's git in dir; a failure is returned (a race with memd's own commit is
// the person's to handle, as it is for a person). "Unable to create '.git/index.lock'" (memd's
// index refresh holds it for a rename, or memd's own git status) is retried, as git's message
// tells a person to.
func (m *manyWriters) git(dir string, args ...string) (string, error) {
	out, retries, err := testutil.Git{Env: m.w.env}.RunAsPerson(dir, []string{"GIT_EDITOR=true"}, args...)
	m.mu.Lock()
	m.lockRetries += retries
	m.mu.Unlock()
	return out, err
}

// commit is `git add rel && git commit rel`, where memd may have committed the change
// first. Only rel: on a branch, `add -A` would take the person's other uncommitted edits
// (the ones memd has not committed yet) onto that branch, as git does, and a branch never
// merged would then hold them and main not.
func (m *manyWriters) commit(dir, msg, rel string) {
	if _, err := m.git(dir, "add", "--", rel); err != nil {
		return
	}
	_, _ = m.git(dir, "commit", "-q", "--allow-empty", "-m", msg, "--", rel)
}

// person is clone A's user: one plain-git operation every 0.3–1.5 s.
func (m *manyWriters) person(rng *rand.Rand, stop time.Time) {
	dir := m.w.repo
	for i := 0; time.Now().Before(stop); i++ {
		time.Sleep(300*time.Millisecond + time.Duration(rng.Int64N(int64(1200*time.Millisecond))))
		switch op := rng.IntN(6); op {
		case 0: // a branch of its own, committed there, merged or left
			br := fmt.Sprintf("topic-%d", i)
			if _, err := m.git(dir, "checkout", "-q", "-b", br); err != nil {
				continue
			}
			rel := fmt.Sprintf("areas/person/branch-%d.html", i)
			m.put(dir, rel, fmt.Sprintf("on %s\n", br))
			time.Sleep(400 * time.Millisecond) // the person works on the branch a while
			m.commit(dir, "on "+br, rel)
			_, _ = m.git(dir, "checkout", "-q", "main")
			if rng.IntN(2) == 0 {
				if _, err := m.git(dir, "merge", "-q", "--no-edit", br); err != nil {
					m.abortMerge(dir)
					m.forget(rel)
				}
			} else {
				m.forget(rel)
				m.mu.Lock()
				m.unmerged = append(m.unmerged, rel)
				m.mu.Unlock()
			}
			m.note("switch")
		case 1: // a merge that stops on a conflict, resolved by hand
			m.conflictedMerge(dir, i)
		case 2: // amend
			rel := fmt.Sprintf("areas/person/amend-%d.html", i)
			m.put(dir, rel, "first\n")
			m.commit(dir, "amend me", rel)
			m.put(dir, rel, "amended\n")
			_, _ = m.git(dir, "add", "--", rel)
			_, _ = m.git(dir, "commit", "-q", "--amend", "--no-edit")
			m.note("amend")
		case 3: // stash and pop
			rel := fmt.Sprintf("areas/person/stash-%d.html", i)
			m.put(dir, rel, "stashed\n")
			if out, err := m.git(dir, "stash", "push", "-q", "-u"); err != nil || strings.Contains(out, "No local changes") {
				m.note("stash")
				continue
			}
			if out, err := m.git(dir, "stash", "pop", "-q"); err != nil {
				// memd wrote the tree during the stash (a file it committed or checked out
				// meanwhile: "already exists, no checkout"; docs/RELIABILITY.md, many
				// writers): a problem of memd's, counted; the person then takes what the
				// stash holds and drops it, so the run goes on.
				m.mu.Lock()
				m.popFailures = append(m.popFailures, fmt.Sprintf("%s: %v %s", rel, err, strings.TrimSpace(out)))
				m.mu.Unlock()
				_, _ = m.git(dir, "checkout", "stash@{0}", "--", ".")
				_, _ = m.git(dir, "checkout", "stash@{0}^3", "--", ".")
				_, _ = m.git(dir, "stash", "drop", "-q")
			}
			m.note("stash")
		case 4:
			if _, err := m.git(dir, "pull", "-q", "--rebase", "origin", "main"); err != nil {
				_, _ = m.git(dir, "rebase", "--abort")
			}
			m.note("pull")
		default: // a plain edit
			m.put(dir, fmt.Sprintf("areas/person/edit-%d.html", rng.IntN(20)), fmt.Sprintf("edit %d\n", i))
		}
	}
	// The person ends on main with nothing in progress.
	_, _ = m.git(dir, "checkout", "-q", "main")
}

// conflictedMerge: a branch and main edit one file differently; the merge stops on the
// conflict and the person writes the resolution and commits it.
func (m *manyWriters) conflictedMerge(dir string, i int) {
	br := fmt.Sprintf("clash-%d", i)
	rel := fmt.Sprintf("areas/person/clash-%d.html", i)
	m.put(dir, rel, "base\n")
	m.commit(dir, "clash base", rel)
	if _, err := m.git(dir, "checkout", "-q", "-b", br); err != nil {
		return
	}
	m.put(dir, rel, "branch side\n")
	m.commit(dir, "branch side", rel)
	_, _ = m.git(dir, "checkout", "-q", "main")
	m.put(dir, rel, "main side\n")
	m.commit(dir, "main side", rel)
	if _, err := m.git(dir, "merge", "-q", "--no-edit", br); err == nil {
		m.note("conflict") // memd merged first or git resolved it: nothing stopped
		return
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "MERGE_HEAD")); err != nil {
		m.abortMerge(dir)
		return
	}
	time.Sleep(300 * time.Millisecond) // the person reads the markers: memd must wait
	m.put(dir, rel, "main side\nbranch side\n")
	_, _ = m.git(dir, "add", "-A")
	if _, err := m.git(dir, "commit", "-q", "--no-edit"); err != nil {
		m.abortMerge(dir)
	}
	m.note("conflict")
}

func (m *manyWriters) abortMerge(dir string) {
	if _, err := os.Stat(filepath.Join(dir, ".git", "MERGE_HEAD")); err == nil {
		_, _ = m.git(dir, "merge", "--abort")
	}
}

func (m *manyWriters) forget(rel string) {
	m.mu.Lock()
	delete(m.want, rel)
	m.mu.Unlock()
}

// fileWriter is clone B's writer of memory files: one new file every 0.2–1 s.
func (m *manyWriters) fileWriter(dir string, rng *rand.Rand, stop time.Time) {
	for i := 0; time.Now().Before(stop); i++ {
		time.Sleep(200*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond))))
		m.bMu.Lock() // not while memhtml's sleep waits for a clean tree and runs
		m.put(dir, fmt.Sprintf("resources/writer/%04d.html", i), fmt.Sprintf("writer %d\n", i))
		m.bMu.Unlock()
		m.note("write")
	}
}

// forge is clone C: a web editor's commit pushed straight to the remote every 1–4 s.
func (m *manyWriters) forge(dir string, rng *rand.Rand, stop time.Time) {
	for i := 0; time.Now().Before(stop); i++ {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(3*time.Second))))
		_, _ = m.git(dir, "pull", "-q", "--rebase", "origin", "main")
		rel := fmt.Sprintf("areas/forge/%04d.html", i)
		m.put(dir, rel, fmt.Sprintf("forge %d\n", i))
		m.commit(dir, "web edit", rel)
		pushed := false
		for try := 0; try < 5 && !pushed; try++ {
			if _, err := m.git(dir, "push", "-q", "origin", "main"); err == nil {
				pushed = true
				break
			}
			_, _ = m.git(dir, "pull", "-q", "--rebase", "origin", "main")
		}
		if !pushed {
			m.forget(rel) // never left clone C: not the others' to have
			continue
		}
		m.note("forge")
	}
}

// verify checks the remote's main: every write there with its final content (or in a
// conflict copy beside it), no unmerged branch's file in main's history, no conflict markers
// in any commit.
func (m *manyWriters) verify() (found int, problems []string) {
	w := m.w
	paths := make([]string, 0, len(m.want))
	for p := range m.want {
		paths = append(paths, p)
	}
	specs := make([]string, len(paths))
	for i, p := range paths {
		specs[i] = "refs/heads/main:" + p
	}
	got := w.blobs(w.bare, specs)
	tree := w.gitIn(w.bare, "ls-tree", "-r", "--name-only", "refs/heads/main")
	for i, p := range paths {
		if got[specs[i]] == m.want[p] {
			found++
			continue
		}
		if inCopy(w, tree, p, m.want[p]) {
			found++
			continue
		}
		problems = append(problems, fmt.Sprintf("lost: %s (want %q, remote has %q)", p, m.want[p], got[specs[i]]))
	}
	for _, rel := range m.unmerged {
		if out := strings.TrimSpace(w.gitIn(w.bare, "log", "--format=%h %s", "refs/heads/main", "--", rel)); out != "" {
			problems = append(problems, fmt.Sprintf("%s, committed only on a branch never merged, is in main's history: %s", rel, out))
		}
	}
	for _, c := range strings.Fields(w.gitIn(w.bare, "rev-list", "refs/heads/main")) {
		if out, _ := w.gitRun(w.bare, nil, "grep", "-l", "-E", "-e", "^(<<<<<<<|>>>>>>>) ", c); strings.TrimSpace(out) != "" {
			problems = append(problems, fmt.Sprintf("commit %s holds conflict markers: %s", c, strings.TrimSpace(out)))
		}
	}
	return found, problems
}

// inCopy: a conflict copy of rel on the remote's main holds want.
func inCopy(w *world, tree, rel, want string) bool {
	ext := filepath.Ext(rel)
	stem := strings.TrimSuffix(rel, ext) + ".conflict-"
	for _, p := range strings.Split(tree, "\n") {
		if strings.HasPrefix(p, stem) && strings.HasSuffix(p, ext) {
			if w.blobs(w.bare, []string{"refs/heads/main:" + p})["refs/heads/main:"+p] == want {
				return true
			}
		}
	}
	return false
}
