package sleep

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/internal/statedir"

	"github.com/memd-dev/memd"
)

type opKind string

const (
	opWrite opKind = "write" // write data to path (create or replace)
	opMove  opKind = "move"  // rename path to to (a pure rename: bytes unchanged)
)

// op is one change to the tree. Writes carry the bytes the plan saw (expect) so the apply
// refuses to overwrite a file a writer changed in between.
type op struct {
	kind   opKind
	path   string // repo-relative, '/'-separated
	to     string // move destination
	data   []byte // write: new content
	expect []byte // write: content the plan saw; nil with !exists = file must not exist
	exists bool   // write: the file existed at plan time
}

// plan is a phase's pure result: the ops to apply, the items to report and the counts.
type plan struct {
	ops    []op
	items  []Item
	counts map[string]int
}

func newPlan() *plan { return &plan{counts: map[string]int{}} }

func (p *plan) write(path string, data, expect []byte, exists bool) {
	p.ops = append(p.ops, op{kind: opWrite, path: path, data: data, expect: expect, exists: exists})
}

func (p *plan) move(from, to string) {
	p.ops = append(p.ops, op{kind: opMove, path: from, to: to})
}

func (p *plan) item(action, path, to, reason string) {
	p.items = append(p.items, Item{Action: action, Path: path, To: to, Reason: reason})
}

// paths lists every path the ops touch, for the commit.
func (p *plan) paths() []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, o := range p.ops {
		add(o.path)
		add(o.to)
	}
	sort.Strings(out)
	return out
}

// The journal makes a phase's apply undoable, in this process (a failure) and across a crash
// (SIGKILL): before the first op, the old bytes of every file a write replaces are saved in
// <state>/sleep-journal/ and a manifest names the ops; it is removed once the commit is made.
// Undo is guarded: a write is reverted only if the file still holds what sleep wrote, a move
// only if the file is still at its destination and nothing took its old place, so a writer's
// later change is never clobbered.
const journalDirName = "sleep-journal"

type journalEntry struct {
	Kind    opKind   `json:"kind"`
	Path    string   `json:"path"`
	To      string   `json:"to,omitempty"`
	Existed bool     `json:"existed,omitempty"` // write: old bytes saved as Backup
	Backup  string   `json:"backup,omitempty"`
	NewHash string   `json:"new_hash,omitempty"` // write: sha256 of the new content
	Dirs    []string `json:"-"`                  // directories the op created (in-process undo removes them)
}

type journalManifest struct {
	Run     string         `json:"run"`
	Phase   memd.Phase     `json:"phase"`
	Entries []journalEntry `json:"entries"`
}

type journal struct {
	root    string       // repo dir
	dir     string       // journal dir (absolute, for messages)
	tree    *safefs.Tree // the repo: every op goes through it, never beyond a symlink
	sd      *statedir.Dir
	man     journalManifest
	ops     []op
	applied int
	crashed bool // recovering after a kill: created dirs are unknown
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (r *Runner) journalDir() string { return filepath.Join(r.opts.StateDir, journalDirName) }

// ErrThroughSymlink: a plan would write, move or read beyond a symbolic link (a folder such
// as archive/2024 replaced by a link to elsewhere). The phase is refused before it changes
// anything, naming the path; nothing is committed for it.
var ErrThroughSymlink = errors.New("refusing to write through a symbolic link")

// openTrees opens the repo and the state dir through safefs for one apply or recovery.
func (r *Runner) openTrees() (*safefs.Tree, *statedir.Dir, error) {
	t, err := safefs.Open(r.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("repo %s: %w", r.dir, err)
	}
	sd, err := statedir.Open(r.opts.StateDir)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	return t, sd, nil
}

// close releases the journal's directory handles.
func (j *journal) close() {
	j.tree.Close()
	j.sd.Close()
}

// writeNoSync is safefs.Tree.WriteFileAtomic without its fsync (safefs.Temp.NoSync), for the
// apply: a phase writes hundreds of files and makes them durable with one flushFS before its
// commit (a fsync each made a night's sleep twice as slow).
func (j *journal) writeNoSync(rel string, data []byte, perm os.FileMode) error {
	tm, err := j.tree.CreateTemp(rel, perm)
	if err != nil {
		return err
	}
	tm.NoSync()
	if _, err := tm.Write(data); err != nil {
		tm.Abort()
		return err
	}
	return tm.Commit()
}

// symlinkErr restates a safefs refusal of rel as ErrThroughSymlink naming the path.
func symlinkErr(what, rel string, err error) error {
	if errors.Is(err, safefs.ErrSymlink) || errors.Is(err, safefs.ErrEscape) {
		return fmt.Errorf("%s %s: %w (%w)", what, rel, ErrThroughSymlink, err)
	}
	return fmt.Errorf("%s %s: %w", what, rel, err)
}

// checkParents refuses rel when a directory on its way exists and is not a real directory
// (a symlink, a file); missing ones are fine (the apply creates them).
func (j *journal) checkParents(rel string) error {
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		fi, err := j.tree.Lstat(d)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return symlinkErr("sleep: plan for", rel, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return symlinkErr("sleep: plan for", rel, &fs.PathError{Op: "lstat", Path: d, Err: safefs.ErrSymlink})
		}
		break // a real directory: safefs checked everything above it
	}
	return nil
}

