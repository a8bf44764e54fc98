package gitrepo

import (
	"github.com/memd-dev/memd/internal/gitconfig"

	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/sync/gitstore"
)

// Incremental commit (docs/ARCHITECTURE.md §3). Cost grows with the number of given paths
// and their depth, never with the repo size: only the given paths are
// lstat'ed and hashed, only the trees on their ancestor chains are read and
// rewritten, and the ref moves with compare-and-set against the head read at
// the start. go-git's Worktree.Status/Add are never used here.

// inMemoryLimit: files up to this size are read whole; larger ones are
// hashed and compressed in one streaming pass.
var inMemoryLimit int64 = 32 << 20

// CommitPaths commits the given paths (files or directories, absolute under
// the repo or repo-relative) as a "change" commit with memd's message.
// Paths whose content equals HEAD's are no change; no change = no commit
// (Hash ""). A compare-and-set failure returns memd.ErrHeadMoved: retry.
func (r *Repo) CommitPaths(paths []string) (memd.CommitResult, error) {
	return r.CommitPathsMessage(paths, "", memd.CommitChange)
}

// CommitPathsMessage is CommitPaths with the caller's message and kind
// (sleep builds its own message). An empty message gets memd's change
// message.
func (r *Repo) CommitPathsMessage(paths []string, message string, kind memd.CommitKind) (memd.CommitResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitPathsLocked(paths, message, kind, nil)
}

// CommitPathsRead is CommitPaths that calls afterRead (once, on every path
// that returns) as soon as every path has been read from the work tree,
// before the objects are made durable and the branch moves: from there on
// the commit touches nothing a writer writes, so the caller can release the
// writer lock (.memory.lock) early rather than across the fsyncs.
func (r *Repo) CommitPathsRead(paths []string, afterRead func()) (memd.CommitResult, error) {
	var once sync.Once
	done := func() {
		if afterRead != nil {
			once.Do(afterRead)
		}
	}
	defer done()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commitPathsLocked(paths, "", memd.CommitChange, done)
}

// edit is the new state of one blob path: deleted, or mode+hash.
type edit struct {
	del  bool
	mode filemode.FileMode
	hash plumbing.Hash
	op   byte // 'A', 'M', 'D'
}

// stager computes the edits of one commit against a base tree.
type stager struct {
	*treeCache
	r       *Repo
	base    plumbing.Hash
	objs    *gitstore.ObjectBatch
	edits   map[string]edit
	dirOK   map[string]bool     // ancestor directory checks (parentsAreDirs)
	nested  map[string]bool     // ancestor nested-repo checks (underNestedRepo)
	skipped []string            // unreadable paths (skip)
	written map[string]hotTree  // the trees this commit wrote, by directory (for Repo.hot)
	guarded map[string]*Guarded // the guard's verdicts (nil: rel is held no more), guard.go
}

// treeCache reads and indexes tree objects from one object store.
type treeCache struct {
	st    storer.EncodedObjectStorer
	trees map[plumbing.Hash]*treeView
}

func newTreeCache(st storer.EncodedObjectStorer) *treeCache {
	return &treeCache{st: st, trees: make(map[plumbing.Hash]*treeView)}
}

// newTreeCacheHot is newTreeCache seeded with views already made (Repo.hot).
func newTreeCacheHot(st storer.EncodedObjectStorer, hot map[plumbing.Hash]*treeView) *treeCache {
	tc := &treeCache{st: st, trees: make(map[plumbing.Hash]*treeView, len(hot)+8)}
	for h, tv := range hot {
		tc.trees[h] = tv
	}
	return tc
}

// treeView is a decoded tree. Its entries are in git's order (as git writes trees), and a
// name is found by binary search; byName indexes a tree that is not in order (a foreign
// or damaged one), where a search could miss.
type treeView struct {
	entries []object.TreeEntry
	byName  map[string]int
	z       *gitstore.PackedTree // a big tree memd wrote: its bytes and compressed pieces (gitstore/treez.go)
	gen     uint64               // when a commit last wrote it (Repo.hot's eviction order)
}

func newTreeView(entries []object.TreeEntry) *treeView {
	tv := &treeView{entries: entries}
	for i := 1; i < len(entries); i++ {
		if !treeEntryLess(entries[i-1], entries[i]) {
			tv.byName = make(map[string]int, len(entries))
			for j, e := range entries {
				tv.byName[e.Name] = j
			}
			break
		}
	}
	return tv
}

