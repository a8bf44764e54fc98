package reliability

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitstore"
)

// swarmConfig is issue 13's team setting: quick debounce, a pull every second, no sleep.
const swarmConfig = `watch: {quiet: 300ms, max_delay: 3s}
http: {listen: "127.0.0.1:0"}
sync: {pull_interval: 1s, timeout: 10s}
sleep: {catch_up: false}
log: {level: debug}
`

// swarmShared is how many memories every machine edits.
const swarmShared = 3

// TestReliabilitySwarm: N clones of one bare remote, a `memd run` on each, and on each a
// writer that takes no lock (as editors and agents write) doing, every 50–600 ms: new
// memory files, edits and deletes of its own files, edits of the shared memories, appends
// of records with unique ids to memory.jsonl. After the writers stop, every clone and the
// remote reach one HEAD with clean trees, and no write is lost (see swarmWorld.verify).
// N=4 for 20 s in the default run (make test), N=10 for 60 s under MEMD_RELIABILITY=long
// (make reliability); MEMD_SWARM_N and MEMD_SWARM_FOR set N and the duration
// (bench/run.sh). The ledger appends are what found finding 11 of docs/RELIABILITY.md (an
// append into the version the checkout replaced; fixed, TestAppendIntoReplacedLedger in
// sync/ is its deterministic form).
func TestReliabilitySwarm(t *testing.T) {
	t.Parallel()
	n, dur := 4, 20*time.Second
	if isLong() {
		n, dur = 10, 60*time.Second
	}
	if v := os.Getenv("MEMD_SWARM_N"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 2 {
			t.Fatalf("MEMD_SWARM_N=%q: want an integer >= 2", v)
		}
		n = k
	}
	if v := os.Getenv("MEMD_SWARM_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("MEMD_SWARM_FOR=%q: want a positive duration", v)
		}
		dur = d
	}
	name := fmt.Sprintf("swarm (%d machines, %s, lock-free writers)", n, dur)
	rng := scenarioRand(t, name)
	s := newSwarm(t, n)
	start := time.Now()
	for _, m := range s.machines {
		m.d = s.w.spawnArgs(nil, []string{"run", "--config", s.w.config, "--repo", m.dir})
	}
	for _, m := range s.machines {
		m.d.WaitRunning()
	}
	// Every machine writes for dur, each with its own seeded stream.
	var wg sync.WaitGroup
	stop := time.Now().Add(dur)
	for _, m := range s.machines {
		wg.Add(1)
		go func(m *machine, seed uint64) {
			defer wg.Done()
			m.write(rand.New(rand.NewPCG(seed, uint64(m.id))), stop, s)
		}(m, rng.Uint64())
	}
	wg.Wait()
	lastWrite := s.lastWrite()
	writes := s.writes()
	timeout := 2 * time.Minute
	var why string
	converged := testutil.Poll(timeout, func() bool { ok, w := s.converged(); why = w; return ok })
	convergedIn := time.Since(lastWrite)
	// The instants, for bench/swarmlog's -since and a look at where the time went.
	t.Logf("last write at %s; one HEAD at %s", lastWrite.UTC().Format(time.RFC3339Nano), time.Now().UTC().Format(time.RFC3339Nano))
	if !converged {
		t.Fatalf("no single HEAD with clean trees %s after the last write: %s%s", timeout, why, s.describe())
	}
	fig := s.figures(time.Since(start))
	problems := s.verify()
	for _, m := range s.machines {
		if code := m.d.Stop(); code != 0 {
			problems = append(problems, fmt.Sprintf("machine %d: SIGTERM: exit %d", m.id, code))
		}
		if dir := os.Getenv("MEMD_SWARM_LOGS"); dir != "" {
			// Each daemon's whole (debug) log, for a look at where the time went.
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("machine-%d.log", m.id)), []byte(m.d.Logs()), 0o644))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%d problems:\n%s%s", len(problems), strings.Join(problems, "\n"), s.describe())
	}
	// One line bench/run.sh reads (bench/RESULTS.md, swarm row).
	fmt.Printf("swarm figures: machines=%d writes=%d lost=%d converge_s=%.1f push_attempts_per_commit=%.2f lock_held_share=%.4f commits=%d\n",
		n, writes, s.lost, convergedIn.Seconds(), fig.pushPerCommit, fig.lockShare, fig.commits)
	record(t, row{Scenario: name, Iterations: 1, Writes: writes, Found: writes - s.lost, Corruptions: len(problems),
		Time: time.Since(start), Note: fmt.Sprintf("one HEAD %.1fs after the last write; %.2f push attempts per commit; writer lock held %.1f%% of the time",
			convergedIn.Seconds(), fig.pushPerCommit, 100*fig.lockShare)})
}

