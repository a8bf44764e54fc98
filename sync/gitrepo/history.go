package gitrepo

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/commitmsg"
	"github.com/memd-dev/memd/internal/safefs"
)

// Errors `memd log` and `memd restore` callers branch on.
var (
	// ErrNoHistory: no commit ever held the path.
	ErrNoHistory = errors.New("no history")
	// ErrNothingToRestore: the path is in HEAD as it is and no --at was given.
	ErrNothingToRestore = errors.New("nothing to restore")
	// ErrBadAt: --at names neither a commit nor an RFC3339 time with a commit at or before it.
	ErrBadAt = errors.New("no such commit or time")
)

// Log actions (LogEntry.Action).
const (
	ActAdded      = "added"
	ActModified   = "modified"
	ActDeleted    = "deleted"
	ActRenamed    = "renamed"
	ActArchived   = "archived"
	ActUnarchived = "unarchived"
)

// LogEntry is one commit that changed a memory, newest first in Log's answer. Path is the
// memory's name after the commit (for a deletion: the name it had); From its name before a
// rename or archive move. Blob is the version after the commit ("" when deleted), Before the
// one it replaced ("" when added).
type LogEntry struct {
	Commit  string    `json:"commit"`
	At      time.Time `json:"at"`
	Action  string    `json:"action"`
	Path    string    `json:"path"`
	From    string    `json:"from,omitempty"`
	Blob    string    `json:"blob,omitempty"`
	Before  string    `json:"before,omitempty"`
	Subject string    `json:"subject"`
	Host    string    `json:"host,omitempty"`
	By      string    `json:"by,omitempty"` // the Memd-Action trailer: resolve, restore
}

// maxLogCommits bounds one Log walk: a memory repo that outgrows it needs a real git log.
const maxLogCommits = 100_000

// Log is the history of the memory p (repo-relative), newest first: the first-parent chain
// from HEAD, as `git log --first-parent --follow` walks it, following a rename to a path
// with the same content and an archive move (archive/<YYYY>/p ↔ p, memd.ArchivePath) back
// to the earlier name. A merge that brought the other side's version shows as a change.
func (r *Repo) Log(p string) ([]LogEntry, error) {
	p = memd.NormalizePath(p)
	head, err := r.readBranch()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncPacksLocked()
	var out []LogEntry
	cur := p
	for h, n := head, 0; !h.IsZero() && n < maxLogCommits; n++ {
		c, err := getCommit(r.repo.Storer, h)
		if err != nil {
			return out, fmt.Errorf("log %s: read %s: %w", p, h, err)
		}
		var parent *object.Commit
		if len(c.ParentHashes) > 0 {
			if parent, err = getCommit(r.repo.Storer, c.ParentHashes[0]); err != nil {
				return out, fmt.Errorf("log %s: read %s: %w", p, c.ParentHashes[0], err)
			}
		}
		e, next, err := r.logStep(c, parent, cur)
		if err != nil {
			return out, fmt.Errorf("log %s at %s: %w", p, shortID(c.Hash.String()), err)
		}
		if e != nil {
			out = append(out, *e)
		}
		cur = next
		if parent == nil {
			break
		}
		h = parent.Hash
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w in %s", p, ErrNoHistory, r.dir)
	}
	return out, nil
}