// find returns the index of the entry called name.
func (tv *treeView) find(name string) (int, bool) {
	if tv.byName != nil {
		i, ok := tv.byName[name]
		return i, ok
	}
	es := tv.entries
	for _, dir := range [2]bool{false, true} { // a file sorts as name, a directory as name + "/"
		i := sort.Search(len(es), func(i int) bool {
			return !treeKeyLess(es[i].Name, es[i].Mode == filemode.Dir, name, dir)
		})
		if i < len(es) && es[i].Name == name && (es[i].Mode == filemode.Dir) == dir {
			return i, true
		}
	}
	return 0, false
}

// treeKeyLess orders tree entries as git does: by name, a directory's name compared as if
// it ended in "/". No allocation (this runs for every entry of a 40k-entry tree).
func treeKeyLess(an string, adir bool, bn string, bdir bool) bool {
	n := min(len(an), len(bn))
	if an[:n] != bn[:n] {
		return an[:n] < bn[:n]
	}
	next := func(s string, dir bool) int {
		switch {
		case len(s) > n:
			return int(s[n])
		case dir:
			return '/'
		}
		return -1 // the end
	}
	a, b := next(an, adir), next(bn, bdir)
	if a == '/' && b == '/' && len(an) == n && len(bn) == n {
		return false // the same directory name
	}
	return a < b
}

func treeEntryLess(a, b object.TreeEntry) bool {
	return treeKeyLess(a.Name, a.Mode == filemode.Dir, b.Name, b.Mode == filemode.Dir)
}

func (r *Repo) commitPathsLocked(paths []string, message string, kind memd.CommitKind, afterRead func()) (memd.CommitResult, error) {
	start := time.Now()
	if kind == "" {
		kind = memd.CommitChange
	}
	res := memd.CommitResult{Kind: kind}
	// The gate first (gitops.go): with HEAD on another branch or a git operation waiting
	// for the user, the work tree is not memd's branch's, so nothing in it is committed.
	if err := r.standAsideWait("commit"); err != nil {
		return res, err
	}
	if err := r.requireNoMergeLocked(); err != nil {
		return res, fmt.Errorf("commit in %s: %w", r.dir, err)
	}
	r.syncPacksLocked()
	old, err := r.readBranch()
	if err != nil {
		return res, err
	}
	res, commit, verdict, err := r.writeChangeCommitLocked(old, paths, message, kind, afterRead, kind == memd.CommitChange)
	if err != nil || commit.IsZero() {
		return res, err
	}
	tFlushed := time.Now()
	if r.testBeforeRef != nil {
		r.testBeforeRef()
	}
	if message == "" {
		message = ChangeMessage(res.Changes, r.opts.Hostname)
	}
	if err := r.updateRef(r.BranchRef().String(), commit, old, "commit: "+firstLine(message)); err != nil {
		return res, fmt.Errorf("commit in %s: %w", r.dir, err)
	}
	res.Hash = commit.String()
	res.Duration = time.Since(start)
	r.noteDeletes(verdict)
	r.noteCommitted(old, commit, res.Changes)
	r.afterCommitHooks()
	r.log.Debug("committed", "hash", res.Hash[:12], "kind", string(kind),
		"added", res.Added, "modified", res.Modified, "deleted", res.Deleted, "took", res.Duration,
		"ref", time.Since(tFlushed))
	return res, nil
}

