// Package demo writes a realistic sample memory repo: memhtml memories over several
// years in the PARA layout, episodes that share entities so arcs form, tasks, an inbox,
// person files, both kinds of MEMORY.md and a memory.jsonl ledger with a note in every
// lifecycle state. It writes files only; committing them is the caller's business.
// Output is a pure function of the options: same Seed and Now, same bytes.
package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/scaffold"
	"github.com/memd-dev/memd/internal/safefs"
)

// DefaultMemories is the number of memories written when Options.Memories is 0.
const DefaultMemories = 300

// Options says what to generate.
type Options struct {
	Memories int       // memory files (.html) to write; 0 → DefaultMemories
	Now      time.Time // the present: dates spread from 2023 up to it; zero → time.Now()
	Seed     int64     // same seed and Now → identical bytes
	Remote   string    // unused here (the caller wires the remote)
}

// Stats counts what Generate wrote.
type Stats struct {
	Memories int // .html memory files
	Episodes int // episodic memories (date-prefixed)
	Tasks    int // task memories
	Inbox    int // memories under areas/inbox, its tasks folder included (memfile.InboxDepth)
	Notes    int // ledger records of type note
}

// fixedFiles are the non-memory files Generate writes.
var fixedFiles = []string{memd.MemoryMDName, memd.DefaultLedgerFile, "projects/checkout-api/MEMORY.md", "projects/checkout-api/history.md", "projects/payments/MEMORY.md"}

// ErrExists is wrapped when Generate would overwrite a file: it never does.
var ErrExists = errors.New("demo file already exists")

// Generate writes the sample repo into dir (created if missing). Files that already
// exist are never overwritten: Generate stops with an error wrapping ErrExists.
func Generate(dir string, opts Options) (Stats, error) {
	if opts.Memories < 0 {
		return Stats{}, fmt.Errorf("demo: Memories %d is negative", opts.Memories)
	}
	if opts.Memories == 0 {
		opts.Memories = DefaultMemories
	}
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	g := &gen{
		dir:    dir,
		now:    opts.Now.UTC(),
		n:      opts.Memories,
		rng:    rand.New(rand.NewPCG(uint64(opts.Seed), 0x6d656d64)),
		used:   make(map[string]bool, opts.Memories),
		hashes: make(map[[32]byte]bool, opts.Memories),
		next:   map[string]int{},
		dirs:   map[string]bool{},
		queued: map[string]bool{},
	}
	// dir is the user's choice; below it everything goes through safefs (a remote adopted by
	// `memd init --demo --remote` may have put links in the tree): no folder is made, and no
	// file created, beyond a symlink.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Stats{}, fmt.Errorf("demo: create %s: %w", dir, err)
	}
	tree, err := safefs.Open(dir)
	if err != nil {
		return Stats{}, fmt.Errorf("demo: %w", err)
	}
	defer tree.Close()
	g.tree = tree
	// The fixed files first: refuse before writing anything rather than halfway.
	for _, rel := range fixedFiles {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil {
			return Stats{}, fmt.Errorf("demo: %s: %w; refusing to overwrite", rel, ErrExists)
		}
	}
	g.startWriters()
	err = g.run()
	if werr := g.finish(); err == nil {
		err = werr
	}
	return g.stats, err
}

type person struct{ entity, name, role string }

var people = []person{
	{"person:Sanju Rao", "Sanju Rao", "the checkout-api tech lead"},
	{"person:Mei Chen", "Mei Chen", "the payments on-call lead"},
	{"person:Ola Nordmann", "Ola Nordmann", "the platform team's SRE"},
	{"person:Priya Nair", "Priya Nair", "the search team's product manager"},
}

type service struct{ entity, name, project string }

var services = []service{
	{"service:checkout-api", "checkout-api", "checkout-api"},
	{"service:payments-db", "payments-db", "payments"},
	{"service:search-indexer", "search-indexer", "search"},
}

var (
	otherEntities = []string{"project:memd", "tool:terraform", "team:platform"}
	areas         = []string{"oncall", "health", "hiring", "planning"}
	topics        = []string{"deploy", "postgres", "go", "kubernetes", "writing", "security"}
	tags          = []string{"deploy", "oncall", "postgres", "incident", "planning", "review", "perf", "security"}
)