type swarmWorld struct {
	t        *testing.T
	w        *world // the home, the bare remote, the config; machine 0's repo is w.repo
	machines []*machine

	mu     sync.Mutex
	shared []sharedWrite // every shared-memory write, in no particular order
	lost   int
}

// machine is one clone with its daemon and its writer's record.
type machine struct {
	id  int
	dir string
	d   *testutil.Daemon

	// owned by the writer goroutine until it ends
	files   map[string]string // own path → last content ("" = deleted)
	order   []string          // own paths in creation order
	ledger  []string          // ids appended
	nWrites int
	last    time.Time
	seq     int
}

// sharedWrite is one write of a shared memory: what the writer read just before, and
// what it wrote. A version that no later write read was overwritten by nobody who saw
// it: it must survive, at its path or in a conflict copy beside it.
type sharedWrite struct {
	path, read, wrote string
}

func newSwarm(t *testing.T, n int) *swarmWorld {
	t.Helper()
	w := newWorld(t, worldOpts{remote: true, config: swarmConfig})
	// The shared memories and the ledger exist before the clones are made.
	for j := 0; j < swarmShared; j++ {
		w.write(sharedPath(j), sharedContent(j, "seed", 0))
	}
	w.write("memory.jsonl", ledgerRecord("swarm-seed"))
	w.git("add", "-A")
	w.git("-c", "user.name=seed", "-c", "user.email=seed@example.invalid", "commit", "-q", "-m", "swarm seed")
	w.git("push", "-q", "origin", "main")
	s := &swarmWorld{t: t, w: w}
	for i := 0; i < n; i++ {
		m := &machine{id: i, dir: w.repo, files: map[string]string{}}
		if i > 0 {
			m.dir = filepath.Join(w.home, fmt.Sprintf("clone-%d", i))
			w.gitIn(w.home, "clone", "-q", w.bare, m.dir)
		}
		s.machines = append(s.machines, m)
	}
	return s
}

func sharedPath(j int) string { return fmt.Sprintf("areas/shared-%d.html", j) }

func sharedContent(j int, who string, v int) string {
	return fmt.Sprintf("<!doctype html><title>shared %d</title><article><p>shared %d version %s-%d</p></article>\n", j, j, who, v)
}

func ledgerRecord(id string) string {
	return fmt.Sprintf(`{"id":%q,"type":"note","mode":"persistent","text":"swarm record %s","createdAt":"2026-01-01T00:00:00Z"}`+"\n", id, id)
}

// write is machine m's writer until stop: one operation every 50–600 ms, no lock.
func (m *machine) write(rng *rand.Rand, stop time.Time, s *swarmWorld) {
	t := s.t
	for time.Now().Before(stop) {
		time.Sleep(50*time.Millisecond + time.Duration(rng.Int64N(int64(550*time.Millisecond))))
		m.seq++
		live := m.live()
		switch op := rng.IntN(10); {
		case op < 2 || len(live) == 0: // a new memory
			rel := fmt.Sprintf("resources/swarm-m%d/f%03d.html", m.id, len(m.order))
			m.order = append(m.order, rel)
			m.put(t, rel, m.fileContent(rel), rng.IntN(2) == 0)
		case op < 4: // an edit of an own memory
			rel := live[rng.IntN(len(live))]
			m.put(t, rel, m.fileContent(rel), rng.IntN(2) == 0)
		case op < 5: // a delete of an own memory
			rel := live[rng.IntN(len(live))]
			if err := os.Remove(filepath.Join(m.dir, filepath.FromSlash(rel))); err != nil {
				t.Errorf("machine %d: delete %s: %v", m.id, rel, err)
			}
			m.files[rel] = ""
		case op < 7: // an edit of a shared memory, read just before
			j := rng.IntN(swarmShared)
			p := filepath.Join(m.dir, filepath.FromSlash(sharedPath(j)))
			read, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("machine %d: read %s: %v", m.id, sharedPath(j), err)
				continue
			}
			c := sharedContent(j, fmt.Sprintf("m%d", m.id), m.seq)
			m.put(t, sharedPath(j), c, rng.IntN(2) == 0)
			s.mu.Lock()
			s.shared = append(s.shared, sharedWrite{path: sharedPath(j), read: string(read), wrote: c})
			s.mu.Unlock()
		default: // a ledger record with a unique id, appended as agents append
			id := fmt.Sprintf("swarm-m%d-%d", m.id, m.seq)
			f, err := os.OpenFile(filepath.Join(m.dir, "memory.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err == nil {
				_, err = f.WriteString(ledgerRecord(id))
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				t.Errorf("machine %d: append %s: %v", m.id, id, err)
				continue
			}
			m.ledger = append(m.ledger, id)
		}
		m.nWrites++
		m.last = time.Now()
	}
}