// logStep compares cur in c with its first parent: the entry c makes (nil: c did not touch
// cur) and the name to look for in the parent.
func (r *Repo) logStep(c, parent *object.Commit, cur string) (*LogEntry, string, error) {
	now, okNow, err := r.entryIn(c, cur)
	if err != nil {
		return nil, cur, err
	}
	var was object.TreeEntry
	okWas := false
	if parent != nil {
		if was, okWas, err = r.entryIn(parent, cur); err != nil {
			return nil, cur, err
		}
	}
	if okNow == okWas && (!okNow || now.Hash == was.Hash) {
		return nil, cur, nil
	}
	e := newEntry(c, cur)
	switch {
	case okNow && okWas:
		e.Action, e.Blob, e.Before = ActModified, now.Hash.String(), was.Hash.String()
		return e, cur, nil
	case okNow:
		e.Action, e.Blob = ActAdded, now.Hash.String()
		if parent != nil {
			from, fromHash, err := r.movedFrom(parent, c, cur, now.Hash)
			if err != nil {
				return nil, cur, err
			}
			if from != "" {
				e.Action, e.From, e.Before = moveAction(from, cur), from, fromHash.String()
				return e, from, nil
			}
		}
		return e, cur, nil
	}
	e.Action, e.Before = ActDeleted, was.Hash.String()
	return e, cur, nil
}

func newEntry(c *object.Commit, cur string) *LogEntry {
	tr := commitmsg.Trailers(c.Message)
	return &LogEntry{Commit: c.Hash.String(), At: c.Committer.When.UTC(), Path: cur,
		Subject: firstLine(c.Message), Host: tr[TrailerHost], By: tr[TrailerAction]}
}

func moveAction(from, to string) string {
	switch {
	case memd.IsArchived(to) && !memd.IsArchived(from):
		return ActArchived
	case memd.IsArchived(from) && !memd.IsArchived(to):
		return ActUnarchived
	}
	return ActRenamed
}

// movedFrom is the path cur had in parent when c moved it there: its archive twin first
// (memd's own moves, which may also edit the file), else a path c deleted whose blob is
// cur's (an exact rename, git's 100% similarity). "" when cur is new.
func (r *Repo) movedFrom(parent, c *object.Commit, cur string, blob plumbing.Hash) (string, plumbing.Hash, error) {
	var twins []string
	if orig, _, ok := memd.UnarchivePath(cur); ok {
		twins = append(twins, orig)
	} else {
		// Unarchived: sleep archives by the year of the move, so the twin is this year's or,
		// across a new year, last year's.
		y := c.Committer.When.UTC().Year()
		twins = append(twins, memd.ArchivePath(cur, y), memd.ArchivePath(cur, y-1))
	}
	for _, tw := range twins {
		e, ok, err := r.entryIn(parent, tw)
		if err != nil {
			return "", plumbing.ZeroHash, err
		}
		if _, still, _ := r.entryIn(c, tw); ok && !still {
			return tw, e.Hash, nil
		}
	}
	pt, err := parent.Tree()
	if err != nil {
		return "", plumbing.ZeroHash, err
	}
	ct, err := c.Tree()
	if err != nil {
		return "", plumbing.ZeroHash, err
	}
	changes, err := object.DiffTree(pt, ct)
	if err != nil {
		return "", plumbing.ZeroHash, err
	}
	for _, ch := range changes {
		if ch.To.Name == "" && ch.From.TreeEntry.Hash == blob {
			return ch.From.Name, blob, nil
		}
	}
	return "", plumbing.ZeroHash, nil
}

// entryIn is the file entry at p in c's tree (ok false: no file there). It walks the trees
// itself rather than through go-git's FindEntry, which refuses a name with a control
// character: such a file is committed like any other, so its history must be read too.
func (r *Repo) entryIn(c *object.Commit, p string) (object.TreeEntry, bool, error) {
	t, err := object.GetTree(r.repo.Storer, c.TreeHash)
	if err != nil {
		return object.TreeEntry{}, false, err
	}
	parts := strings.Split(p, "/")
	for i, name := range parts {
		var found *object.TreeEntry
		for j := range t.Entries {
			if t.Entries[j].Name == name {
				found = &t.Entries[j]
				break
			}
		}
		if found == nil {
			return object.TreeEntry{}, false, nil
		}
		if i == len(parts)-1 {
			if !found.Mode.IsFile() {
				return object.TreeEntry{}, false, nil
			}
			return *found, true, nil
		}
		if found.Mode != filemode.Dir {
			return object.TreeEntry{}, false, nil
		}
		if t, err = object.GetTree(r.repo.Storer, found.Hash); err != nil {
			return object.TreeEntry{}, false, err
		}
	}
	return object.TreeEntry{}, false, nil
}

