package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/commitmsg"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/sync/pathlog"
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
	ActAdded      = pathlog.ActAdded
	ActModified   = pathlog.ActModified
	ActDeleted    = pathlog.ActDeleted
	ActRenamed    = pathlog.ActRenamed
	ActArchived   = pathlog.ActArchived
	ActUnarchived = pathlog.ActUnarchived
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

// Log is the history of the memory p (repo-relative), newest first: the first-parent chain
// from HEAD, as `git log --first-parent --follow` walks it, following a rename to a path
// with the same content and an archive move (archive/<YYYY>/p ↔ p, memd.ArchivePath) back
// to the earlier name. A merge that brought the other side's version shows as a change.
func (h History) Log(p string) ([]LogEntry, error) {
	var out []LogEntry
	err := h.LogEach(p, func(e LogEntry) bool { out = append(out, e); return true })
	return out, err
}

// LogEach sends Log's entries to fn as the walk finds them, newest first, until fn answers
// false. The walk reads its own view of the object store (sync/pathlog), not Repo.mu's, so
// it may run beside the owner's commits. ErrNoHistory when it found none.
func (h History) LogEach(p string, fn func(LogEntry) bool) error {
	return h.LogWalk(p, fn, nil)
}

// LogWalk is LogEach with progress: every few thousand commits walked, the count so far.
func (h History) LogWalk(p string, fn func(LogEntry) bool, progress func(commits int)) error {
	r := h.r
	p = memd.NormalizePath(p)
	head, err := r.readBranch()
	if err != nil {
		return err
	}
	src := pathlog.Open(r.commonDir)
	defer src.Close()
	n := 0
	w := &pathlog.Walk{Source: src, Head: head, Path: p, Progress: progress, Entry: func(e pathlog.Entry) bool {
		n++
		return fn(logEntry(e))
	}}
	if err := w.Run(); err != nil {
		return fmt.Errorf("log %s: %w", p, err)
	}
	src.KeepGraph()
	if n == 0 {
		return fmt.Errorf("%s: %w in %s", p, ErrNoHistory, r.dir)
	}
	return nil
}

func logEntry(e pathlog.Entry) LogEntry {
	tr := commitmsg.Trailers(e.Message)
	le := LogEntry{Commit: e.Commit.String(), At: e.At.UTC(), Action: e.Action, Path: e.Path, From: e.From,
		Subject: firstLine(e.Message), Host: tr[TrailerHost], By: tr[TrailerAction]}
	if !e.Blob.IsZero() {
		le.Blob = e.Blob.String()
	}
	if !e.Before.IsZero() {
		le.Before = e.Before.String()
	}
	return le
}

// History is the history of the repo's memories: their log, their versions and what a
// restore brings back, walked by sync/pathlog beside the owner's go-git handle. A value over
// the Repo, so the repo's handle keeps its own job: r.History().Log(p).
type History struct{ r *Repo }

// History is r's memories' history.
func (r *Repo) History() History { return History{r} }

// Version is one version of a memory to restore: its content and the commit it came from.
type Version struct {
	Path   string // the name it had there
	Commit string
	Mode   filemode.FileMode
	Data   []byte
}

// VersionAt is the memory p as it was at commit at (a hash or a prefix of one, or an RFC3339
// time: the newest first-parent commit at or before it). It reads p there straight away;
// only when p is not there does it walk from HEAD down to that commit for the name p had
// then (p itself for a commit off the first-parent chain).
func (h History) VersionAt(p, at string) (Version, error) {
	r := h.r
	p = memd.NormalizePath(p)
	head, err := r.readBranch()
	if err != nil {
		return Version{}, err
	}
	want, t, err := h.parseAt(at)
	if err != nil {
		return Version{}, err
	}
	src := pathlog.Open(r.commonDir)
	defer src.Close()
	var when time.Time
	if want.IsZero() {
		if want, when, err = src.CommitAt(head, t); err != nil {
			return Version{}, fmt.Errorf("--at %s: %w", at, err)
		}
		if want.IsZero() {
			return Version{}, fmt.Errorf("--at %s: %w (no commit at or before it)", at, ErrBadAt)
		}
	}
	if v, err := versionIn(src, want, when, p, p); !errors.Is(err, ErrNoHistory) {
		return v, err
	}
	name := p
	w := &pathlog.Walk{Source: src, Head: head, Path: p, Visit: func(id plumbing.Hash, at time.Time, cur string) bool {
		if id == want {
			name, when = cur, at
			return true
		}
		return false
	}}
	if err := w.Run(); err != nil {
		return Version{}, fmt.Errorf("%s at %s: %w", p, at, err)
	}
	src.KeepGraph()
	return versionIn(src, want, when, name, p)
}