// writeChangeCommitLocked stages paths from the work tree against parent's tree and writes
// a commit of the result with parent as its only parent, durably, without moving any ref
// (commit zero: nothing changed; verdict: the mass deletion brake's, noted once the ref
// moved, massdelete.go). CommitPaths moves the branch to it; a sync commits edits
// made during a checkout on the head they were made on (mergeEditsLocked). brake: the mass
// deletion brake applies (a batch of writers' changes; not a checkout's own window, whose
// ref already moved).
func (r *Repo) writeChangeCommitLocked(old plumbing.Hash, paths []string, message string, kind memd.CommitKind, afterRead func(), brake bool) (res memd.CommitResult, commit plumbing.Hash, verdict brakeVerdict, err error) {
	start := time.Now()
	res = memd.CommitResult{Kind: kind}
	var baseTree plumbing.Hash
	if !old.IsZero() {
		c, err := getCommit(r.repo.Storer, old)
		if err != nil {
			return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: read HEAD commit %s: %w", r.dir, old, err)
		}
		baseTree = c.TreeHash
	}
	r.filters.begin(nil)
	st := &stager{treeCache: newTreeCacheHot(r.repo.Storer, r.hot), r: r, base: baseTree, written: map[string]hotTree{},
		objs: r.newObjectBatch(), edits: make(map[string]edit), dirOK: make(map[string]bool),
		nested: make(map[string]bool)}
	defer st.objs.Discard()
	defer func() { r.applyGuarded(st.guarded) }()
	if err := st.stagePaths(paths); err != nil {
		return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: %w", r.dir, err)
	}
	if afterRead != nil {
		afterRead()
	}
	st.keepHookHeld()
	res.Skipped = st.skipped
	if len(st.edits) == 0 {
		res.Duration = time.Since(start)
		return res, plumbing.ZeroHash, brakeVerdict{}, nil
	}
	tStaged := time.Now()
	newTree, _, err := st.rebuild(baseTree, buildTrie(st.edits), "")
	if err != nil {
		return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: %w", r.dir, err)
	}
	if newTree.IsZero() {
		// Everything deleted: git's empty tree.
		if newTree, err = st.objs.Write(plumbing.TreeObject, nil); err != nil {
			return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: %w", r.dir, err)
		}
	}
	if newTree == baseTree {
		res.Duration = time.Since(start)
		return res, plumbing.ZeroHash, brakeVerdict{}, nil
	}
	if brake {
		if verdict, err = st.brakeLocal(); err != nil {
			return res, plumbing.ZeroHash, verdict, fmt.Errorf("commit in %s: %w", r.dir, err)
		}
	}
	// The repo's git hooks, for a writers' batch (brake) and memd's own kinds (sleep), not
	// a checkout's window of edits: refused paths are held (githooks.go).
	if (brake || kind != memd.CommitChange) && r.gitHooks.Before() {
		if newTree, message, err = st.commitHooks(baseTree, message); err != nil {
			return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: %w", r.dir, err)
		}
		if newTree == baseTree {
			res.Duration = time.Since(start)
			return res, plumbing.ZeroHash, brakeVerdict{}, nil
		}
	}
	res.Changes = st.changes()
	tally(&res)
	if message == "" {
		message = ChangeMessage(res.Changes, r.opts.Hostname)
	}
	if commit, err = st.writeCommit(newTree, old, message); err != nil {
		return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: %w", r.dir, err)
	}
	tBuilt := time.Now()
	// Objects must be durable before the ref names them.
	if err := st.objs.Flush(); err != nil {
		return res, plumbing.ZeroHash, brakeVerdict{}, fmt.Errorf("commit in %s: %w", r.dir, err)
	}
	r.log.Debug("commit staged", "kind", string(kind), "stage", tStaged.Sub(start),
		"trees", tBuilt.Sub(tStaged), "fsync", time.Since(tBuilt))
	r.keepHot(st.written) // durable now: the next commits' bases
	return res, commit, verdict, nil
}

// stagePaths stages each of paths (absolute or relative to the work tree).
func (s *stager) stagePaths(paths []string) error {
	for _, p := range paths {
		rel, err := s.r.relPath(p)
		if err != nil {
			return err
		}
		if err := s.stagePath(rel); err != nil {
			return err
		}
	}
	return nil
}

// tally counts res.Changes by kind into res.
func tally(res *memd.CommitResult) {
	for _, c := range res.Changes {
		switch c.Op {
		case 'A':
			res.Added++
		case 'M':
			res.Modified++
		case 'D':
			res.Deleted++
		}
	}
}

// writeCommit writes the commit of tree on parent (none when zero) into the batch, signed
// where git would sign it (encodeCommit).
func (s *stager) writeCommit(tree, parent plumbing.Hash, message string) (plumbing.Hash, error) {
	var parents []plumbing.Hash
	if !parent.IsZero() {
		parents = []plumbing.Hash{parent}
	}
	obj, err := s.r.encodeCommit(tree, parents, message)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return s.objs.Write(plumbing.CommitObject, obj)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// writeCommitLocked writes a commit object for tree with the given parents
// and message, by the repo's author at r.Now(), durably, and returns its
// id. It moves no ref (updateRef does, then noteCommitted). For merges.
// Caller holds r.mu.
func (r *Repo) writeCommitLocked(tree plumbing.Hash, parents []plumbing.Hash, message string) (plumbing.Hash, error) {
	b := r.newObjectBatch()
	defer b.Discard()
	obj, err := r.encodeCommit(tree, parents, message)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := b.Write(plumbing.CommitObject, obj)
	if err != nil {
		return h, err
	}
	return h, b.Flush()
}

// encodeCommit is the commit object, signed where `git commit` would sign it in this repo
// (gitsign; the signing config is read again only when git's config files moved).
func (r *Repo) encodeCommit(tree plumbing.Hash, parents []plumbing.Hash, message string) ([]byte, error) {
	now := r.opts.Now()
	_, off := now.Zone()
	sign := byte('+')
	if off < 0 {
		sign, off = '-', -off
	}
	stamp := fmt.Sprintf("%d %c%02d%02d", now.Unix(), sign, off/3600, (off%3600)/60)
	who := sanitizeIdent(r.author.Name) + " <" + sanitizeIdent(r.author.Email) + "> " + stamp
	var b bytes.Buffer
	b.WriteString("tree " + tree.String() + "\n")
	for _, p := range parents {
		b.WriteString("parent " + p.String() + "\n")
	}
	b.WriteString("author " + who + "\n")
	b.WriteString("committer " + who + "\n\n")
	b.WriteString(message)
	if !strings.HasSuffix(message, "\n") {
		b.WriteByte('\n')
	}
	ident := sanitizeIdent(r.author.Name) + " <" + sanitizeIdent(r.author.Email) + ">"
	return r.signers.Sign(context.Background(), r.gitDir, gitconfig.Stamp(r.layout), b.Bytes(), ident)
}

// sanitizeIdent drops what would break the commit header (git does the same).
func sanitizeIdent(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '<', '>', '\n', '\r', 0:
			return -1
		}
		return r
	}, strings.TrimSpace(s))
}