// Anchors: the entities every year gets at least three episodes of, so arcs form.
var anchors = []string{"person:Sanju Rao", "service:checkout-api"}

type gen struct {
	tree   *safefs.Tree
	queued map[string]bool // folders (and their parents) a file was queued for
	dir    string
	now    time.Time
	n      int
	rng    *rand.Rand
	used   map[string]bool
	// hashes are the content hashes of the active memories written so far.
	hashes map[[32]byte]bool
	next   map[string]int // per base path: how many repeats were numbered
	dirs   map[string]bool
	stats  Stats
	buf    []byte
	index  []bullet

	jobs chan writeJob
	wg   sync.WaitGroup
	mu   sync.Mutex
	err  error // first write error
}

type bullet struct{ path, name, typ, subject, desc string }

// mem is one memory to render.
type mem struct {
	path, typ, status       string
	title, gist, body, more string
	created, updated        time.Time
	event                   time.Time // zero: no <time> in the article
	entities, tags          []string
	taskStatus, due         string
	validUntil              string
	confidence              string
	importance              int
	links                   []string // memhtml-supersedes hrefs
}

func (g *gen) run() error {
	today := time.Date(g.now.Year(), g.now.Month(), g.now.Day(), 0, 0, 0, 0, time.UTC)
	startYear := min(2023, g.now.Year())
	// The order is the random stream's: people, then anchor episodes, then the rest.
	written, err := g.writePeople(today)
	if err == nil {
		written, err = g.writeAnchors(written, startYear, today)
	}
	if err == nil {
		err = g.writeRest(written, time.Date(startYear, 1, 1, 0, 0, 0, 0, time.UTC), today)
	}
	if err != nil {
		return err
	}
	if err := g.writeIndex(); err != nil {
		return err
	}
	if err := g.writeProjectMD(); err != nil {
		return err
	}
	if err := g.writeLedger(today); err != nil {
		return err
	}
	return g.gitkeeps()
}

// writePeople writes the person files first (one each, while the budget allows).
func (g *gen) writePeople(today time.Time) (written int, err error) {
	for _, p := range people {
		if written >= g.n || written >= max(1, g.n/20) {
			break
		}
		if err := g.write(g.personMemory(p, today)); err != nil {
			return written, err
		}
		written++
	}
	return written, nil
}

// writeAnchors writes the anchor episodes: three per anchor entity per year, while they stay
// under a tenth of the budget (tiny demos get fewer arcs, never a lopsided repo).
func (g *gen) writeAnchors(written, startYear int, today time.Time) (int, error) {
	type slot struct {
		entity string
		year   int
	}
	var plan []slot
	for y := startYear; y <= g.now.Year(); y++ {
		for _, e := range anchors {
			for k := 0; k < 3; k++ {
				plan = append(plan, slot{e, y})
			}
		}
	}
	if len(plan) > (g.n-written)/3 {
		// Keep whole entity-years from the most recent backwards.
		keep := ((g.n - written) / 3 / 3) * 3
		plan = plan[len(plan)-keep:]
	}
	for _, s := range plan {
		if written >= g.n {
			break
		}
		from := time.Date(s.year, 1, 1, 0, 0, 0, 0, time.UTC)
		to := time.Date(s.year, 12, 31, 0, 0, 0, 0, time.UTC)
		if to.After(today) {
			to = today
		}
		if err := g.write(g.episode(g.dayIn(from, to), s.entity)); err != nil {
			return written, err
		}
		written++
	}
	return written, nil
}

// writeRest fills the budget with a mix of episodes, topical memories, tasks and the rest.
func (g *gen) writeRest(written int, first, today time.Time) error {
	for ; written < g.n; written++ {
		var m mem
		switch r := g.rng.IntN(100); {
		case r < 52:
			m = g.episode(g.dayIn(first, today), "")
		case r < 64:
			m = g.topical("semantic", first, today)
		case r < 72:
			m = g.topical("procedural", first, today)
		case r < 84:
			m = g.task(first, today)
		default:
			m = g.misc(first, today)
		}
		if err := g.write(m); err != nil {
			return err
		}
	}
	return nil
}

