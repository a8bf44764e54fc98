package sync

import (
	"io"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
)

// Guard vets what a commit is about to take from the work tree (DESIGN §9 "Secrets never
// leave the machine"): internal/secrets implements it with gitleaks' rules, the agent sets
// it with SetGuard. The stager calls it for each file whose content differs from HEAD's,
// before the blob is written, so a held version is in no object, not even a loose one.
type Guard interface {
	// Vet says what of content (the work tree's version of rel) may be committed. head
	// reads HEAD's version of rel (nil, nil: HEAD has none); a guard that looks only at
	// what changed (the new records of a ledger) uses it.
	Vet(rel string, content []byte, head func() ([]byte, error)) (Verdict, error)
}

// Verdict is a Guard's answer for one file.
type Verdict struct {
	// Hold: nothing of this version is committed; HEAD keeps what it has at the path.
	Hold bool
	// Content, when not nil (and not Hold), is committed instead of the work tree's
	// version: the ledger without its held records. The work tree keeps its version.
	Content []byte
	// Findings say why (rule and line, never the secret); empty = nothing held.
	Findings []Finding
}

// Finding is one held line of a file: the rule that matched and the 1-based line (0: the
// rule matched the path).
type Finding struct {
	Rule string
	Line int
}

// Guarded is a file the guard holds (all of it, or Partial: some of its lines).
type Guarded struct {
	Path     string
	Partial  bool
	Findings []Finding
}

// SetGuard installs g (nil: none) for the commits from now on. Paths it held before are
// forgotten; the next commit of each vets it again.
func (r *Repo) SetGuard(g Guard) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.guard = g
	r.guarded = nil
}

// Guarded lists the files the guard holds now, by path: vetted at their last commit
// attempt and found to carry a secret, and not deleted or cleaned since.
func (r *Repo) Guarded() []Guarded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Guarded, 0, len(r.guarded))
	for _, g := range r.guarded {
		g.Findings = append([]Finding(nil), g.Findings...)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// vet runs the guard on one file's new content; it returns the content to commit (nil:
// hold the file) and records what it held in s.guarded.
func (s *stager) vet(rel string, content []byte) ([]byte, error) {
	g := s.r.guard
	if g == nil {
		return content, nil
	}
	v, err := g.Vet(rel, content, func() ([]byte, error) { return s.headBlob(rel) })
	if err != nil {
		return nil, err
	}
	s.noteGuarded(rel, v)
	switch {
	case v.Hold:
		return nil, nil
	case v.Content != nil:
		return v.Content, nil
	}
	return content, nil
}

// noteGuarded records the guard's verdict for rel (nothing found: rel leaves the list).
func (s *stager) noteGuarded(rel string, v Verdict) {
	if s.guarded == nil {
		s.guarded = map[string]*Guarded{}
	}
	if len(v.Findings) == 0 {
		s.guarded[rel] = nil
		return
	}
	s.guarded[rel] = &Guarded{Path: rel, Partial: !v.Hold, Findings: append([]Finding(nil), v.Findings...)}
}

// unguard: rel is deleted, equal to HEAD or no longer a file: not held any more.
func (s *stager) unguard(rel string) {
	if s.r.guard == nil {
		return
	}
	if _, held := s.r.guarded[rel]; !held {
		return
	}
	if s.guarded == nil {
		s.guarded = map[string]*Guarded{}
	}
	s.guarded[rel] = nil
}

// applyGuarded folds a commit's verdicts into the repo's list. Caller holds r.mu.
func (r *Repo) applyGuarded(m map[string]*Guarded) {
	for p, g := range m {
		if g == nil {
			delete(r.guarded, p)
			continue
		}
		if r.guarded == nil {
			r.guarded = map[string]Guarded{}
		}
		r.guarded[p] = *g
	}
}

// headBlob is HEAD's content at rel (nil: HEAD has no file there).
func (s *stager) headBlob(rel string) ([]byte, error) {
	e, ok, err := s.headEntry(rel)
	if err != nil || !ok || !e.Mode.IsFile() {
		return nil, err
	}
	return readBlob(s.st, e.Hash)
}

func readBlob(st interface {
	EncodedObject(plumbing.ObjectType, plumbing.Hash) (plumbing.EncodedObject, error)
}, h plumbing.Hash) ([]byte, error) {
	o, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, err
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}