// openJournal checks every op's guard against the tree, saves the old bytes and writes the
// manifest. Nothing in the tree has changed when it returns.
// check refuses an op the tree no longer allows: a path beyond a symlink, a write over bytes
// other than the plan saw, a move of a file gone or onto one that exists.
func (j *journal) check(o op) error {
	for _, rel := range []string{o.path, o.to} {
		if rel == "" {
			continue
		}
		if err := safefs.CheckRel(rel); err != nil {
			return symlinkErr("sleep: plan for", rel, err)
		}
		if err := j.checkParents(rel); err != nil {
			return err
		}
	}
	switch o.kind {
	case opWrite:
		cur, err := j.tree.ReadFile(o.path)
		exists := err == nil
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return symlinkErr("read", o.path, err)
		}
		if exists != o.exists || (exists && !bytes.Equal(cur, o.expect)) {
			return fmt.Errorf("%s: %w", o.path, ErrConflict)
		}
	case opMove:
		fi, err := j.tree.Lstat(o.path)
		if err != nil {
			return symlinkErr("move", o.path, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("move %s: not a regular file", o.path)
		}
		if _, err := j.tree.Lstat(o.to); err == nil {
			return fmt.Errorf("move %s: destination %s exists: %w", o.path, o.to, ErrConflict)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return symlinkErr("move "+o.path+" to", o.to, err)
		}
	}
	return nil
}

// backup is op i's journal entry, with the old bytes a write replaces saved beside the
// manifest (not fsynced one by one: openJournal makes them all durable at once).
func (j *journal) backup(i int, o op) (journalEntry, error) {
	e := journalEntry{Kind: o.kind, Path: o.path, To: o.to}
	if o.kind != opWrite {
		return e, nil
	}
	e.NewHash = sum(o.data)
	if !o.exists {
		return e, nil
	}
	e.Existed = true
	e.Backup = strconv.Itoa(i)
	err := j.sd.WriteCache(journalDirName+"/"+e.Backup, 0o600, time.Time{}, func(w io.Writer) error {
		_, err := w.Write(o.expect)
		return err
	})
	if err != nil {
		return e, fmt.Errorf("sleep journal backup of %s: %w", o.path, err)
	}
	return e, nil
}

func (r *Runner) openJournal(runID string, ph memd.Phase, p *plan) (_ *journal, err error) {
	t, sd, err := r.openTrees()
	if err != nil {
		return nil, err
	}
	j := &journal{root: r.dir, dir: r.journalDir(), tree: t, sd: sd, ops: p.ops,
		man: journalManifest{Run: runID, Phase: ph}}
	defer func() {
		if err != nil {
			j.close()
		}
	}()
	for _, o := range p.ops {
		if err := j.check(o); err != nil {
			return nil, err
		}
	}
	if err := sd.Ensure(); err != nil {
		return nil, err
	}
	if err := sd.RemoveAll(journalDirName); err != nil {
		return nil, fmt.Errorf("clear sleep journal %s: %w", j.dir, err)
	}
	if err := sd.MkdirAll(journalDirName); err != nil {
		return nil, fmt.Errorf("sleep journal %s: %w", j.dir, err)
	}
	for i, o := range p.ops {
		e, err := j.backup(i, o)
		if err != nil {
			return nil, err
		}
		j.man.Entries = append(j.man.Entries, e)
	}
	// Backups durable before the manifest that points at them; the manifest durable before
	// the first op.
	if err := flushFS(j.dir); err != nil {
		return nil, err
	}
	if err := j.save(); err != nil {
		return nil, err
	}
	return j, nil
}