func (m *machine) live() []string {
	var out []string
	for _, rel := range m.order {
		if m.files[rel] != "" {
			out = append(out, rel)
		}
	}
	return out
}

func (m *machine) fileContent(rel string) string {
	return fmt.Sprintf("<!doctype html><title>%s</title><article><p>machine %d write %d of %s</p></article>\n", rel, m.id, m.seq, rel)
}

// put writes rel in place (as most editors do) or by rename (as careful agents do).
func (m *machine) put(t *testing.T, rel, content string, rename bool) {
	p := filepath.Join(m.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Errorf("machine %d: %v", m.id, err)
		return
	}
	var err error
	if rename {
		tmp := filepath.Join(filepath.Dir(p), fmt.Sprintf(".%s.swarm-%d.tmp", filepath.Base(p), m.seq))
		if err = os.WriteFile(tmp, []byte(content), 0o644); err == nil {
			err = os.Rename(tmp, p)
		}
	} else {
		err = os.WriteFile(p, []byte(content), 0o644)
	}
	if err != nil {
		t.Errorf("machine %d: write %s: %v", m.id, rel, err)
		return
	}
	if !strings.HasPrefix(rel, "areas/shared-") {
		m.files[rel] = content
	}
}

func (s *swarmWorld) lastWrite() time.Time {
	var last time.Time
	for _, m := range s.machines {
		if m.last.After(last) {
			last = m.last
		}
	}
	return last
}

func (s *swarmWorld) writes() int {
	n := 0
	for _, m := range s.machines {
		n += m.nWrites
	}
	return n
}

// converged: every clone's HEAD is the remote's main and every work tree is HEAD.
func (s *swarmWorld) converged() (bool, string) {
	// The refs are read from their files first: this poll runs every 25 ms while the swarm
	// converges, and two git processes per look took 6% of the CPU the daemons were being
	// timed on (perf, bench/RESULTS.md). git answers once the files agree.
	if ok, why := s.refsAgree(); !ok {
		return false, why
	}
	remote := s.w.remoteHead()
	for _, m := range s.machines {
		if h := s.w.rev(m.dir, "HEAD"); h != remote {
			return false, fmt.Sprintf("machine %d at %.10s, remote at %.10s", m.id, h, remote)
		}
	}
	for _, m := range s.machines {
		diff, err := testutil.Git{Env: s.w.env}.TreeDiff(m.dir, s.w.home)
		if err != nil {
			return false, err.Error()
		}
		if diff != "" {
			return false, fmt.Sprintf("machine %d: work tree differs from HEAD:\n%s", m.id, diff)
		}
	}
	return true, ""
}

// refsAgree: every clone's HEAD names the commit the remote's main does, read from the ref
// files (a loose ref or packed-refs) without starting git.
func (s *swarmWorld) refsAgree() (bool, string) {
	remote, err := gitstore.ReadRef(s.w.bare, "refs/heads/main")
	if err != nil {
		return false, err.Error()
	}
	for _, m := range s.machines {
		h, err := gitstore.ReadRef(filepath.Join(m.dir, ".git"), "HEAD")
		if err != nil {
			return false, fmt.Sprintf("machine %d: %v", m.id, err)
		}
		if h != remote {
			return false, fmt.Sprintf("machine %d at %.10s, remote at %.10s", m.id, h, remote)
		}
	}
	return true, ""
}

type swarmFigures struct {
	pushPerCommit, lockShare float64
	commits                  int
}