// versionIn reads name in commit c as the Version of p.
func versionIn(src *pathlog.Source, c plumbing.Hash, when time.Time, name, p string) (Version, error) {
	mode, data, err := src.ReadFile(c, name)
	if errors.Is(err, pathlog.ErrNotFound) {
		at := ""
		if !when.IsZero() {
			at = " (" + when.UTC().Format(time.RFC3339) + ")"
		}
		return Version{}, fmt.Errorf("%s: not in commit %s%s: %w", p, shortID(c.String()), at, ErrNoHistory)
	}
	if err != nil {
		return Version{}, fmt.Errorf("%s in %s: %w", name, shortID(c.String()), err)
	}
	return Version{Path: name, Commit: c.String(), Mode: mode, Data: data}, nil
}

// LastVersion is the newest version of p before it was deleted (or moved away): what
// `memd restore PATH` without --at brings back. The walk stops at the deleting commit.
func (h History) LastVersion(p string) (Version, error) {
	r := h.r
	p = memd.NormalizePath(p)
	var del *LogEntry
	var parent plumbing.Hash
	head, err := r.readBranch()
	if err != nil {
		return Version{}, err
	}
	src := pathlog.Open(r.commonDir)
	defer src.Close()
	n := 0
	w := &pathlog.Walk{Source: src, Head: head, Path: p, Entry: func(e pathlog.Entry) bool {
		n++
		if e.Action == ActDeleted && !e.Parent.IsZero() {
			le := logEntry(e)
			del, parent = &le, e.Parent
			return false
		}
		return true
	}}
	if err := w.Run(); err != nil {
		return Version{}, fmt.Errorf("log %s: %w", p, err)
	}
	src.KeepGraph()
	if n == 0 {
		return Version{}, fmt.Errorf("%s: %w in %s", p, ErrNoHistory, r.dir)
	}
	if del == nil {
		return Version{}, fmt.Errorf("%s: %w: never deleted (give --at)", p, ErrNothingToRestore)
	}
	return versionIn(src, parent, time.Time{}, del.Path, p)
}