// save writes the manifest atomically and durably.
func (j *journal) save() error {
	data, err := json.Marshal(j.man)
	if err != nil {
		return fmt.Errorf("encode sleep journal: %w", err)
	}
	if err := j.sd.WriteFile(journalDirName+"/journal.json", data, 0o600); err != nil {
		return fmt.Errorf("sleep journal: %w", err)
	}
	return nil
}

// mkdirs creates the parents of rel that are missing and returns them, deepest last. An
// existing parent that is a symlink is refused (ErrThroughSymlink), never created through.
func (j *journal) mkdirs(rel string) ([]string, error) {
	var missing []string
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		fi, err := j.tree.Lstat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, symlinkErr("mkdir", d, &fs.PathError{Op: "lstat", Path: d, Err: safefs.ErrSymlink})
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, symlinkErr("mkdir", d, err)
		}
		missing = append(missing, d)
	}
	// missing is deepest first; create shallowest first.
	var made []string
	for i := len(missing) - 1; i >= 0; i-- {
		if err := j.tree.MkdirAll(missing[i], 0o755); err != nil {
			return made, symlinkErr("mkdir", missing[i], err)
		}
		made = append(made, missing[i])
	}
	return made, nil
}

// apply performs op i. Created directories are recorded in memory (undo in this process);
// after a crash, undo removes empty parents of moved/written files instead.
func (j *journal) apply(i int) error {
	o := j.ops[i]
	target := o.path
	if o.kind == opMove {
		target = o.to
	}
	made, err := j.mkdirs(target)
	j.man.Entries[i].Dirs = made
	j.applied = i + 1
	if err != nil {
		return err
	}
	switch o.kind {
	case opWrite:
		perm := os.FileMode(0o644)
		if fi, err := j.tree.Lstat(o.path); err == nil && fi.Mode().IsRegular() {
			perm = fi.Mode().Perm()
		}
		// Not fsynced here: the runner flushes the filesystem once before the commit.
		if err := j.writeNoSync(o.path, o.data, perm); err != nil {
			return symlinkErr("write", o.path, err)
		}
	case opMove:
		if err := j.tree.Rename(o.path, o.to); err != nil {
			return symlinkErr("move "+o.path+" to", o.to, err)
		}
	}
	return nil
}

// abort undoes the apply after cause stopped it and drops the journal; an undo that fails
// keeps the journal (the next start's Recover tries again) and is named beside cause.
func (j *journal) abort(cause error, log *slog.Logger) error {
	if err := j.undo(log); err != nil {
		return fmt.Errorf("%w (and undo: %v)", cause, err)
	}
	j.remove()
	return cause
}