// figures reads the daemons' counters: push attempts per commit memd made (change and
// merge commits) and the share of the run each daemon held the writer lock.
func (s *swarmWorld) figures(run time.Duration) swarmFigures {
	var pushes, commits, held float64
	for _, m := range s.machines {
		p, _ := m.d.Metric("memd_push_attempts_total")
		c, _ := m.d.Metric(`memd_commits_total{kind="change"}`)
		g, _ := m.d.Metric(`memd_commits_total{kind="merge"}`)
		h, _ := m.d.Metric("memd_writer_lock_held_seconds_total")
		pushes, commits, held = pushes+p, commits+c+g, held+h
	}
	f := swarmFigures{commits: int(commits), lockShare: held / (run.Seconds() * float64(len(s.machines)))}
	if commits > 0 {
		f.pushPerCommit = pushes / commits
	}
	return f
}

// verify checks the converged state (the remote's main, which every clone has):
// own files hold their last content and deleted ones are absent; every shared version
// nobody overwrote after reading it is at its path or in a conflict copy beside it; every
// ledger id is there exactly once; no conflict marker; git fsck clean everywhere. A lost
// write names the commit that added it and the one that dropped it.
func (s *swarmWorld) verify() []string {
	w := s.w
	var problems []string
	head := w.remoteHead()
	tree := map[string]bool{}
	for _, p := range strings.Split(strings.TrimSpace(w.gitIn(w.bare, "ls-tree", "-r", "--name-only", head)), "\n") {
		tree[p] = true
	}
	var specs []string
	for p := range tree {
		specs = append(specs, head+":"+p)
	}
	blobs := w.blobs(w.bare, specs)
	at := func(p string) (string, bool) { c, ok := blobs[head+":"+p]; return c, ok }
	lostWrite := func(what, token string) {
		s.lost++
		problems = append(problems, fmt.Sprintf("lost: %s\n%s", what, s.pickaxe(token)))
	}
	for _, m := range s.machines {
		for _, rel := range m.order {
			want := m.files[rel]
			got, ok := at(rel)
			switch {
			case want == "" && ok:
				problems = append(problems, fmt.Sprintf("machine %d deleted %s; it is back: %.80q", m.id, rel, got))
			case want != "" && !ok:
				lostWrite(fmt.Sprintf("machine %d's %s is absent (last write %.80q)", m.id, rel, want), want[strings.Index(want, "<p>")+3:])
			case want != "" && got != want:
				lostWrite(fmt.Sprintf("machine %d's %s holds %.80q, not its last write %.80q", m.id, rel, got, want), want[strings.Index(want, "<p>")+3:])
			}
		}
	}
	read := map[string]bool{}
	for _, sw := range s.shared {
		read[sw.read] = true
	}
	for _, sw := range s.shared {
		if read[sw.wrote] {
			continue // someone saw it and wrote over it
		}
		stem := strings.TrimSuffix(sw.path, ".html")
		found := false
		for p := range tree {
			if (p == sw.path || strings.HasPrefix(p, stem+".conflict-")) && blobs[head+":"+p] == sw.wrote {
				found = true
				break
			}
		}
		if !found {
			lostWrite(fmt.Sprintf("shared version %.80q (never read by a later write) is neither at %s nor in a conflict copy beside it", sw.wrote, sw.path),
				sw.wrote[strings.Index(sw.wrote, "version "):strings.Index(sw.wrote, "</p>")])
		}
	}
	ledger, _ := at("memory.jsonl")
	for _, m := range s.machines {
		for _, id := range m.ledger {
			switch c := strings.Count(ledger, fmt.Sprintf(`"id":%q`, id)); {
			case c == 0:
				lostWrite("ledger record "+id, fmt.Sprintf(`"id":%q`, id))
			case c > 1:
				problems = append(problems, fmt.Sprintf("ledger record %s is there %d times", id, c))
			}
		}
	}
	for _, m := range s.machines {
		// The remote always answered: losing push races is contention, never offline.
		if m.d == nil {
			continue // the checker's own test has no daemons
		}
		if l := m.d.Logs(); strings.Contains(l, "state=offline") {
			i := strings.Index(l, "state=offline")
			problems = append(problems, fmt.Sprintf("machine %d went offline although the remote answered: …%s…", m.id, l[max(0, i-200):min(len(l), i+200)]))
		}
	}
	if ms := w.conflictMarkers(); len(ms) > 0 {
		problems = append(problems, "conflict markers in "+strings.Join(ms, ", "))
	}
	// receive-pack's `git gc --auto` may be repacking the remote in the background after
	// the last pushes (gc.pid while it runs): fsck reads a quiet repository, as a remote's
	// own checks would.
	testutil.Poll(2*time.Minute, func() bool {
		_, err := os.Stat(filepath.Join(w.bare, "gc.pid"))
		return os.IsNotExist(err)
	})
	if f := w.fsck(w.bare); f != "" {
		problems = append(problems, "fsck remote: "+f)
	}
	for _, m := range s.machines {
		if f := w.fsck(m.dir); f != "" {
			problems = append(problems, fmt.Sprintf("fsck machine %d: %s", m.id, f))
		}
	}
	sort.Strings(problems)
	return problems
}