// stagePath stages one repo-relative path ("" = the whole tree).
func (s *stager) stagePath(rel string) error {
	// An ignored path, or one under an ignored or .git directory, is
	// never staged, unless HEAD tracks it (git's rule; private paths
	// excepted).
	if rel != "" {
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			if s.ignored(strings.Join(parts[:i], "/"), true) {
				return nil
			}
		}
	}
	abs := filepath.Join(s.r.dir, filepath.FromSlash(rel))
	if s.underNestedRepo(rel) {
		return nil // another repository's file: not ours to commit
	}
	if !s.parentsAreDirs(rel) {
		// Beyond a symlink (or under a file): not a path git can track,
		// and lstat would follow the link out of the repo.
		if s.ignored(rel, false) {
			return nil
		}
		return s.deleteAt(rel)
	}
	fi, err := os.Lstat(abs)
	switch {
	case err != nil && (errors.Is(err, fs.ErrNotExist) || isNotDir(err)):
		if rel == "" {
			return fmt.Errorf("work tree %s is gone", s.r.dir)
		}
		if s.ignored(rel, false) {
			return nil
		}
		return s.deleteAt(rel)
	case err != nil:
		return fmt.Errorf("lstat %s: %w", rel, err)
	}
	if s.ignored(rel, fi.IsDir()) {
		return nil
	}
	switch {
	case fi.IsDir():
		return s.stageDir(rel)
	case fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0:
		// A directory replaced by a file: its old blobs go.
		if e, ok, err := s.headEntry(rel); err != nil {
			return err
		} else if ok && e.Mode == filemode.Dir {
			if err := s.deleteSubtree(rel, e.Hash); err != nil {
				return err
			}
		}
		return s.stageFile(rel, abs, fi)
	default:
		// fifo, socket, device: not content. If HEAD had a file here it is
		// gone as far as git is concerned.
		s.r.log.Debug("skipping special file", "path", rel, "mode", fi.Mode().String())
		return s.deleteAt(rel)
	}
}

// ignored: rel is not staged because it is private, or ignored and not tracked by the
// commit's base (ignore rules never apply to a tracked path, as in git).
func (s *stager) ignored(rel string, isDir bool) bool {
	return s.r.ignoredUntracked(rel, isDir, s.tracked)
}

// tracked: the base tree has rel, as a tree for a directory, else as a file, link or
// gitlink. A tree that cannot be read counts as untracked: the path is left for later,
// never deleted.
func (s *stager) tracked(rel string, isDir bool) bool {
	e, ok, err := s.headEntry(rel)
	return err == nil && ok && (e.Mode == filemode.Dir) == isDir
}

// parentsAreDirs reports whether every ancestor of rel is a real directory
// (not a symlink, not missing). Results are cached per commit.
func (s *stager) parentsAreDirs(rel string) bool {
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		dir := rel[:i]
		ok, known := s.dirOK[dir]
		if !known {
			fi, err := os.Lstat(filepath.Join(s.r.dir, filepath.FromSlash(dir)))
			ok = err == nil && fi.IsDir()
			s.dirOK[dir] = ok
		}
		if !ok {
			return false
		}
	}
	return true
}

// underNestedRepo reports whether an ancestor directory of rel holds a
// .git (a nested repository). Cached per commit.
func (s *stager) underNestedRepo(rel string) bool {
	return repofiles.InNestedRepo(s.r.dir, rel, s.nested)
}

