// Package doctor is memd's read-only health report over a memory repo: invalid paths and
// memory files, inbox depth, misplaced memories, dangling links and index bullets, MEMORY.md
// template and caps, a stale writer lock and ledger lines that do not parse.
//
// It never writes. Findings are either problems (doctor exits 1) or warnings (reported,
// exit 0): a broken file or a dangling link is a problem; a deep inbox, a misplaced memory
// or a MEMORY.md over its soft cap is a warning, because the repo is still correct.
package doctor

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/ledger"
	"github.com/memd-dev/memd/format/memfile"
	"github.com/memd-dev/memd/format/memorymd"
	"github.com/memd-dev/memd/format/writerlock"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/workpool"
	"github.com/memd-dev/memd/metrics/statusline"
)

// Severity of a finding.
type Severity string

// Severities.
const (
	Problem Severity = "problem"
	Warning Severity = "warning"
)

// Finding is one thing doctor saw.
type Finding struct {
	Severity Severity `json:"severity"`
	Check    string   `json:"check"`
	Path     string   `json:"path,omitempty"`
	Message  string   `json:"message"`
}

// Report is the whole result.
type Report struct {
	Repo      string    `json:"repo"`
	Files     int       `json:"files"`
	Memories  int       `json:"memories"`
	Inbox     int       `json:"inbox"`
	TaskInbox int       `json:"task_inbox"`
	Findings  []Finding `json:"findings"`
	Problems  int       `json:"problems"`
	Warnings  int       `json:"warnings"`
	Elapsed   string    `json:"elapsed"`
	Filters   []string  `json:"filters,omitempty"` // git filter drivers HEAD's attributes name (cmd/memd adds them)
}

// Options tune a check.
type Options struct {
	Ledger   string // repo-relative ledger path (expire.ledger)
	LockFile string // writer lock file name (lock.file)
	// Ignored skips paths ((*repofiles.Ignorer).Ignored, the committer's rules); nil
	// skips only what every walk skips (.git, the writer lock, nested repositories).
	Ignored repofiles.Rule
	// Progress, when set, gets a carriage-return progress line (a terminal).
	Progress io.Writer
}

type memInfo struct {
	rel   string
	mem   *memfile.Memory
	err   error
	links []string // target paths of <link href>s
}

// Check runs every check over the repo at root: one walk, then each check in turn over what
// it found.
func Check(root string, opt Options) (*Report, error) {
	start := time.Now()
	if opt.Ledger == "" {
		opt.Ledger = memd.DefaultLedgerFile
	}
	if opt.LockFile == "" {
		opt.LockFile = memd.DefaultLockFile
	}
	c := &checker{root: root, opt: opt, rep: &Report{Repo: root}, exists: map[string]bool{}}
	files, err := c.walk()
	if err != nil {
		return nil, err
	}
	c.checkMemories(files.htmls)
	c.checkOutside(files.outside)
	c.checkInbox()
	c.checkMemoryMDs(files.mds)
	c.checkLedger()
	c.checkLock()
	c.rep.tally()
	c.rep.Elapsed = time.Since(start).Round(time.Millisecond).String()
	return c.rep, nil
}

// checker is one Check run: the report it fills and the paths the walk saw.
type checker struct {
	root   string
	opt    Options
	rep    *Report
	exists map[string]bool // every file path the walk saw (link and bullet targets)
}

func (c *checker) add(sev Severity, check, p, format string, args ...any) {
	c.rep.Findings = append(c.rep.Findings, Finding{Severity: sev, Check: check, Path: p, Message: fmt.Sprintf(format, args...)})
}

// walked is what the walk sorts out for the checks to read.
type walked struct {
	htmls   []string // memory files
	mds     []string // MEMORY.md files
	outside []string // .html files outside the buckets (not memories)
}

// walk visits every file once: counts it, keeps its path, and sorts out the ones to parse.
func (c *checker) walk() (walked, error) {
	root, opt, rep, exists, add := c.root, c.opt, c.rep, c.exists, c.add
	var htmls, mds, outside []string
	err := repofiles.Walk(root, "", opt.Ignored, repofiles.Funcs{
		Fail: func(rel string, err error) { add(Problem, "read", rel, "cannot read: %v", err) },
		File: func(rel string, _ fs.DirEntry) error {
			rep.Files++
			exists[rel] = true
			switch {
			case memd.IsMemoryMD(rel):
				mds = append(mds, rel)
			case strings.HasSuffix(rel, memd.MemoryExt) && !memd.IsNonMemory(rel):
				htmls = append(htmls, rel)
			case strings.HasSuffix(rel, memd.MemoryExt) && !memd.IsGenerated(rel) && rel != "README.html" && !strings.HasPrefix(rel, ".memhtml/"):
				outside = append(outside, rel)
			}
			return nil
		},
	})
	if err != nil {
		return walked{}, fmt.Errorf("walk %s: %w", root, err)
	}
	return walked{htmls: htmls, mds: mds, outside: outside}, nil
}