// ---- choosing ----

func (g *gen) pick(list []string) string { return list[g.rng.IntN(len(list))] }

func (g *gen) dayIn(from, to time.Time) time.Time {
	days := int(to.Sub(from).Hours()/24) + 1
	if days < 1 {
		days = 1
	}
	return from.AddDate(0, 0, g.rng.IntN(days))
}

// at is a working-hours instant on day d, never after now.
func (g *gen) at(d time.Time) time.Time {
	t := d.Add(time.Duration(8+g.rng.IntN(10))*time.Hour + time.Duration(g.rng.IntN(60))*time.Minute + time.Duration(g.rng.IntN(60))*time.Second)
	if t.After(g.now) {
		t = g.now.Truncate(time.Second)
	}
	return t
}

// later is t plus up to maxDays, never after now.
func (g *gen) later(t time.Time, maxDays int) time.Time {
	u := t.Add(time.Duration(g.rng.IntN(maxDays*24+1)) * time.Hour)
	if u.After(g.now) {
		u = g.now.Truncate(time.Second)
	}
	if u.Before(t) {
		u = t
	}
	return u
}

func nameOf(entity string) string {
	_, n, ok := strings.Cut(entity, ":")
	if !ok {
		return entity
	}
	return n
}

func (g *gen) randomPerson() person   { return people[g.rng.IntN(len(people))] }
func (g *gen) randomService() service { return services[g.rng.IntN(len(services))] }

// fill replaces {p} {s} {t} {a} in a template.
func fill(tpl string, p person, s service, topic, area string) string {
	r := strings.NewReplacer("{p}", p.name, "{s}", s.name, "{t}", topic, "{a}", area)
	return r.Replace(tpl)
}

var episodeTitles = []string{
	"Paired with {p} on the {s} rollback",
	"{s} latency spike during the evening peak",
	"Design review of the {s} retry policy with {p}",
	"Incident: {s} returned 500s after the config push",
	"{p} walked me through the {s} deploy pipeline",
	"Postmortem for the {s} outage",
	"Planning session with {p} on {t}",
	"Migrated {s} to the new connection pool",
	"{p} flagged a flaky {s} integration test",
	"Load test of {s} before the sale",
}

var episodeGists = []string{
	"Draining the VIP before reverting {s} kept in-flight requests alive.",
	"{s} p99 latency doubled when the connection pool hit its cap.",
	"{p} wants retries capped at three with jittered backoff for {s}.",
	"The {s} config push skipped the canary stage and broke checkout.",
	"{p} showed that {s} deploys wait for the schema check before rollout.",
	"The {s} outage came from an expired certificate on the internal load balancer.",
	"{p} and I agreed that {t} work starts after the freeze lifts.",
	"{s} now holds 40 pooled connections instead of 200 direct ones.",
	"The flaky {s} test depends on wall-clock time and fails near midnight UTC.",
	"{s} held 3x normal traffic with no errors once the cache was warm.",
}

var bodies = []string{
	"We checked the dashboards together and wrote the steps down",
	"The fix was small once the cause was clear",
	"It took two attempts to reproduce",
	"Nobody had written this down before",
	"The runbook now links here",
	"This matched what we saw last quarter",
}

var mores = []string{
	"Follow-up: add an alert so the next occurrence pages someone.",
	"Open question: whether the same applies to the staging cluster.",
	"The change shipped the same week and has held since.",
	"Worth rereading before the next on-call rotation.",
	"Related numbers are on the team dashboard.",
}