func isNotDir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "not a directory")
}

// deleteAt records the deletion of whatever HEAD has at rel: a blob, or
// every blob under a tree (except ignored ones and gitlinks).
func (s *stager) deleteAt(rel string) error {
	s.r.holdOversize(rel, 0) // a held file that is gone is no longer held
	e, ok, err := s.headEntry(rel)
	if err != nil || !ok {
		return err
	}
	if e.Mode == filemode.Dir {
		return s.deleteSubtree(rel, e.Hash)
	}
	if e.Mode == filemode.Submodule {
		return nil
	}
	s.edits[rel] = edit{del: true, op: 'D'}
	s.unguard(rel)
	return nil
}

func (s *stager) deleteSubtree(rel string, tree plumbing.Hash) error {
	return s.walkTree(tree, rel, func(p string, e object.TreeEntry) error {
		if e.Mode == filemode.Submodule || s.r.private(p) {
			return nil
		}
		if _, done := s.edits[p]; !done {
			s.edits[p] = edit{del: true, op: 'D'}
			s.unguard(p)
		}
		return nil
	})
}

// stageDir stages every file under the directory rel and deletes HEAD's
// blobs under it that are gone. Only this directory is walked.
func (s *stager) stageDir(rel string) error {
	head, ok, err := s.headEntry(rel)
	if err != nil {
		return err
	}
	if ok && head.Mode == filemode.Submodule {
		return nil
	}
	if rel != "" {
		// A nested repository is not ours to commit.
		if repofiles.NestedRepo(filepath.Join(s.r.dir, filepath.FromSlash(rel))) {
			return nil
		}
	}
	if ok && head.Mode != filemode.Dir && rel != "" {
		// A file replaced by a directory.
		s.edits[rel] = edit{del: true, op: 'D'}
		ok = false
	}
	seen, err := s.stageFilesUnder(rel)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	return s.deleteGoneUnder(rel, head.Hash, seen)
}

// stageFilesUnder walks the directory rel on disk and stages every file in
// it, returning the paths seen.
func (s *stager) stageFilesUnder(rel string) (map[string]bool, error) {
	seen := make(map[string]bool)
	var walkErr error
	err := repofiles.Walk(s.r.dir, rel, s.ignored, repofiles.Funcs{
		Fail: func(p string, err error) {
			if errors.Is(err, fs.ErrPermission) {
				// Unreadable directory: what HEAD has under it stays
				// (the deletion pass below cannot confirm it is gone).
				_ = s.skip(p, err)
			} else if walkErr == nil {
				walkErr = err
			}
		},
		File: func(p string, d fs.DirEntry) error {
			fi, err := d.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // vanished while walking: a later batch sees it
				}
				return err
			}
			if !repofiles.IsFile(fi.Mode().Type()) {
				return nil // became a FIFO or the like since the listing: never opened
			}
			seen[p] = true
			return s.stageFile(p, filepath.Join(s.r.dir, filepath.FromSlash(p)), fi)
		},
	})
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		err = nil // vanished while walking: a later batch sees it
	case errors.Is(err, fs.ErrPermission):
		err = s.skip(rel, err)
	case err == nil:
		err = walkErr
	}
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", rel, err)
	}
	return seen, nil
}

// deleteGoneUnder records the deletion of each blob of HEAD's tree at rel
// that the walk did not see and that is confirmed gone from disk.
func (s *stager) deleteGoneUnder(rel string, tree plumbing.Hash, seen map[string]bool) error {
	return s.walkTree(tree, rel, func(p string, e object.TreeEntry) error {
		if seen[p] || e.Mode == filemode.Submodule || s.r.private(p) {
			return nil
		}
		if _, done := s.edits[p]; done {
			return nil
		}
		// Not seen on disk. Confirm (it may sit under a skipped nested
		// repo or have appeared since): a file or link still there stays;
		// missing, a directory now, or a special file means deleted.
		fi, err := os.Lstat(filepath.Join(s.r.dir, filepath.FromSlash(p)))
		switch {
		case err == nil && (fi.Mode().IsRegular() || fi.Mode()&fs.ModeSymlink != 0):
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err):
			return nil // cannot tell (e.g. permission): never delete on doubt
		}
		s.edits[p] = edit{del: true, op: 'D'}
		return nil
	})
}