// checkOutside warns of a memory written outside the buckets: not memories (docs/FORMATS.md
// §2), but memhtml never indexes it.
func (c *checker) checkOutside(outside []string) {
	for _, mi := range parseAll(c.root, outside, nil) {
		if mi.mem == nil {
			continue
		}
		for name := range mi.mem.Metas {
			if strings.HasPrefix(name, "memhtml-") {
				c.add(Warning, "path", mi.rel, "a memory file outside the four buckets (%s): memhtml never indexes it; move it under one", memd.JoinNames(memd.Buckets, ", "))
				break
			}
		}
	}
}

// checkMemories parses the memory files on every core and checks each one (path, content,
// placement, links), then the content hashes across them; it counts memories and the inboxes.
func (c *checker) checkMemories(htmls []string) {
	// Active memories by content hash: memhtml's index has a unique key on it (tasks and
	// archive/ excepted), so two of one hash make its rebuild of the whole repo fail.
	byHash := map[string][]string{}
	for _, mi := range parseAll(c.root, htmls, c.opt.Progress) {
		if !c.checkMemory(mi) {
			continue
		}
		if k := memfile.UniqueContentKey(mi.rel, mi.mem); k != "" {
			byHash[k] = append(byHash[k], mi.rel)
		}
	}
	c.checkDuplicates(byHash)
}

// checkMemory checks one parsed memory file; false when it could not be read.
func (c *checker) checkMemory(mi memInfo) bool {
	rel, rep, add := mi.rel, c.rep, c.add
	if v := memd.PathViolation(rel); v != "" {
		add(Problem, "path", rel, "%s", v)
	}
	if mi.err != nil {
		add(Problem, "memory", rel, "cannot read: %v", mi.err)
		return false
	}
	rep.Memories++
	for _, v := range mi.mem.Violations {
		add(Problem, "memory", rel, "%s", v)
	}
	for _, w := range mi.mem.Warnings {
		add(Warning, "memory", rel, "%s", w)
	}
	// memhtml doctor's inbox depths: every indexed memory under areas/inbox/ (tasks too).
	if inbox, tasks := memfile.InboxDepth(rel, mi.mem); inbox {
		rep.Inbox++
		if tasks {
			rep.TaskInbox++
		}
	}
	if m := misplaced(rel, mi.mem); m != "" {
		add(Warning, "placement", rel, "%s", m)
	}
	for _, target := range mi.links {
		if !c.exists[target] {
			add(Problem, "link", rel, "links to %s, which does not exist", memd.PathToHref(target))
		}
	}
	return true
}

// checkDuplicates reports active memories sharing one content hash.
func (c *checker) checkDuplicates(byHash map[string][]string) {
	for _, paths := range byHash {
		if len(paths) < 2 {
			continue
		}
		sort.Strings(paths)
		c.add(Problem, "duplicate", paths[0], "same article (content hash) as %s: memhtml cannot index two active memories with one content hash; archive or edit all but one",
			strings.Join(paths[1:], ", "))
	}
}

// checkInbox warns of a deep inbox. The status line owns the inbox thresholds
// (docs/FORMATS.md §1): doctor warns at the depth the line does.
func (c *checker) checkInbox() {
	if c.rep.Inbox > statusline.InboxWarnAbove {
		c.add(Warning, "inbox", memd.InboxDir, "inbox holds %d memories (over %d): place them", c.rep.Inbox, statusline.InboxWarnAbove)
	}
	if c.rep.TaskInbox > statusline.TaskInboxWarnAbove {
		c.add(Warning, "inbox", memd.TaskInboxDir, "task inbox holds %d tasks (over %d): file them under a project", c.rep.TaskInbox, statusline.TaskInboxWarnAbove)
	}
}

// checkMemoryMDs checks the MEMORY.md files of both kinds.
func (c *checker) checkMemoryMDs(mds []string) {
	for _, rel := range mds {
		data, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
		if err != nil {
			c.add(Problem, "memory_md", rel, "cannot read: %v", err)
			continue
		}
		checkMemoryMD(rel, data, c.exists, c.add)
	}
}

// checkLedger reports ledger lines that do not parse (kept as they are).
func (c *checker) checkLedger() {
	rel := c.opt.Ledger
	l, err := ledger.ParseFile(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		c.add(Problem, "ledger", rel, "cannot read: %v", err)
		return
	}
	for i, ln := range l.Lines {
		if ln.Err != nil {
			c.add(Problem, "ledger", rel, "line %d does not parse (%v); it is kept as it is", i+1, ln.Err)
		}
	}
}

// checkLock reports a writer lock: stale (a problem) or held (a warning).
func (c *checker) checkLock() {
	lockFile := c.opt.LockFile
	info, err := writerlock.ReadInfo(filepath.Join(c.root, lockFile))
	if err != nil {
		return
	}
	if writerlock.IsStale(info) {
		c.add(Problem, "lock", lockFile, "stale writer lock: pid %d on %s (acquired %s) is not running; memd takes it over, or remove it", info.PID, info.Hostname, info.AcquiredAt)
	} else {
		c.add(Warning, "lock", lockFile, "writer lock held by pid %d on %s since %s", info.PID, info.Hostname, info.AcquiredAt)
	}
}