func (g *gen) episode(day time.Time, entity string) mem {
	p, s := g.randomPerson(), g.randomService()
	if entity == "" {
		// Most episodes are about an anchor, so arcs form at any size.
		switch r := g.rng.IntN(10); {
		case r < 3:
			entity = anchors[0]
		case r < 6:
			entity = anchors[1]
		case r < 8:
			entity = people[g.rng.IntN(len(people))].entity
		default:
			entity = services[g.rng.IntN(len(services))].entity
		}
	}
	for _, pp := range people {
		if pp.entity == entity {
			p = pp
		}
	}
	for _, ss := range services {
		if ss.entity == entity {
			s = ss
		}
	}
	topic, area := g.pick(topics), g.pick(areas)
	k := g.rng.IntN(len(episodeTitles))
	m := mem{
		typ:        "episodic",
		status:     memd.StatusActive,
		title:      fill(episodeTitles[k], p, s, topic, area),
		gist:       fill(episodeGists[k], p, s, topic, area),
		body:       g.pick(bodies),
		more:       g.pick(mores),
		event:      day,
		entities:   []string{entity},
		tags:       []string{g.pick(tags)},
		confidence: fmt.Sprintf("0.%d", 6+g.rng.IntN(4)),
		importance: 3 + g.rng.IntN(6),
	}
	// A second entity now and then, so entities overlap across arcs.
	if g.rng.IntN(3) == 0 {
		second := p.entity
		if second == entity {
			second = s.entity
		}
		m.entities = append(m.entities, second)
	}
	m.created = g.at(day)
	m.updated = g.later(m.created, 3)
	file := day.Format("20060102") + "-" + memd.Slug(m.title) + memd.MemoryExt
	switch r := g.rng.IntN(100); {
	case r < 8:
		m.path = memd.InboxDir + "/" + file
	case r < 30:
		m.path = string(memd.BucketAreas) + "/" + area + "/" + file
	default:
		m.path = memd.Place(memd.PlacementInput{MemoryType: "episodic", Workspace: s.project}) + "/" + file
	}
	return m
}

var topicalTitles = map[string][]string{
	"semantic": {
		"{s} owns the order state machine",
		"How {s} shards its data",
		"{t} conventions on this team",
		"What the {s} error budget covers",
	},
	"procedural": {
		"Rolling back {s} safely",
		"Rotating the {s} credentials",
		"Running the {t} checklist before a release",
		"Restoring {s} from a snapshot",
	},
}

var topicalGists = map[string][]string{
	"semantic": {
		"{s} is the only writer of order state; every other service reads it.",
		"{s} shards by customer id modulo 64, so hot customers share a shard.",
		"On this team {t} changes need one reviewer outside the author's squad.",
		"The {s} error budget counts 5xx responses and requests over two seconds.",
	},
	"procedural": {
		"To roll back {s}, drain the VIP first, then revert the deploy, then re-enable traffic.",
		"Rotate {s} credentials by adding the new key, deploying, then revoking the old one.",
		"Before a release, run the {t} checklist and attach it to the change ticket.",
		"Restore {s} from the latest snapshot into a scratch cluster before touching production.",
	},
}

func (g *gen) topical(typ string, first, today time.Time) mem {
	p, s := g.randomPerson(), g.randomService()
	topic, area := g.pick(topics), g.pick(areas)
	k := g.rng.IntN(len(topicalTitles[typ]))
	day := g.dayIn(first, today)
	m := mem{
		typ:        typ,
		status:     memd.StatusActive,
		title:      fill(topicalTitles[typ][k], p, s, topic, area),
		gist:       fill(topicalGists[typ][k], p, s, topic, area),
		body:       g.pick(bodies),
		more:       g.pick(mores),
		entities:   []string{s.entity},
		tags:       []string{topic, g.pick(tags)},
		confidence: fmt.Sprintf("0.%d", 7+g.rng.IntN(3)),
		importance: 4 + g.rng.IntN(6),
	}
	m.created = g.at(day)
	m.updated = g.later(m.created, 200)
	ws := ""
	if g.rng.IntN(4) == 0 {
		ws = s.project
	}
	switch r := g.rng.IntN(20); {
	case r == 0:
		// Expired long ago: the expire phase archives it.
		m.validUntil = m.updated.AddDate(0, 2, 0).Format("2006-01-02")
		if !m.updated.AddDate(0, 2, 0).Before(today.AddDate(0, 0, -30)) {
			m.validUntil = ""
		}
	case r == 1:
		m.validUntil = today.AddDate(0, 6, 0).Format("2006-01-02")
	case r == 2:
		m.status = memd.StatusArchived // outside archive/: the archive phase moves it
	}
	m.path = memd.Place(memd.PlacementInput{MemoryType: typ, Workspace: ws, Tags: m.tags}) + "/" + memd.Slug(m.title) + memd.MemoryExt
	// Some point at an earlier episode they generalise, so archive moves have links to fix.
	if len(g.index) > 0 && g.rng.IntN(3) == 0 {
		for i := len(g.index) - 1; i >= 0 && i >= len(g.index)-20; i-- {
			if b := g.index[i]; b.typ == "episodic" {
				m.links = append(m.links, memd.PathToHref(b.path))
				break
			}
		}
	}
	return m
}