// pickaxe names the commits of the remote's history whose diff adds or removes token
// (git log -S): the first adds the write, a later one drops it.
func (s *swarmWorld) pickaxe(token string) string {
	out, err := s.w.gitRun(s.w.bare, nil, "log", "--reverse", "--format=  %h %p %s (%an, %ad)", "--date=iso", "-S", token, "main")
	if err != nil {
		return "  git log -S: " + err.Error()
	}
	if strings.TrimSpace(out) == "" {
		return "  no commit in the remote's history ever held it"
	}
	return "  commits that added / dropped it (oldest first; hash, parents, subject):\n" + out
}

// describe is the tail of every daemon's log (the whole of ten would drown the failure).
func (s *swarmWorld) describe() string {
	var b strings.Builder
	for _, m := range s.machines {
		l := strings.Split(strings.TrimSpace(m.d.Logs()), "\n")
		if len(l) > 30 {
			l = l[len(l)-30:]
		}
		fmt.Fprintf(&b, "\n--- machine %d (%s), last log lines:\n%s\n", m.id, m.dir, strings.Join(l, "\n"))
	}
	return b.String()
}

// The swarm checker must be able to fail: a ledger record a later commit dropped, an own
// file whose last write is not what the remote holds, a deleted file that came back and a
// shared version nobody read that is nowhere are each reported, and a lost write names the
// commit that added it and the one that dropped it.
func TestSwarmCheckerCatchesLosses(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOpts{remote: true, config: swarmConfig})
	commit := func(msg string, files map[string]string) {
		for rel, c := range files {
			if c == "" {
				must(t, os.Remove(w.path(rel)))
				continue
			}
			w.write(rel, c)
		}
		w.git("add", "-A")
		w.git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", msg)
	}
	own, gone := "resources/swarm-m0/f000.html", "resources/swarm-m0/f001.html"
	commit("adds", map[string]string{"memory.jsonl": ledgerRecord("swarm-m0-1") + ledgerRecord("swarm-m0-2"),
		own: "machine 0 write 1\n", gone: "machine 0 write 2\n", sharedPath(0): sharedContent(0, "m0", 3)})
	commit("drops a record", map[string]string{"memory.jsonl": ledgerRecord("swarm-m0-2"), sharedPath(0): sharedContent(0, "m1", 4)})
	w.git("push", "-q", "origin", "main")
	s := &swarmWorld{t: t, w: w}
	m := &machine{id: 0, dir: w.repo, order: []string{own, gone},
		files:  map[string]string{own: "machine 0 write 5\n", gone: ""},
		ledger: []string{"swarm-m0-1", "swarm-m0-2"}}
	s.machines = []*machine{m}
	s.shared = []sharedWrite{
		{path: sharedPath(0), read: sharedContent(0, "seed", 0), wrote: sharedContent(0, "m0", 3)}, // nobody read it: lost
		{path: sharedPath(0), read: sharedContent(0, "seed", 0), wrote: sharedContent(0, "m1", 4)}, // at its path
	}
	problems := s.verify()
	text := strings.Join(problems, "\n")
	if s.lost != 3 || len(problems) != 4 {
		t.Fatalf("lost %d, %d problems; want 3 lost (record, own file, shared version) and the undeleted file:\n%s", s.lost, len(problems), text)
	}
	for _, want := range []string{"ledger record swarm-m0-1", "f000.html holds", "f001.html; it is back", "version m0-3", "adds", "drops a record"} {
		if !strings.Contains(text, want) {
			t.Errorf("problems do not mention %q:\n%s", want, text)
		}
	}
}