// parseAt reads --at: a commit (a hash or a unique prefix of at least 4 digits) or, with
// a zero hash, an RFC3339 time.
func (h History) parseAt(at string) (plumbing.Hash, time.Time, error) {
	r := h.r
	if t, terr := time.Parse(time.RFC3339, at); terr == nil {
		return plumbing.ZeroHash, t, nil
	}
	if len(at) < 4 || strings.Trim(strings.ToLower(at), "0123456789abcdef") != "" {
		return plumbing.ZeroHash, time.Time{}, fmt.Errorf("--at %q: %w (want a commit hash or an RFC3339 time)", at, ErrBadAt)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncPacksLocked()
	id, err := r.repo.ResolveRevision(plumbing.Revision(at))
	if err != nil {
		return plumbing.ZeroHash, time.Time{}, fmt.Errorf("--at %s: %w: %v", at, ErrBadAt, err)
	}
	return *id, time.Time{}, nil
}

// PlanRestore is what `memd restore p [--at at]` brings back and where: with at, p as it was
// then; without, an archived memory back under its name (p the archive path or the original
// name), else the last version before p was deleted. A p that is in HEAD as it is, without
// at, is ErrNothingToRestore.
func (h History) PlanRestore(p, at string) (target string, v Version, err error) {
	r := h.r
	p = memd.NormalizePath(p)
	if at != "" {
		v, err = h.VersionAt(p, at)
		return p, v, err
	}
	head, err := r.Head()
	if err != nil || head == "" {
		return p, v, fmt.Errorf("%s: %w (no commits yet)", p, ErrNoHistory)
	}
	if orig, _, ok := memd.UnarchivePath(p); ok {
		if v, err = h.VersionAt(p, head); err == nil {
			return orig, v, nil
		}
	} else if v, err = h.VersionAt(p, head); err == nil {
		return p, v, fmt.Errorf("%s: %w: it is in HEAD as it is (give --at COMMIT or --at TIME for an older version)", p, ErrNothingToRestore)
	}
	for _, tw := range h.archivedTwins(p) {
		if v, err = h.VersionAt(tw, head); err == nil {
			return p, v, nil
		}
	}
	v, err = h.LastVersion(p)
	return p, v, err
}

// archivedTwins are the work tree's archive/<YYYY>/p, newest year first.
func (h History) archivedTwins(p string) []string {
	r := h.r
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
func (h History) Restore(target string, v Version) (memd.CommitResult, error) {
	r := h.r
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
		for _, tw := range h.archivedTwins(target) {
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

// LogPage is one page of Log for a caller that asks again for more (the page's history):
// up to limit entries from the walk's position from ("" the branch head; else the Next
// of the page before), walking at most maxCommits commits and for at most budget (each 0:
// no bound) so that a long walk answers with what it has and how far it got. Next is ""
// when the walk is done.
type LogPage struct {
	Entries []LogEntry `json:"entries"`
	Next    string     `json:"next,omitempty"`
	Walked  int        `json:"walked"`
}

// ErrBadCursor: LogPage's from is not a Next it gave.
var ErrBadCursor = errors.New("not a history position")

// LogPage walks one page; see the LogPage type.
func (h History) LogPage(p, from string, limit, maxCommits int, budget time.Duration) (LogPage, error) {
	r := h.r
	t0 := time.Now()
	p = memd.NormalizePath(p)
	var start plumbing.Hash
	name := p
	if from != "" {
		c, n, ok := strings.Cut(from, ":")
		if !ok || len(c) != 40 || strings.Trim(c, "0123456789abcdef") != "" || memd.NormalizePath(n) == "" {
			return LogPage{}, fmt.Errorf("%q: %w", from, ErrBadCursor)
		}
		start, name = plumbing.NewHash(c), memd.NormalizePath(n)
	} else {
		var err error
		if start, err = r.readBranch(); err != nil {
			return LogPage{}, err
		}
	}
	src := pathlog.Open(r.commonDir)
	defer src.Close()
	var pg LogPage
	w := &pathlog.Walk{Source: src, Head: start, Path: name,
		Visit: func(id plumbing.Hash, _ time.Time, cur string) bool {
			over := budget > 0 && pg.Walked%1000 == 999 && time.Since(t0) > budget
			if over || maxCommits > 0 && pg.Walked >= maxCommits {
				pg.Next = id.String() + ":" + cur
				return true
			}
			pg.Walked++
			return false
		},
		Entry: func(e pathlog.Entry) bool {
			pg.Entries = append(pg.Entries, logEntry(e))
			if limit > 0 && len(pg.Entries) >= limit && !e.Parent.IsZero() {
				next := e.Path
				if e.From != "" {
					next = e.From
				}
				pg.Next = e.Parent.String() + ":" + next
				return false
			}
			return true
		}}
	if err := w.Run(); err != nil {
		return pg, fmt.Errorf("log %s: %w", p, err)
	}
	src.KeepGraph()
	if from == "" && pg.Next == "" && len(pg.Entries) == 0 {
		return pg, fmt.Errorf("%s: %w in %s", p, ErrNoHistory, r.dir)
	}
	return pg, nil
}
