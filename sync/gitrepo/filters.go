package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/sync/gitattr"
	"github.com/memd-dev/memd/sync/gitstore"
	"github.com/memd-dev/memd/sync/treemerge"
)

// What memd stores is what `git add` would store: every blob made from a
// work tree file goes through its clean filter and CRLF normalisation, every file written
// from a blob through the eol conversion and its smudge filter (sync/gitattr). A path
// whose filter fails, or names a driver git config does not define while its bytes differ
// from HEAD's, is held (reason filter): never stored unfiltered.

// filterState is the repo's attributes engine and the paths held for their filter, with
// what it needs of the repo (set once by Open).
type filterState struct {
	dir, commonDir string
	layout         gitlayout.Layout
	log            *slog.Logger

	mu   sync.Mutex
	eng  *gitattr.Engine
	sig  string            // the git config files' stamp when eng's config was read
	held map[string]string // path → the driver that failed or is missing
	// lockedSaid: the locked git-crypt warning was logged (once per Repo).
	lockedSaid bool
}

// warnLocked logs, once, that the tree holds git-crypt ciphertext under a driver git
// config does not define: the repo is locked here.
func (f *filterState) warnLocked(driver string) {
	f.mu.Lock()
	said := f.lockedSaid
	f.lockedSaid = true
	f.mu.Unlock()
	if !said {
		f.log.Warn("git-crypt locked: the work tree holds ciphertext and git config defines no filter for it; memd commits no change under it until `git-crypt unlock`", "repo", f.dir, "filter", driver)
	}
}

// HeldFilter is a local file not committed because its filter driver failed or is missing.
type HeldFilter struct {
	Path, Driver string
}

// begin starts an operation (a commit, a checkout): git config is read again when its
// files changed, .gitattributes files are read again as needed, from tree first when it
// is not nil.
func (f *filterState) begin(tree gitattr.TreeSource) *gitattr.Engine {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sig := gitconfig.Stamp(f.layout); f.eng == nil || sig != f.sig { // the config files git reads
		cfg, err := gitconfig.ForRepo(context.Background(), f.layout)
		if err != nil {
			// No git: no filter can run, as under git; an attribute naming one holds.
			f.log.Warn("read git config for filters and line endings", "repo", f.dir, "err", err)
		}
		if f.eng == nil {
			f.eng = gitattr.New(f.dir, f.commonDir, cfg) // info/attributes is shared by linked worktrees
		} else {
			f.eng.SetConfig(cfg)
		}
		f.sig = sig
	}
	f.eng.Reset(tree)
	return f.eng
}

// conv is what git does to rel's bytes, as of the last begin.
func (f *filterState) conv(rel string) gitattr.Conv {
	f.mu.Lock()
	e := f.eng
	f.mu.Unlock()
	if e == nil {
		e = f.begin(nil)
	}
	return e.Conv(rel)
}

// close ends the filter processes (Repo.Close).
func (f *filterState) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.eng != nil {
		f.eng.Close()
	}
}

// hold records rel as held for driver (err the reason, logged once) or, with driver "",
// no longer held.
func (f *filterState) hold(rel, driver string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if driver == "" {
		delete(f.held, rel)
		return
	}
	if f.held == nil {
		f.held = map[string]string{}
	}
	if _, was := f.held[rel]; !was {
		f.log.Warn("filter failed: held, not committed", "path", rel, "filter", driver, "err", err)
	}
	f.held[rel] = driver
}