// stageFile hashes one regular file or symlink and records an edit when it
// differs from HEAD (content or mode). New blobs are written.
func (s *stager) stageFile(rel, abs string, fi fs.FileInfo) error {
	mode := filemode.Regular
	var content []byte
	var h plumbing.Hash
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		// Committed as a link: the target string is the blob. Never
		// followed.
		mode = filemode.Symlink
		target, err := os.Readlink(abs)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return s.deleteAt(rel)
			}
			return s.skip(rel, fmt.Errorf("readlink %s: %w", rel, err))
		}
		content = []byte(filepath.ToSlash(target))
		h = gitstore.HashObject(plumbing.BlobObject, content)
	default:
		if s.r.holdOversize(rel, fi.Size()) {
			delete(s.edits, rel) // left as HEAD has it
			return nil
		}
		if fi.Mode()&0o111 != 0 {
			mode = filemode.Executable
		}
		f, err := openNoFollow(abs)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return s.deleteAt(rel)
			}
			return s.skip(rel, fmt.Errorf("open %s: %w", rel, err))
		}
		defer f.Close()
		if c := s.r.filters.conv(rel); !c.Identity() {
			return s.stageFiltered(rel, f, mode, c) // filters.go
		}
		if fi.Size() > inMemoryLimit {
			h, err = s.objs.WriteBlobStream(f, fi.Size())
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			return s.record(rel, mode, h)
		}
		content, err = io.ReadAll(f)
		if err != nil {
			return s.skip(rel, fmt.Errorf("read %s: %w", rel, err))
		}
		h = gitstore.HashObject(plumbing.BlobObject, content)
	}
	prev, ok, err := s.headEntry(rel)
	if err != nil {
		return err
	}
	if ok && prev.Hash == h && prev.Mode == mode {
		delete(s.edits, rel) // equal to HEAD: no change
		s.unguard(rel)
		return nil
	}
	if vetted, err := s.vet(rel, content, h); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	} else if vetted == nil {
		delete(s.edits, rel) // held (guard.go): HEAD keeps its version, no blob is written
		return nil
	} else if len(vetted) != len(content) || !bytes.Equal(vetted, content) {
		content, h = vetted, gitstore.HashObject(plumbing.BlobObject, vetted)
		if ok && prev.Hash == h && prev.Mode == mode {
			delete(s.edits, rel) // what may be committed is what HEAD has
			return nil
		}
	}
	if _, err := s.objs.Write(plumbing.BlobObject, content); err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	return s.record(rel, mode, h)
}

// skip leaves rel as HEAD has it, because it cannot be read now; the
// commit goes on without it and reports it in memd.CommitResult.Skipped.
func (s *stager) skip(rel string, err error) error {
	delete(s.edits, rel)
	s.skipped = append(s.skipped, rel)
	s.r.log.Warn("cannot read path; left for a later commit", "path", rel, "err", err)
	return nil
}

func (s *stager) record(rel string, mode filemode.FileMode, h plumbing.Hash) error {
	prev, ok, err := s.headEntry(rel)
	if err != nil {
		return err
	}
	if ok && prev.Hash == h && prev.Mode == mode {
		delete(s.edits, rel)
		return nil
	}
	op := byte('A')
	if ok && prev.Mode != filemode.Dir {
		op = 'M'
	}
	s.edits[rel] = edit{mode: mode, hash: h, op: op}
	return nil
}