// undo reverts the applied entries, newest first, each guarded.
func (j *journal) undo(log *slog.Logger) error {
	var errs []error
	for i := j.applied - 1; i >= 0; i-- {
		if err := j.undoEntry(j.man.Entries[i], log); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (j *journal) undoEntry(e journalEntry, log *slog.Logger) error {
	switch e.Kind {
	case opWrite:
		cur, err := j.tree.ReadFile(e.Path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && !e.Existed {
				break // never written
			}
			if errors.Is(err, fs.ErrNotExist) {
				// The file existed and is gone: not sleep's doing (a write replaces, never
				// deletes); leave it to the writer.
				log.Warn("sleep undo: file removed since the apply, leaving it", "path", e.Path)
				break
			}
			return fmt.Errorf("undo %s: %w", e.Path, err)
		}
		if sum(cur) != e.NewHash {
			break // not applied, or a writer changed it since: leave it
		}
		if !e.Existed {
			if err := j.tree.Remove(e.Path); err != nil {
				return fmt.Errorf("undo %s: %w", e.Path, err)
			}
			break
		}
		old, err := j.sd.ReadFile(journalDirName + "/" + e.Backup)
		if err != nil {
			return fmt.Errorf("undo %s: backup: %w", e.Path, err)
		}
		perm := os.FileMode(0o644)
		if fi, err := j.tree.Lstat(e.Path); err == nil {
			perm = fi.Mode().Perm()
		}
		if err := j.tree.WriteFileAtomic(e.Path, old, perm); err != nil {
			return fmt.Errorf("undo %s: %w", e.Path, err)
		}
	case opMove:
		if _, err := j.tree.Lstat(e.To); err != nil {
			break // not moved
		}
		if _, err := j.tree.Lstat(e.Path); err == nil {
			log.Warn("sleep undo: old path taken again, leaving the moved file", "path", e.Path, "at", e.To)
			break
		}
		if err := j.tree.Rename(e.To, e.Path); err != nil {
			return fmt.Errorf("undo move %s: %w", e.Path, err)
		}
	}
	dirs := e.Dirs
	if j.crashed {
		// After a crash the created dirs are unknown: try the parents of the target; only
		// empty ones go, and git does not track empty directories anyway.
		t := e.Path
		if e.Kind == opMove {
			t = e.To
		}
		for d := path.Dir(t); d != "." && d != "/"; d = path.Dir(d) {
			dirs = append([]string{d}, dirs...)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if j.tree.Remove(dirs[i]) != nil {
			break // not empty (or gone): stop climbing
		}
	}
	return nil
}

func (j *journal) remove() {
	_ = j.sd.RemoveAll(journalDirName)
}

// recoverJournal undoes a phase that a killed run left half applied. If that phase was in
// fact committed (killed after the commit), the journal is only removed.
func (r *Runner) recoverJournal(runID string, done map[memd.Phase]bool) error {
	dir := r.journalDir()
	t, sd, err := r.openTrees()
	if err != nil {
		return err
	}
	defer func() { t.Close(); sd.Close() }()
	data, err := sd.ReadFile(journalDirName + "/journal.json")
	if errors.Is(err, fs.ErrNotExist) {
		// No manifest: a crash before it was written touched nothing.
		_ = sd.RemoveAll(journalDirName)
		return nil
	}
	if errors.Is(err, safefs.ErrSymlink) {
		// memd writes its journal as a real folder of real files: a link there is not its
		// journal, and nothing is undone from it. The link goes (not what it points at).
		r.log.Warn("sleep: dropping a journal memd did not write", "path", dir, "err", err)
		if err := sd.RemoveAll(journalDirName); err != nil {
			return fmt.Errorf("sleep journal %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read sleep journal: %w", err)
	}
	var man journalManifest
	if err := json.Unmarshal(data, &man); err != nil {
		return fmt.Errorf("sleep journal %s: %w", dir, err)
	}
	committed := man.Run == runID && done[man.Phase]
	if !committed && man.Run != runID {
		d, err := r.committedPhases(man.Run)
		if err != nil {
			return err
		}
		committed = d[man.Phase]
	}
	j := &journal{root: r.dir, dir: dir, tree: t, sd: sd, man: man, applied: len(man.Entries), crashed: true}
	if !committed {
		r.log.Warn("sleep: undoing a phase a previous run left half applied", "run", man.Run, "phase", man.Phase)
		if err := j.undo(r.log); err != nil {
			return fmt.Errorf("undo half-applied sleep %s of run %s: %w", man.Phase, man.Run, err)
		}
	}
	sweepTemps(t, man.Entries)
	j.remove()
	return nil
}

// sweepTemps removes the temp files that a killed apply left beside the journal's targets
// (safefs's ".memd-<random>.tmp", and an older memd's ".<name>.memd-*.tmp"): memd never
// commits them, but `git status` would show them to the user for good. Names only, through
// the tree: nothing beyond a symlink.
func sweepTemps(t *safefs.Tree, entries []journalEntry) {
	legacy := map[string][]string{} // dir -> the ".<name>.memd-" prefixes of its targets
	var dirs []string
	for _, e := range entries {
		for _, p := range []string{e.Path, e.To} {
			if p == "" {
				continue
			}
			dir := path.Dir(p)
			if _, ok := legacy[dir]; !ok {
				dirs = append(dirs, dir)
			}
			legacy[dir] = append(legacy[dir], "."+path.Base(p)+".memd-")
		}
	}
	for _, dir := range dirs {
		if fi, err := t.Lstat(dir); dir != "." && (err != nil || !fi.IsDir()) {
			continue
		}
		names, _ := t.ReadDirNames(dir)
		for _, n := range names {
			drop := safefs.IsTempName(n)
			for _, pre := range legacy[dir] {
				drop = drop || strings.HasPrefix(n, pre) && strings.HasSuffix(n, ".tmp")
			}
			if drop {
				_ = t.Remove(path.Join(dir, n))
			}
		}
	}
}