// Version is one version of a memory to restore: its content and the commit it came from.
type Version struct {
	Path   string // the name it had there
	Commit string
	Mode   filemode.FileMode
	Data   []byte
}

// VersionAt is the memory p as it was at commit at (a hash or a prefix of one, or an RFC3339
// time: the newest first-parent commit at or before it). The name p had then is followed
// through Log when p is a later name.
func (r *Repo) VersionAt(p, at string) (Version, error) {
	p = memd.NormalizePath(p)
	c, err := r.commitAt(at)
	if err != nil {
		return Version{}, err
	}
	name := p
	if log, lerr := r.Log(p); lerr == nil {
		name = nameAt(log, c.Hash.String(), p)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok, err := r.entryIn(c, name)
	if err != nil {
		return Version{}, err
	}
	if !ok {
		return Version{}, fmt.Errorf("%s: not in commit %s (%s): %w", p, shortID(c.Hash.String()), c.Committer.When.UTC().Format(time.RFC3339), ErrNoHistory)
	}
	data, err := r.blobLocked(e.Hash)
	return Version{Path: name, Commit: c.Hash.String(), Mode: e.Mode, Data: data}, err
}

// nameAt is the name the memory had at commit (from its log, newest first): the From of the
// last move made after commit.
func nameAt(log []LogEntry, commit, p string) string {
	name := p
	for _, e := range log {
		if e.Commit == commit {
			break
		}
		if e.From != "" {
			name = e.From
		}
	}
	return name
}

// LastVersion is the newest version of p before it was deleted (or moved away): what
// `memd restore PATH` without --at brings back.
func (r *Repo) LastVersion(p string) (Version, error) {
	log, err := r.Log(p)
	if err != nil {
		return Version{}, err
	}
	for _, e := range log {
		if e.Action == ActDeleted {
			if c, err := r.commitAt(e.Commit); err == nil && len(c.ParentHashes) > 0 {
				return r.VersionAt(p, c.ParentHashes[0].String())
			}
		}
	}
	return Version{}, fmt.Errorf("%s: %w: never deleted (give --at)", p, ErrNothingToRestore)
}

func (r *Repo) blobLocked(h plumbing.Hash) ([]byte, error) {
	b, err := r.repo.BlobObject(h)
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", shortID(h.String()), err)
	}
	rd, err := b.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

// commitAt resolves --at: a commit hash (or a unique prefix of at least 4 digits), else an
// RFC3339 time, the newest first-parent commit at or before it.
func (r *Repo) commitAt(at string) (*object.Commit, error) {
	head, err := r.readBranch()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncPacksLocked()
	if t, terr := time.Parse(time.RFC3339, at); terr == nil {
		for h := head; !h.IsZero(); {
			c, err := getCommit(r.repo.Storer, h)
			if err != nil {
				return nil, err
			}
			if !c.Committer.When.After(t) {
				return c, nil
			}
			if len(c.ParentHashes) == 0 {
				break
			}
			h = c.ParentHashes[0]
		}
		return nil, fmt.Errorf("--at %s: %w (no commit at or before it)", at, ErrBadAt)
	}
	if len(at) < 4 || strings.Trim(strings.ToLower(at), "0123456789abcdef") != "" {
		return nil, fmt.Errorf("--at %q: %w (want a commit hash or an RFC3339 time)", at, ErrBadAt)
	}
	h, err := r.repo.ResolveRevision(plumbing.Revision(at))
	if err != nil {
		return nil, fmt.Errorf("--at %s: %w: %v", at, ErrBadAt, err)
	}
	return getCommit(r.repo.Storer, *h)
}

// PlanRestore is what `memd restore p [--at at]` brings back and where: with at, p as it was
// then; without, an archived memory back under its name (p the archive path or the original
// name), else the last version before p was deleted. A p that is in HEAD as it is, without
// at, is ErrNothingToRestore.
func (r *Repo) PlanRestore(p, at string) (target string, v Version, err error) {
	p = memd.NormalizePath(p)
	if at != "" {
		v, err = r.VersionAt(p, at)
		return p, v, err
	}
	head, err := r.Head()
	if err != nil || head == "" {
		return p, v, fmt.Errorf("%s: %w (no commits yet)", p, ErrNoHistory)
	}
	if orig, _, ok := memd.UnarchivePath(p); ok {
		if v, err = r.VersionAt(p, head); err == nil {
			return orig, v, nil
		}
	} else if v, err = r.VersionAt(p, head); err == nil {
		return p, v, fmt.Errorf("%s: %w: it is in HEAD as it is (give --at COMMIT or --at TIME for an older version)", p, ErrNothingToRestore)
	}
	for _, tw := range r.archivedTwins(p) {
		if v, err = r.VersionAt(tw, head); err == nil {
			return p, v, nil
		}
	}
	v, err = r.LastVersion(p)
	return p, v, err
}

// archivedTwins are the work tree's archive/<YYYY>/p, newest year first.
func (r *Repo) archivedTwins(p string) []string {
	ents, err := os.ReadDir(filepath.Join(r.dir, string(memd.BucketArchive)))
	if err != nil {
		return nil
	}
	var out []string
	for i := len(ents) - 1; i >= 0; i-- {
		y, err := strconv.Atoi(ents[i].Name())
		if err != nil || !ents[i].IsDir() {
			continue
		}
		tw := memd.ArchivePath(p, y)
		if _, err := os.Lstat(filepath.Join(r.dir, filepath.FromSlash(tw))); err == nil {
			out = append(out, tw)
		}
	}
	return out
}

// Restore writes v back at target in the work tree and commits it with the restore trailer.
// Archived twins of target (archive/<YYYY>/target) go, so the memory is back under its name
// once, not twice. The caller holds the writer lock (agent.Session.Restore).
func (r *Repo) Restore(target string, v Version) (memd.CommitResult, error) {
	target = memd.NormalizePath(target)
	if v.Mode != filemode.Regular && v.Mode != filemode.Executable {
		return memd.CommitResult{}, fmt.Errorf("restore %s: %s at %s is not a regular file", target, v.Path, shortID(v.Commit))
	}
	t, err := safefs.Open(r.dir)
	if err != nil {
		return memd.CommitResult{}, err
	}
	defer t.Close()
	if d := path.Dir(target); d != "." {
		if err := t.MkdirAll(d, 0o755); err != nil {
			return memd.CommitResult{}, fmt.Errorf("restore %s: %w", target, err)
		}
	}
	perm := fs.FileMode(0o644)
	if v.Mode == filemode.Executable {
		perm = 0o755
	}
	data, err := r.smudgeFor(target, v.Data) // what `git checkout` writes (filters.go)
	if err != nil {
		return memd.CommitResult{}, fmt.Errorf("restore %s: %w", target, err)
	}
	if err := t.WriteFileAtomic(target, data, perm); err != nil {
		return memd.CommitResult{}, fmt.Errorf("restore %s: %w", target, err)
	}
	paths := []string{target}
	if !memd.IsArchived(target) {
		for _, tw := range r.archivedTwins(target) {
			if err := t.Remove(tw); err != nil {
				return memd.CommitResult{}, fmt.Errorf("restore %s: %w", target, err)
			}
			paths = append(paths, tw)
		}
	}
	msg := ActionMessage("restore", fmt.Sprintf("restore %s from %s", target, shortID(v.Commit)), r.opts.Hostname,
		TrailerFrom, v.Commit)
	res, err := r.commitAction(paths, msg)
	if err != nil {
		return res, fmt.Errorf("restore %s: %w", target, err)
	}
	return res, nil
}