var taskTitles = []string{
	"Add a drain step to the {s} rollback runbook",
	"Cap {s} retries at three",
	"Write the postmortem for the {s} outage",
	"Review {p}'s {t} proposal",
	"Move {s} alerts to the new pager schedule",
	"Delete the unused {s} feature flags",
}

var taskGists = []string{
	"The {s} rollback runbook tells the operator to drain the VIP before reverting.",
	"{s} never retries a request more than three times.",
	"The {s} outage postmortem is published with owners for each action item.",
	"{p}'s {t} proposal has written review comments from me.",
	"Every {s} alert routes to the new pager schedule.",
	"{s} has no feature flag that nothing reads.",
}

func (g *gen) task(first, today time.Time) mem {
	p, s := g.randomPerson(), g.randomService()
	topic := g.pick(topics)
	k := g.rng.IntN(len(taskTitles))
	day := g.dayIn(first, today)
	m := mem{
		typ:        memd.TypeTask,
		status:     memd.StatusActive,
		title:      fill(taskTitles[k], p, s, topic, ""),
		gist:       fill(taskGists[k], p, s, topic, ""),
		body:       "Done means exactly that, checked by someone else",
		more:       g.pick(mores),
		entities:   []string{s.entity},
		tags:       []string{g.pick(tags)},
		importance: 3 + g.rng.IntN(7),
	}
	m.created = g.at(day)
	switch r := g.rng.IntN(100); {
	case r < 30:
		m.taskStatus = "todo"
	case r < 45:
		m.taskStatus = "doing"
	case r < 55:
		m.taskStatus = "blocked"
	default:
		m.taskStatus = memd.TaskDone
	}
	if m.taskStatus == memd.TaskDone {
		m.updated = g.later(m.created, 20)
	} else {
		m.updated = g.later(m.created, 5)
		if g.rng.IntN(2) == 0 {
			m.due = g.later(m.updated, 40).Format("2006-01-02")
		}
	}
	ws := s.project
	if g.rng.IntN(5) == 0 {
		ws = "" // unplaced: areas/inbox/tasks
	}
	m.path = memd.Place(memd.PlacementInput{MemoryType: memd.TypeTask, Workspace: ws}) + "/" + memd.Slug(m.title) + memd.MemoryExt
	return m
}

var miscKinds = []struct{ typ, title, gist string }{
	{"agent_insight", "Agents misread the {s} health endpoint", "The {s} health endpoint returns 200 while degraded; read the body, not the status."},
	{"user_preference", "{p} prefers written design reviews", "{p} wants design reviews as a written doc a day ahead, not slides."},
	{"error_pattern", "{s} timeouts after pool exhaustion", "When {s} logs pool exhaustion, timeouts follow within a minute; restart does not help."},
	{"verdict", "Decision: keep {s} on Postgres", "We keep {s} on Postgres; the document store trial did not beat it on our workload."},
	{"precedent", "Precedent: freeze exceptions for {s}", "A freeze exception for {s} needs the on-call lead and the product owner to agree."},
}