// HeldFilters lists the files held for their filter, by path; one removed since is dropped.
func (r *Repo) HeldFilters() []HeldFilter {
	f := &r.filters
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]HeldFilter, 0, len(f.held))
	for p, d := range f.held {
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(p))); os.IsNotExist(err) {
			delete(f.held, p)
			continue
		}
		out = append(out, HeldFilter{Path: p, Driver: d})
	}
	slices.SortFunc(out, func(a, b HeldFilter) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// errUndefinedDriver: the attributes name a filter git config does not define (a
// git-crypt repo not unlocked on this machine).
var errUndefinedDriver = errors.New("the filter driver is not defined in git config (locked, or not installed here)")

// cleanWork is the blob `git add` stores for the work tree bytes data of rel (c not
// Identity); head reads HEAD's blob at rel (nil: none). An undefined driver stores the
// bytes as they are only when that is HEAD's blob already (git would store them; memd
// holds a change instead of committing what may be plaintext).
func cleanWork(c gitattr.Conv, data []byte, head func() ([]byte, error)) ([]byte, error) {
	if c.Undefined() {
		hb, err := head()
		if err == nil && hb != nil && bytes.Equal(hb, data) {
			return data, nil
		}
		return nil, &gitattr.FilterError{Driver: c.Filter, Path: c.Path, Op: "clean", Err: errUndefinedDriver}
	}
	return c.Clean(data, func() bool {
		hb, err := head()
		return err == nil && bytes.IndexByte(hb, '\r') >= 0
	})
}

// workBlobHash is the blob id `git add` would give the regular file rel whose content
// is rd (size bytes): streamed where nothing converts it.
func (r *Repo) workBlobHash(rel string, rd io.Reader, size int64) (plumbing.Hash, error) {
	c := r.filters.conv(rel)
	if c.Identity() {
		hs := gitstore.NewBlobHasher(size)
		n, err := io.Copy(hs, rd)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if n != size {
			return plumbing.ZeroHash, fmt.Errorf("%s changed while reading", rel)
		}
		return hs.Sum(), nil
	}
	data, err := io.ReadAll(rd)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if c.Undefined() {
		return gitstore.HashObject(plumbing.BlobObject, data), nil // git hashes the bytes
	}
	blob, err := c.Clean(data, nil)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return gitstore.HashObject(plumbing.BlobObject, blob), nil
}

// checkoutSource is the .gitattributes of the tree a checkout moves to, from its
// changes: git reads a checkout's attributes from what it checks out.
func checkoutSource(s interface {
	EncodedObject(plumbing.ObjectType, plumbing.Hash) (plumbing.EncodedObject, error)
}, changes map[string]treemerge.Change) gitattr.TreeSource {
	has := false
	for p := range changes {
		if path.Base(p) == ".gitattributes" {
			has = true
			break
		}
	}
	if !has {
		return nil
	}
	return func(dir string) ([]byte, bool) {
		c, ok := changes[path.Join(dir, ".gitattributes")]
		if !ok {
			return nil, false
		}
		if c.To == nil || !c.To.Mode.IsFile() {
			return nil, true
		}
		b, err := readBlob(s, c.To.Hash)
		return b, err == nil
	}
}

// stageFiltered is stageFile for a path git converts: the blob is what `git add` stores
// (clean filter, then CRLF to LF); the secret guard reads the plaintext; a filter that
// fails holds the path (HEAD keeps its version, nothing unfiltered is written).
func (s *stager) stageFiltered(rel string, f io.Reader, mode filemode.FileMode, c gitattr.Conv) error {
	plain, err := io.ReadAll(f)
	if err != nil {
		return s.skip(rel, fmt.Errorf("read %s: %w", rel, err))
	}
	head := func() ([]byte, error) { return s.headBlob(rel) }
	if c.Undefined() && bytes.HasPrefix(plain, []byte("\x00GITCRYPT")) {
		s.r.filters.warnLocked(c.Filter)
	}
	blob, err := cleanWork(c, plain, head)
	if err != nil {
		if !errors.Is(err, gitattr.ErrFilter) {
			return fmt.Errorf("%s: %w", rel, err)
		}
		s.r.filters.hold(rel, c.Filter, err)
		delete(s.edits, rel)
		return nil
	}
	s.r.filters.hold(rel, "", nil)
	h := gitstore.HashObject(plumbing.BlobObject, blob)
	prev, ok, err := s.headEntry(rel)
	if err != nil {
		return err
	}
	if ok && prev.Hash == h && prev.Mode == mode {
		delete(s.edits, rel)
		s.unguard(rel)
		return nil
	}
	if g := s.r.guard; g != nil {
		v, err := g.Vet(rel, plain, func() ([]byte, error) {
			hb, err := head()
			if err != nil || hb == nil {
				return hb, err
			}
			return c.Smudge(hb)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		s.noteGuarded(rel, v, h)
		switch {
		case v.Hold:
			delete(s.edits, rel)
			return nil
		case v.Content != nil:
			if blob, err = cleanWork(c, v.Content, head); err != nil {
				s.r.filters.hold(rel, c.Filter, err)
				delete(s.edits, rel)
				return nil
			}
			h = gitstore.HashObject(plumbing.BlobObject, blob)
		}
	}
	if _, err := s.objs.Write(plumbing.BlobObject, blob); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return s.record(rel, mode, h)
}

// cleanHeldEdit is what `git add` stores for a writer's bytes in a version a checkout
// took off its name.
func (r *Repo) cleanHeldEdit(hv *heldVersion, data []byte) ([]byte, error) {
	c := r.filters.conv(hv.path)
	if c.Identity() {
		return data, nil
	}
	return cleanWork(c, data, func() ([]byte, error) {
		if hv.base.Hash.IsZero() || !hv.base.Mode.IsFile() {
			return nil, nil
		}
		return readBlob(r.repo.Storer, hv.base.Hash)
	})
}

// hashWork is hashWorkFile through the repo's filters for a regular file.
func (c statCache) hashWork(dir, rel string, fi fs.FileInfo) (plumbing.Hash, error) {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if c.r == nil || !fi.Mode().IsRegular() {
		return hashWorkFile(p, fi)
	}
	f, err := openNoFollow(p)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	return c.r.workBlobHash(rel, f, fi.Size())
}

// mergeFilter is treemerge.Policy.Filter: the merge rules read a filtered path's text
// (smudged) and store the merged text cleaned, so a ledger or MEMORY.md under git-crypt
// merges by record and section and stays encrypted.
type mergeFilter struct{ r *Repo }

func (f mergeFilter) Plain(p string, blob []byte) ([]byte, bool, error) {
	c := f.r.filters.conv(p)
	if c.Identity() {
		return blob, false, nil
	}
	if c.Undefined() {
		return nil, false, &gitattr.FilterError{Driver: c.Filter, Path: p, Op: "smudge", Err: errUndefinedDriver}
	}
	text, err := c.Smudge(blob)
	return text, true, err
}

func (f mergeFilter) Blob(p string, text []byte) ([]byte, error) {
	c := f.r.filters.conv(p)
	if c.Identity() {
		return text, nil
	}
	return cleanWork(c, text, func() ([]byte, error) { return nil, nil })
}

// smudgeFor is what `git checkout` writes at rel for blob (restore).
func (r *Repo) smudgeFor(rel string, blob []byte) ([]byte, error) {
	r.filters.begin(nil)
	c := r.filters.conv(rel)
	if c.Identity() {
		return blob, nil
	}
	return c.Smudge(blob)
}

// A filter process memd runs in the work tree is memd's own, not another git to stand
// aside for (gitstore.LiveGitProcess).
func init() { gitattr.ProcessGroups = gitstore.OwnProcessGroup }
