package claudecode

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/memd-dev/memd/internal/safefs"
)

// Options say where Claude Code and the memory repo are.
type Options struct {
	ConfigDir string   // Claude Code's config dir (ConfigDir)
	Home      string   // the user's home (~/.claude.json)
	Roots     []string // agents.claude_code.roots
	Repo      string   // the memory repo's work tree
	StateDir  string   // memd's state dir: the bases of the two-way copy
	Host      string   // names conflict copies
	Now       func() time.Time
}

// Project is one checkout Claude Code has a memory for.
type Project struct {
	Path      string `json:"path"`                 // the checkout's top level
	ID        string `json:"id,omitempty"`         // "" when not synced
	MemoryDir string `json:"memory_dir,omitempty"` // Claude Code's memory dir
	Reason    string `json:"reason,omitempty"`     // why it is not synced
	// LastChange is when this machine last copied a memory of it either way; LastMachine is
	// the machine the change was made on (this one, or the repo's last commit's Memd-Host).
	LastChange  time.Time `json:"last_change,omitzero"`
	LastMachine string    `json:"last_machine,omitempty"`
}

// Report is one pass: every project found, synced or not, and how many files it moved.
type Report struct {
	Synced, Unsynced []Project
	Changed          int
}

// resolveEvery is how long a checkout's id is trusted before git is asked again (an
// origin may be added or changed).
const resolveEvery = time.Minute

type resolved struct {
	proj Project
	at   time.Time
}

// Syncer copies every project's memory both ways; one goroutine calls Sync.
type Syncer struct {
	o     Options
	find  *finder
	cache map[string]resolved // by candidate folder
}

// New makes a Syncer.
func New(o Options) *Syncer {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Syncer{o: o, find: newFinder(), cache: map[string]resolved{}}
}

// resolve names the checkout at dir (cached for resolveEvery).
func (s *Syncer) resolve(dir string, now time.Time) (Project, bool) {
	if r, ok := s.cache[dir]; ok && now.Sub(r.at) < resolveEvery {
		return r.proj, true
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		delete(s.cache, dir)
		return Project{}, false // a folder since removed: nothing to say
	}
	p := Project{Path: dir}
	top, err := Toplevel(dir)
	switch {
	case err != nil:
		p.Reason = "not a git checkout"
	default:
		p.Path = top
		if md, ok := MemoryDir(s.o.ConfigDir, top); !ok {
			p.Reason = "path too long or not ASCII for Claude Code's folder name"
		} else if id, err := ProjectID(top); err != nil {
			p.Reason = "no origin with a host and no commit"
		} else {
			p.ID, p.MemoryDir = id, md
		}
	}
	s.cache[dir] = resolved{proj: p, at: now}
	return p, true
}

// Scan finds the projects and says which have an id, copying nothing (`memd doctor`).
func Scan(o Options) Report {
	s := New(o)
	var rep Report
	for _, p := range s.projects(s.o.Now()) {
		if p.ID == "" {
			rep.Unsynced = append(rep.Unsynced, p)
		} else {
			rep.Synced = append(rep.Synced, p)
		}
	}
	return rep
}

// projects are the checkouts found, one per top level, in path order.
func (s *Syncer) projects(now time.Time) []Project {
	seen := map[string]bool{}
	var out []Project
	for _, c := range s.find.candidates(s.o.ConfigDir, s.o.Home, s.o.Roots) {
		p, ok := s.resolve(c, now)
		if !ok || seen[p.Path] {
			continue
		}
		seen[p.Path] = true
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Project) int { return cmpString(a.Path, b.Path) })
	return out
}

// Sync finds the projects and copies each one's memory both ways.
func (s *Syncer) Sync() (Report, error) {
	now := s.o.Now()
	var rep Report
	for _, p := range s.projects(now) {
		if p.ID == "" {
			rep.Unsynced = append(rep.Unsynced, p)
			continue
		}
		n, err := s.syncOne(&p, now)
		if err != nil {
			p.Reason = err.Error()
			rep.Unsynced = append(rep.Unsynced, p)
			continue
		}
		rep.Changed += n
		rep.Synced = append(rep.Synced, p)
	}
	return rep, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// syncOne copies one project's memory both ways and keeps the bases, and the last change.
func (s *Syncer) syncOne(p *Project, now time.Time) (int, error) {
	if err := os.MkdirAll(p.MemoryDir, 0o700); err != nil {
		return 0, fmt.Errorf("make %s: %w", p.MemoryDir, err)
	}
	local, err := safefs.Open(p.MemoryDir)
	if err != nil {
		return 0, err
	}
	defer local.Close()
	repo, err := safefs.Open(s.o.Repo)
	if err != nil {
		return 0, err
	}
	defer repo.Close()
	if err := os.MkdirAll(s.o.StateDir, 0o700); err != nil {
		return 0, err
	}
	state, err := safefs.Open(s.o.StateDir)
	if err != nil {
		return 0, err
	}
	defer state.Close()
	doc := loadDoc(state, p.MemoryDir)
	pr := &pair{local: side{t: local, rel: "."}, repo: side{t: repo, rel: RepoPath(p.ID)},
		bases: maps.Clone(doc.Bases), host: s.o.Host, now: now}
	n, err := pr.copyBoth()
	changed := !maps.Equal(doc.Bases, pr.bases) // written only then: a pass is every second
	if n > 0 {
		changed = true
		doc.LastChange, doc.LastMachine = now, s.o.Host
		if pr.pulled {
			doc.LastMachine = lastHost(s.o.Repo, RepoPath(p.ID))
		}
	}
	p.LastChange, p.LastMachine = doc.LastChange, doc.LastMachine
	if changed {
		doc.ID, doc.Bases = p.ID, pr.bases
		if serr := saveDoc(state, doc); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	return n, err
}

// lastHost is the machine of the last commit that changed a folder of the repo (its
// Memd-Host trailer), "" when git cannot tell. Asked only when a change came in.
func lastHost(repo, rel string) string {
	h, err := gitOut(repo, "log", "-1", "--format=%(trailers:key=Memd-Host,valueonly,separator=)", "--", rel)
	if err != nil {
		return ""
	}
	return h
}

// Abs makes configured folders absolute (a relative root means nothing to a daemon).
func Abs(dirs []string) []string {
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		if a, err := filepath.Abs(d); err == nil {
			out = append(out, a)
		}
	}
	return out
}