// tally sorts the findings (problems first, then by check and path) and counts them.
func (rep *Report) tally() {
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Severity != b.Severity {
			return a.Severity == Problem
		}
		if a.Check != b.Check {
			return a.Check < b.Check
		}
		return a.Path < b.Path
	})
	for _, f := range rep.Findings {
		if f.Severity == Problem {
			rep.Problems++
		} else {
			rep.Warnings++
		}
	}
}

func parseAll(root string, rels []string, progress io.Writer) []memInfo {
	out := make([]memInfo, len(rels))
	var mu sync.Mutex
	var done int64
	report := func() {
		mu.Lock()
		done++
		d := done
		mu.Unlock()
		if progress != nil && (d%2000 == 0 || int(d) == len(rels)) {
			fmt.Fprintf(progress, "\rdoctor: %d/%d memory files", d, len(rels))
			if int(d) == len(rels) {
				fmt.Fprintln(progress)
			}
		}
	}
	_ = workpool.Each(len(rels), runtime.GOMAXPROCS(0), func(i int) error {
		rel := rels[i]
		m, err := memfile.ParseFile(filepath.Join(root, filepath.FromSlash(rel)))
		mi := memInfo{rel: rel, mem: m, err: err}
		if m != nil {
			for _, l := range m.Links {
				if t, err := memd.HrefToPath(l.Href); err == nil {
					mi.links = append(mi.links, t)
				}
			}
		}
		out[i] = mi
		report()
		return nil
	})
	return out
}

// misplaced reports what placement would object to; only the rules memd can be sure of
// (arcs, tasks, person files), since any other memory may live in any folder its writer
// chose.
func misplaced(rel string, m *memfile.Memory) string {
	if memd.IsArchived(rel) {
		return ""
	}
	dir := path.Dir(rel)
	inArcs := dir == memd.ArcsDir
	inTasks := path.Base(dir) == "tasks"
	switch {
	case m.Type == memd.TypeArc && !inArcs:
		return fmt.Sprintf("an arc in %s/ (arcs live in %s/)", dir, memd.ArcsDir)
	case m.Type != memd.TypeArc && m.Type != "" && inArcs:
		return fmt.Sprintf("a %s memory in %s/, which holds only arcs written by sleep", m.Type, memd.ArcsDir)
	case m.Type == memd.TypeTask && !inTasks:
		return fmt.Sprintf("a task in %s/ (tasks live in projects/<slug>/tasks/ or %s/)", dir, memd.TaskInboxDir)
	case m.Type != memd.TypeTask && m.Type != "" && inTasks:
		return fmt.Sprintf("a %s memory in a tasks folder (%s/)", m.Type, dir)
	}
	if m.Type == "semantic" {
		for _, e := range m.Entities {
			if strings.HasPrefix(e, "person:") && dir != memd.PeopleDir {
				want := memd.Place(memd.PlacementInput{MemoryType: m.Type, Entities: m.Entities, Tags: m.Tags})
				return fmt.Sprintf("a person file (%s) in %s/ (placement: %s/)", e, dir, want)
			}
		}
	}
	return ""
}

func checkMemoryMD(rel string, data []byte, exists map[string]bool, add func(Severity, string, string, string, ...any)) {
	switch memorymd.Detect(data) {
	case memorymd.KindIndex:
		idx := memorymd.ParseIndex(data)
		for i, l := range idx.Lines {
			if l.Err != nil {
				add(Problem, "index", rel, "line %d: %v", i+1, l.Err)
				continue
			}
			if l.Bullet == nil {
				continue
			}
			if err := l.Bullet.Validate(); err != nil {
				add(Problem, "index", rel, "line %d: %v", i+1, err)
				continue
			}
			p := memd.NormalizePath(l.Bullet.Path)
			if !exists[p] {
				add(Problem, "index", rel, "line %d: bullet points at %s, which does not exist", i+1, p)
			}
		}
	case memorymd.KindProject:
		r := memorymd.InspectProject(data)
		if !r.InTemplate {
			add(Problem, "memory_md", rel, "not in the four-section template (missing %s, extra %s); `memd sleep --phase tidy` repairs it and keeps a backup",
				listOrNone(r.Missing), listOrNone(r.Extra))
		}
		switch {
		case r.OverCap:
			add(Problem, "memory_md", rel, "%d lines, %d characters: over the cap (%d lines / %d characters)", r.Lines, r.Chars, memorymd.ProjectMaxLines, memorymd.ProjectMaxChars)
		case r.OverSoftCap:
			add(Warning, "memory_md", rel, "%d lines, %d characters: over the soft cap (%d lines / %d characters)", r.Lines, r.Chars, memorymd.ProjectSoftLines, memorymd.ProjectSoftChars)
		}
		for _, ln := range r.LongBullets {
			add(Warning, "memory_md", rel, "line %d: bullet over %d characters", ln, memorymd.ProjectMaxBulletChars)
		}
	}
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