func (g *gen) misc(first, today time.Time) mem {
	p, s := g.randomPerson(), g.randomService()
	topic := g.pick(topics)
	kind := miscKinds[g.rng.IntN(len(miscKinds))]
	day := g.dayIn(first, today)
	m := mem{
		typ:        kind.typ,
		status:     memd.StatusActive,
		title:      fill(kind.title, p, s, topic, ""),
		gist:       fill(kind.gist, p, s, topic, ""),
		body:       g.pick(bodies),
		more:       g.pick(mores),
		entities:   []string{s.entity},
		tags:       []string{topic},
		confidence: fmt.Sprintf("0.%d", 5+g.rng.IntN(5)),
		importance: 2 + g.rng.IntN(8),
	}
	if kind.typ == "user_preference" {
		m.entities = []string{p.entity}
	}
	if g.rng.IntN(4) == 0 {
		m.entities = append(m.entities, g.pick(otherEntities))
	}
	m.created = g.at(day)
	m.updated = g.later(m.created, 60)
	ws := ""
	if g.rng.IntN(2) == 0 {
		ws = s.project
	}
	m.path = memd.Place(memd.PlacementInput{MemoryType: kind.typ, Workspace: ws, Tags: m.tags, Entities: m.entities}) + "/" + memd.Slug(m.title) + memd.MemoryExt
	return m
}

func (g *gen) personMemory(p person, today time.Time) mem {
	start := time.Date(min(2023, today.Year()), 1, 1, 0, 0, 0, 0, time.UTC)
	m := mem{
		typ:        "semantic",
		status:     memd.StatusActive,
		title:      p.name,
		gist:       p.name + " is " + p.role + ".",
		body:       "Reach out on the team channel first; email for anything that needs a record",
		more:       "Works best with a written agenda.",
		entities:   []string{p.entity},
		tags:       []string{"people"},
		confidence: "0.9",
		importance: 7,
	}
	m.created = g.at(g.dayIn(start, start.AddDate(0, 2, 0)))
	m.updated = g.later(m.created, 400)
	m.path = memd.Place(memd.PlacementInput{MemoryType: "semantic", Entities: m.entities}) + "/" + memd.Slug(p.name) + memd.MemoryExt
	return m
}

// ---- writing ----

// write renders m, makes its path unique and writes it, never over an existing file.
func (g *gen) write(m mem) error {
	// Titles repeat on big demos: number repeats per base path (O(1), not a probe loop).
	if g.used[m.path] {
		base := m.path
		for {
			g.next[base]++
			p := strings.TrimSuffix(base, memd.MemoryExt) + "-" + strconv.Itoa(g.next[base]+1) + memd.MemoryExt
			if !g.used[p] {
				m.path = p
				break
			}
		}
	}
	if v := memd.PathViolation(m.path); v != "" {
		return fmt.Errorf("demo: generated a bad path: %s", v) // a bug here, never input
	}
	g.used[m.path] = true
	// memhtml refuses two active memories with one content hash (its index cannot hold
	// them), so a repeated article gets a numbered note until it is unique.
	if m.typ != memd.TypeTask && !memd.IsArchived(m.path) {
		more := m.more
		for n := 2; g.hashes[articleHash(m)]; n++ {
			m.more = more + " (Noted again, " + strconv.Itoa(n) + ".)"
		}
		g.hashes[articleHash(m)] = true
	}
	g.buf = render(g.buf[:0], m)
	if err := g.create(m.path, g.buf); err != nil {
		return err
	}
	g.stats.Memories++
	switch {
	case m.typ == "episodic":
		g.stats.Episodes++
	case m.typ == memd.TypeTask:
		g.stats.Tasks++
	}
	if strings.HasPrefix(m.path, memd.InboxDir+"/") {
		g.stats.Inbox++ // as memhtml's doctor counts it: the task inbox is in the inbox
	}
	// Index candidates: everything that is not a task, thinned on big demos.
	if m.typ != memd.TypeTask && (len(g.index) < 40 || g.rng.IntN(max(1, g.n/200)) == 0) {
		subject := memd.Slug(nameOf(m.entities[0]))
		g.index = append(g.index, bullet{m.path, cleanName(m.title), m.typ, subject, m.gist})
	}
	return nil
}

func cleanName(s string) string {
	return strings.NewReplacer("]", ")", "|", "/", "\n", " ").Replace(s)
}