// tree loads and indexes a tree object (cached).
func (s *treeCache) tree(h plumbing.Hash) (*treeView, error) {
	if tv, ok := s.trees[h]; ok {
		return tv, nil
	}
	t, err := object.GetTree(s.st, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		if ri, ok := s.st.(reindexer); ok {
			ri.Reindex() // packed behind go-git's back (see syncPacks)
			t, err = object.GetTree(s.st, h)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	tv := newTreeView(t.Entries)
	s.trees[h] = tv
	return tv, nil
}

// maxHotEntries bounds Repo.hot (~70 bytes an entry and its pieces ~30: up to ~13 MB). The
// 100k-file demo's directories of packMin bytes or more hold ~102k entries: at 1<<16 the
// warm set left a 10k-file directory cold and each commit elsewhere evicted a warm tree,
// read and compressed cold again by the next commit in it (the 100k p90); RSS after 20
// commits stayed ~88-90 MiB either way (the soft memory limit, agent.boundMemory).
var maxHotEntries = 1 << 17 // a var for tests

// hotTree is a tree a commit wrote at a directory (zero hash: the directory went away).
type hotTree struct {
	h  plumbing.Hash
	tv *treeView
}

// keepHot makes a commit's new trees the hot views of their directories, replacing the
// ones they supersede. Past maxHotEntries the directories written longest ago go first
// (evictHot); if this commit's alone are too many, only the smallest of them stay.
func (r *Repo) keepHot(written map[string]hotTree) {
	if r.hot == nil {
		r.hot, r.hotDirs = map[plumbing.Hash]*treeView{}, map[string]plumbing.Hash{}
	}
	for dir, w := range written {
		if old, ok := r.hotDirs[dir]; ok {
			delete(r.hot, old)
			delete(r.hotDirs, dir)
		}
		if !w.h.IsZero() {
			w.tv.gen = hotClock.Add(1)
			r.hotDirs[dir], r.hot[w.h] = w.h, w.tv
		}
	}
	n := 0
	for _, tv := range r.hot {
		n += len(tv.entries)
	}
	if n > maxHotEntries {
		n = r.evictHot(written, n)
	}
	if n > maxHotEntries {
		r.hot, r.hotDirs = nil, nil
		r.keepHot(smallest(written, maxHotEntries))
	}
}

// smallest drops the largest of written's trees until the rest hold at most max entries.
func smallest(written map[string]hotTree, max int) map[string]hotTree {
	dirs := make([]string, 0, len(written))
	for d, w := range written {
		if !w.h.IsZero() {
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(written[dirs[i]].tv.entries) < len(written[dirs[j]].tv.entries) })
	out := map[string]hotTree{}
	n := 0
	for _, d := range dirs {
		if n += len(written[d].tv.entries); n > max {
			break
		}
		out[d] = written[d]
	}
	return out
}

// headEntry finds rel in the base tree.
func (s *stager) headEntry(rel string) (object.TreeEntry, bool, error) {
	return s.entryAt(s.base, rel)
}

// entryAt finds rel in the tree root (zero = empty). ok=false when absent
// (or when an ancestor is not a tree).
func (s *treeCache) entryAt(root plumbing.Hash, rel string) (object.TreeEntry, bool, error) {
	if root.IsZero() {
		return object.TreeEntry{}, false, nil
	}
	if rel == "" {
		return object.TreeEntry{Mode: filemode.Dir, Hash: root}, true, nil
	}
	cur := root
	for {
		name, rest, more := strings.Cut(rel, "/")
		tv, err := s.tree(cur)
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		i, ok := tv.find(name)
		if !ok {
			return object.TreeEntry{}, false, nil
		}
		e := tv.entries[i]
		if !more {
			return e, true, nil
		}
		if e.Mode != filemode.Dir {
			return object.TreeEntry{}, false, nil
		}
		cur, rel = e.Hash, rest
	}
}

// walkTree calls fn for every non-tree entry under tree, with full paths.
func (s *treeCache) walkTree(tree plumbing.Hash, prefix string, fn func(string, object.TreeEntry) error) error {
	tv, err := s.tree(tree)
	if err != nil {
		return err
	}
	for _, e := range tv.entries {
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		if e.Mode == filemode.Dir {
			if err := s.walkTree(e.Hash, p, fn); err != nil {
				return err
			}
			continue
		}
		if err := fn(p, e); err != nil {
			return err
		}
	}
	return nil
}

// trie groups edits by directory so that only trees on changed paths'
// ancestor chains are rebuilt.
type trie struct {
	files map[string]edit
	dirs  map[string]*trie
}

func buildTrie(edits map[string]edit) *trie {
	root := &trie{}
	for p, e := range edits {
		n := root
		for {
			name, rest, more := strings.Cut(p, "/")
			if !more {
				if n.files == nil {
					n.files = make(map[string]edit)
				}
				n.files[name] = e
				break
			}
			if n.dirs == nil {
				n.dirs = make(map[string]*trie)
			}
			c := n.dirs[name]
			if c == nil {
				c = &trie{}
				n.dirs[name] = c
			}
			n, p = c, rest
		}
	}
	return root
}

// rebuild applies node to the tree base (zero = none) and writes the new
// tree. Returns the zero hash when the result is empty. implicit lists
// blobs replaced by a directory that no edit named (recorded as deletes).
func (s *stager) rebuild(base plumbing.Hash, node *trie, prefix string) (plumbing.Hash, bool, error) {
	// entries: the new ones, sorted and merged at the end with the base's entries no edit
	// names, in one pass over the base (O(n) and one copy, not a sort of a 40k-entry tree).
	var entries []object.TreeEntry
	var btv *treeView
	if !base.IsZero() {
		tv, err := s.tree(base)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		btv = tv
	}
	for name, e := range node.files {
		if e.del {
			continue
		}
		entries = append(entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
	}
	entries, err := s.rebuildDirs(btv, node, prefix, entries)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	sortTreeEntries(entries)
	if btv != nil {
		entries = keepBaseEntries(btv, node, entries)
	}
	if len(entries) == 0 {
		if s.written != nil {
			s.written[prefix] = hotTree{}
		}
		return plumbing.ZeroHash, true, nil
	}
	var baseEntries []object.TreeEntry
	var basePieces *gitstore.PackedTree
	if btv != nil {
		baseEntries, basePieces = btv.entries, btv.z
	}
	h, z, err := s.objs.WriteTree(entries, baseEntries, basePieces)
	if err == nil && s.written != nil {
		s.written[prefix] = hotTree{h, &treeView{entries: entries, z: z}}
	}
	return h, false, err
}

// rebuildDirs rebuilds node's subdirectories on the base tree's (btv; nil =
// no base) and appends their entries. A base blob a directory replaces is
// recorded as a delete unless an edit names it.
func (s *stager) rebuildDirs(btv *treeView, node *trie, prefix string, entries []object.TreeEntry) ([]object.TreeEntry, error) {
	for name, child := range node.dirs {
		if f, ok := node.files[name]; ok && !f.del {
			continue // a file now sits where the directory was
		}
		p := name
		if prefix != "" {
			p = prefix + "/" + name
		}
		sub := plumbing.ZeroHash
		if old, ok := btv.entry(name); ok {
			switch old.Mode {
			case filemode.Dir:
				sub = old.Hash
			case filemode.Submodule:
				entries = append(entries, old) // never touched
				continue
			default:
				// A blob replaced by a directory: the blob goes.
				if _, named := s.edits[p]; !named {
					s.edits[p] = edit{del: true, op: 'D'}
				}
			}
		}
		h, _, err := s.rebuild(sub, child, p)
		if err != nil {
			return nil, err
		}
		if !h.IsZero() {
			entries = append(entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
	}
	return entries, nil
}

// keepBaseEntries merges the sorted new entries with the base tree's
// entries no edit of node names.
func keepBaseEntries(btv *treeView, node *trie, entries []object.TreeEntry) []object.TreeEntry {
	named := func(e object.TreeEntry) bool {
		_, f := node.files[e.Name]
		_, d := node.dirs[e.Name]
		return f || d
	}
	if btv.byName != nil { // a base out of git's order: sorted now, as git would write it
		var kept []object.TreeEntry
		for _, e := range btv.entries {
			if !named(e) {
				kept = append(kept, e)
			}
		}
		sortTreeEntries(kept)
		return mergeTreeEntries(kept, entries)
	}
	return mergeBase(btv.entries, named, entries)
}

// entry is the entry named name in tv; false when there is none (or no tv).
func (tv *treeView) entry(name string) (object.TreeEntry, bool) {
	if tv == nil {
		return object.TreeEntry{}, false
	}
	i, ok := tv.find(name)
	if !ok {
		return object.TreeEntry{}, false
	}
	return tv.entries[i], true
}

// mergeBase merges base (in git's order) without the entries skip names with add (sorted).
func mergeBase(base []object.TreeEntry, skip func(object.TreeEntry) bool, add []object.TreeEntry) []object.TreeEntry {
	out := make([]object.TreeEntry, 0, len(base)+len(add))
	j := 0
	for _, e := range base {
		if skip(e) {
			continue
		}
		for j < len(add) && treeEntryLess(add[j], e) {
			out = append(out, add[j])
			j++
		}
		out = append(out, e)
	}
	return append(out, add[j:]...)
}

// mergeTreeEntries merges two lists in git's order.
func mergeTreeEntries(a, b []object.TreeEntry) []object.TreeEntry {
	if len(b) == 0 {
		return a
	}
	out := make([]object.TreeEntry, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if treeEntryLess(b[j], a[i]) {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// sortTreeEntries orders entries the way git does: by name, with a
// directory compared as if its name ended in "/".
func sortTreeEntries(es []object.TreeEntry) {
	sort.Slice(es, func(i, j int) bool { return treeEntryLess(es[i], es[j]) })
}

// changes lists the edits as sorted Changes.
func (s *stager) changes() []memd.Change {
	out := make([]memd.Change, 0, len(s.edits))
	for p, e := range s.edits {
		out = append(out, memd.Change{Path: p, Op: e.op})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// newObjectBatch starts the loose objects of one commit or merge (gitstore/objwrite.go:
// durable before any ref names them).
func (r *Repo) newObjectBatch() *gitstore.ObjectBatch {
	return gitstore.NewObjectBatch(r.commonDir, r.repo.Storer)
}
