package gitrepo

import (
	"bytes"
	"io"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/sync/treemerge"
)

// Guard vets what a commit is about to take from the work tree (docs/ARCHITECTURE.md §11 "Secrets never
// leave the machine"): internal/secrets implements it with gitleaks' rules, the agent sets
// it with SetGuard. The stager calls it for each file whose content differs from HEAD's,
// before the blob is written, so a held version is in no object, not even a loose one.
type Guard interface {
	// Vet says what of content (the work tree's version of rel) may be committed. head
	// reads HEAD's version of rel (nil, nil: HEAD has none); a guard that looks only at
	// what changed (the new records of a ledger) uses it.
	Vet(rel string, content []byte, head func() ([]byte, error)) (memd.GuardVerdict, error)
}

// Guarded is a file the guard holds (all of it, or Partial: some of its lines).
type Guarded struct {
	Path     string
	Partial  bool
	Findings []memd.GuardFinding
	work     plumbing.Hash // the held version's blob id (what the work tree had when vetted)
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
		g.Findings = append([]memd.GuardFinding(nil), g.Findings...)
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// vet runs the guard on one file's new content; it returns the content to commit (nil:
// hold the file) and records what it held in s.guarded.
func (s *stager) vet(rel string, content []byte, h plumbing.Hash) ([]byte, error) {
	g := s.r.guard
	if g == nil {
		return content, nil
	}
	v, err := g.Vet(rel, content, func() ([]byte, error) { return s.headBlob(rel) })
	if err != nil {
		return nil, err
	}
	s.noteGuarded(rel, v, h)
	switch {
	case v.Hold:
		return nil, nil
	case v.Content != nil:
		return v.Content, nil
	}
	return content, nil
}

// noteGuarded records the guard's verdict for rel (nothing found: rel leaves the list).
func (s *stager) noteGuarded(rel string, v memd.GuardVerdict, h plumbing.Hash) {
	if s.guarded == nil {
		s.guarded = map[string]*Guarded{}
	}
	if len(v.Findings) == 0 {
		s.guarded[rel] = nil
		return
	}
	s.guarded[rel] = &Guarded{Path: rel, Partial: !v.Hold, Findings: append([]memd.GuardFinding(nil), v.Findings...), work: h}
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

// Held lines in a checkout. A ledger the guard holds records of differs from HEAD in the
// work tree (HEAD has it without those lines), so a checkout would see a writer's edit in
// the way every time the remote changes the ledger, and a sync would never end. keptLines
// recognises that case: the work tree's version, vetted against the checkout's From side,
// is From's content exactly; then the checkout writes To's content with the held lines
// after it (a ledger's records are an unordered set, appended), and the held records stay
// on disk and out of every commit. Anything else in the way is a writer's edit, as before.

// leftAlone: rel is a file the guard holds whole and the work tree still has the held
// version (h): a checkout leaves it as it is, neither overwritten nor in the way. HEAD
// takes the incoming version; when the writer removes the secret, the next commit puts
// the writer's version on top of it (as any edit made after a merge is).
func (co *checkout) leftAlone(rel string, h plumbing.Hash) bool {
	g, held := co.r.guarded[rel]
	return co.r.guard != nil && held && !g.Partial && !h.IsZero() && g.work == h
}

// keptLines is the held lines of the guarded file rel to append to the checkout's new
// version (ok false: rel is not such a file, or it holds more than held lines).
func (co *checkout) keptLines(rel string, c treemerge.Change) ([]byte, bool) {
	r := co.r
	g, held := r.guarded[rel]
	if r.guard == nil || !held || !g.Partial || c.From == nil || c.To == nil ||
		c.To.Mode == filemode.Symlink || c.From.Mode == filemode.Symlink {
		return nil, false
	}
	f, err := co.t.OpenRead(rel)
	if err != nil {
		return nil, false
	}
	work, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, false
	}
	v, err := r.guard.Vet(rel, work, func() ([]byte, error) { return readBlob(r.repo.Storer, c.From.Hash) })
	if err != nil || v.Hold || v.Content == nil || plumbing.ComputeHash(plumbing.BlobObject, v.Content) != c.From.Hash {
		return nil, false
	}
	return linesNotIn(work, v.Content), true
}

// linesNotIn is the lines of a that b does not have (as many times as a has them more).
func linesNotIn(a, b []byte) []byte {
	have := map[string]int{}
	for _, l := range bytes.SplitAfter(b, []byte("\n")) {
		have[string(bytes.TrimRight(l, "\n"))]++
	}
	var out []byte
	for _, l := range bytes.SplitAfter(a, []byte("\n")) {
		k := string(bytes.TrimRight(l, "\n"))
		if len(l) == 0 {
			continue
		}
		if have[k] > 0 {
			have[k]--
			continue
		}
		out = append(append(out, k...), '\n')
	}
	return out
}

// withKept is the checkout's content for a blob followed by kept lines: a newline first
// when the blob does not end in one.
func withKept(blob io.Reader, kept []byte) io.Reader {
	if len(kept) == 0 {
		return blob
	}
	lr := &lastByte{r: blob}
	return io.MultiReader(lr, readerFunc(func(p []byte) (int, error) {
		if lr.last != '\n' && lr.n > 0 {
			lr.last = '\n'
			p[0] = '\n'
			return 1, nil
		}
		return 0, io.EOF
	}), bytes.NewReader(kept))
}

type lastByte struct {
	r    io.Reader
	last byte
	n    int64
}

func (l *lastByte) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.last, l.n = p[n-1], l.n+int64(n)
	}
	return n, err
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// vetHeldEdit runs the guard on what a writer left in a version a checkout took off its
// name (checkout.go heldVersion) before it is merged into a commit: held lines never reach
// that commit either. ok false: nothing of it may be committed.
func (r *Repo) vetHeldEdit(path string, data []byte, base treemerge.Entry) ([]byte, bool) {
	if r.guard == nil {
		return data, true
	}
	v, err := r.guard.Vet(path, data, func() ([]byte, error) { return readBlob(r.repo.Storer, base.Hash) })
	switch {
	case err != nil:
		r.log.Warn("secret scan of a version the checkout replaced; not merged", "repo", r.dir, "path", path, "err", err)
		return nil, false
	case v.Hold:
		return nil, false
	case v.Content != nil:
		return v.Content, true
	}
	return data, true
}