// create queues a new file (O_EXCL) for the writers, making its directory first. File
// creation is syscall-bound, so a few writers overlap it; content is produced in one
// deterministic sequence, and data is copied so the caller may reuse its buffer.
func (g *gen) create(rel string, data []byte) error {
	if err := g.failed(); err != nil {
		return err
	}
	abs := filepath.Join(g.dir, filepath.FromSlash(rel))
	d := path.Dir(rel)
	for q := d; q != "."; q = path.Dir(q) {
		g.queued[q] = true
	}
	if !g.dirs[d] {
		if d != "." {
			if err := g.tree.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("demo: create %s: %w", d, err)
			}
		}
		g.dirs[d] = true
	}
	g.jobs <- writeJob{rel: rel, abs: abs, data: append([]byte(nil), data...)}
	return nil
}

type writeJob struct {
	rel, abs string
	data     []byte
}

const writers = 4

func (g *gen) startWriters() {
	g.jobs = make(chan writeJob, 256)
	for i := 0; i < writers; i++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for j := range g.jobs {
				if g.failed() != nil {
					continue // drain
				}
				if err := g.writeNew(j); err != nil {
					g.fail(err)
				}
			}
		}()
	}
}

// finish waits for the writers and returns the first error any of them hit.
func (g *gen) finish() error {
	close(g.jobs)
	g.wg.Wait()
	return g.failed()
}

func (g *gen) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
}

func (g *gen) failed() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *gen) writeNew(j writeJob) error {
	// Through safefs: no folder on the way is a symlink, O_EXCL|O_NOFOLLOW at the name.
	f, err := g.tree.OpenFile(j.rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("demo: %s: %w; refusing to overwrite", j.rel, ErrExists)
		}
		return fmt.Errorf("demo: create %s: %w", j.rel, err)
	}
	_, werr := f.Write(j.data)
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("demo: write %s: %w", j.rel, werr)
	}
	if cerr != nil {
		return fmt.Errorf("demo: close %s: %w", j.rel, cerr)
	}
	return nil
}

func (g *gen) writeIndex() error {
	var b strings.Builder
	b.WriteString("# MEMORY\n\nIndex of memories kept by the memory writer. One line per memory.\n\n")
	for _, x := range g.index {
		desc := strings.Join(strings.Fields(x.desc), " ")
		fmt.Fprintf(&b, "- [[%s|%s]] %s type:%s subject:%s %s %s\n", x.path, x.name, indexSep, x.typ, x.subject, indexSep, desc)
	}
	return g.create(memd.MemoryMDName, []byte(b.String()))
}

// writeProjectMD writes one project MEMORY.md slightly off the four-section template
// (sections out of order, one missing, an extra one) so tidy has work, and one in shape.
func (g *gen) writeProjectMD() error {
	off := `# checkout-api

Project memory for the checkout service. Kept by the coding agent.

## Architecture & Config Facts
- checkout-api talks to payments-db through the pgbouncer pool (max 40 connections).
- Feature flags live in config/flags.yaml and reload without a deploy.

## CRITICAL RULES
- Drain the VIP before reverting a deploy.
- Never run migrations during the 18:00-20:00 UTC peak.

## Notes
- Sanju Rao prefers async reviews; tag him on the PR, do not book a call.

## Active Warnings
- The search indexer lags about five minutes behind on Mondays.
`
	if err := g.create("projects/checkout-api/MEMORY.md", []byte(off)); err != nil {
		return err
	}
	if err := g.create("projects/checkout-api/history.md", []byte("# checkout-api history\n\n- 2023: split out of the monolith.\n- 2024: moved to the pgbouncer pool.\n")); err != nil {
		return err
	}
	good := `# payments

## CRITICAL RULES
- Every schema change ships behind a dual-write period of at least one week.

## Architecture & Config Facts
- payments-db is Postgres 16 with one synchronous replica.

## Active Warnings
- None yet.

## Topic Files
- history.md: not written yet.
`
	return g.create("projects/payments/MEMORY.md", []byte(good))
}

// writeLedger writes memory.jsonl as raw JSON lines: rules, lessons and notes in every
// lifecycle mode and state (live, stale, expired), one record with an unknown field.
func (g *gen) writeLedger(today time.Time) error {
	iso := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
	created := func(daysAgo int) string { return iso(today.AddDate(0, 0, -daysAgo).Add(9*time.Hour + 30*time.Minute)) }
	var b strings.Builder
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	line(`{"id":"rule-0001","type":"rule","role":"engineer","text":"Drain the VIP before reverting a checkout-api deploy.","createdAt":%q,"context":["projects/checkout-api/**"],"repos":["checkout-api"]}`, created(400))
	line(`{"id":"rule-0002","type":"rule","role":"agent","text":"Never commit secrets; use the vault path in config/secrets.yaml.","createdAt":%q,"updatedAt":%q}`, created(300), created(20))
	line(`{"id":"lesson-0001","type":"lesson","role":"engineer","text":"Connection pool exhaustion shows up as timeouts a minute before errors.","createdAt":%q,"context":["projects/payments/**"]}`, created(200))
	line(`{"id":"lesson-0002","type":"lesson","role":"agent","text":"Run the flaky checkout test three times before calling it broken.","createdAt":%q,"source":"demo","repos":["checkout-api"]}`, created(90))

	type note struct {
		lifecycle string
		text      string
	}
	modes := []note{
		{`{"mode":"persistent"}`, "The staging cluster is shared with the search team."},
		{`{"mode":"read-count","remainingReads":3}`, "Remind the next session that the deploy freeze starts Friday."},
		{`{"mode":"read-count","remainingReads":0}`, "Mention the new pager schedule once."},
		{fmt.Sprintf(`{"mode":"hard-expiry","expiresAt":%q}`, iso(today.AddDate(0, 0, -3))), "The load test window is open this week."},
		{fmt.Sprintf(`{"mode":"hard-expiry","expiresAt":%q}`, iso(today.AddDate(0, 0, 30))), "Migration to the new pool is in progress."},
		{fmt.Sprintf(`{"mode":"soft-expiry","expiresAt":%q}`, iso(today.AddDate(0, 0, -30))), "Sanju Rao is out until the end of the month."},
		{fmt.Sprintf(`{"mode":"soft-expiry","expiresAt":%q}`, iso(today.AddDate(0, 0, -3))), "The payments-db replica is being rebuilt."},
		{fmt.Sprintf(`{"mode":"soft-expiry","expiresAt":%q}`, iso(today.AddDate(0, 0, 10))), "Search indexer reindex runs nightly this sprint."},
	}
	notes := len(modes) + g.n/100
	for i := 0; i < notes; i++ {
		nt := modes[i%len(modes)]
		text := nt.text
		if i >= len(modes) {
			text = fmt.Sprintf("%s (note %d)", strings.TrimSuffix(text, "."), i+1)
		}
		line(`{"id":"note-%04d","type":"note","role":"agent","text":%q,"createdAt":%q,"lifecycle":%s}`, i+1, text, created(40+i%50), nt.lifecycle)
	}
	g.stats.Notes = notes
	return g.create(memd.DefaultLedgerFile, []byte(b.String()))
}

func (g *gen) wroteUnder(dir string) bool {
	for p := range g.used {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// gitkeeps puts a .gitkeep in every PARA folder that is still empty, so git keeps it.
func (g *gen) gitkeeps() error {
	for _, d := range scaffold.SkeletonDirs {
		if err := g.tree.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("demo: create %s: %w", d, err)
		}
		// A file queued for the writers but not yet written counts: the folder is not empty
		// (reading the folder alone raced with them and made the output vary).
		if g.queued[d] {
			continue
		}
		entries, err := g.tree.ReadDirNames(d)
		if err != nil {
			return fmt.Errorf("demo: read %s: %w", d, err)
		}
		// The writers are asynchronous: a memory queued for d may not be on disk yet.
		if len(entries) > 0 || g.wroteUnder(d) {
			continue
		}
		if err := g.create(d+"/.gitkeep", nil); err != nil {
			return err
		}
	}
	return nil
}
