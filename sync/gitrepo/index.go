package gitrepo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/sync/gitstore"
)

// .git/index upkeep (docs/ARCHITECTURE.md §3). Commits never touch the index; it is
// brought in step with HEAD afterwards, off the critical path, so that
// `git status` in the repo is clean and fast. A checkout (a fast-forward or merge) is the
// exception: it writes the new HEAD's index itself as its last step, in the index.lock it
// holds (writeCheckoutIndexLocked, checkoutlock.go), as git's checkout does.
//
// Concurrency: an incremental refresh looks up the changed paths' entries
// through the owner's go-git instance under r.mu (milliseconds), then reads
// files and writes the index without it; a full refresh opens a go-git
// Repository of its own for the walk and drops it after, so it never shares
// go-git state with the owner and does not take r.mu. Either way a commit
// can run while the index is being written. Refreshes are serialised
// among themselves by indexState.run. The index file itself is replaced
// under git's lock, .git/index.lock created O_EXCL (a held lock means back
// off and retry later; we never delete a live lock), held only for a check
// and a rename: the new index is encoded and fsynced beforehand in a temp
// file, so a user's own `git commit` in the repo does not find it held.
//
// memd owns the index of a memory repo: a refresh replaces whatever a user
// staged with `git add` (the content is still in the work tree, and memd
// commits it anyway), and conflict stages from a user's own merge.
//
// Incremental: we remember the HEAD we last wrote the index for, the
// identity (inode, size, mtime) of the file we wrote, and the paths memd
// committed since. If nothing else touched the index or the branch, only
// those paths' entries are re-made and spliced into the file
// (sync/gitstore); otherwise the whole HEAD tree is walked, reusing every
// existing entry whose blob id and mode still match, and a file that
// already is exactly that is kept.

type indexState struct {
	run sync.Mutex // serialises refreshes

	mu    sync.Mutex // guards the fields below
	valid bool       // pending is a complete list of changes since lastHead
	// broken: since the running refresh took pending, a branch move did not chain from
	// chainHead or came without its changes, so the new pending is not complete.
	broken    bool
	lastHead  plumbing.Hash
	chainHead plumbing.Hash // newest head memd committed
	// seenHead is the branch head memd last moved the branch to, or last saw another
	// writer move it to (HeadMovedByOthers).
	seenHead plumbing.Hash
	lastFile fileID // the index file we last wrote
	// base: before this process wrote or verified any index (lastHead zero), the head the
	// chain of memd's moves in pending starts from. The index file on disk is not known to
	// be base's; buildIndex checks its cache-tree extension (gitstore.IndexFileIsTree).
	base    plumbing.Hash
	pending map[string]struct{}
	// inflight: the pending paths a running refresh took, not yet in an index on disk; a
	// checkout that writes the index meanwhile (writeCheckoutIndexLocked) splices them too.
	inflight  map[string]struct{}
	scheduled bool
	wg        sync.WaitGroup
	closed    bool
	// lockHeld is crashHooks.indexLockHeld (tests only), copied here by setCrashHooks:
	// the refresher never reads r.hooks, which a test may re-arm while a refresh runs.
	lockHeld func(tmp string)
	// installing is set while installIndex holds .git/index.lock: the gate's "a live
	// index.lock memd did not take" (gitops.go) must not count memd's own.
	installing atomic.Bool
	// checkoutLock is set while a checkout holds .git/index.lock (checkoutlock.go): not a
	// foreign lock for the gate, and never a stale one for the refresher to clear.
	checkoutLock atomic.Bool
	// verifiedBase counts the index files buildIndex found were base's by their
	// cache-tree and spliced (tests).
	verifiedBase atomic.Int64
}

type fileID struct {
	size  int64
	mtime time.Time
	ino   uint64
}

func statID(fi fs.FileInfo) fileID {
	return fileID{size: fi.Size(), mtime: fi.ModTime(), ino: inodeOf(fi)}
}

// index refresh retry policy when .git/index.lock is held by someone else.
const (
	indexRetryFirst = 100 * time.Millisecond
	indexRetryMax   = 5 * time.Second
	indexRetries    = 8
)

// noteCommitted records a branch move made by memd, for the next index
// refresh, and schedules one. changes nil = unknown (full refresh).
func (r *Repo) noteCommitted(old, newH plumbing.Hash, changes []memd.Change) {
	r.noteMoved(old, newH, changes)
	r.ScheduleIndexRefresh()
}

// noteMoved is noteCommitted without the refresh: a checkout writes the index itself
// (writeCheckoutIndexLocked).
func (r *Repo) noteMoved(old, newH plumbing.Hash, changes []memd.Change) {
	s := &r.idx
	s.mu.Lock()
	if s.lastHead.IsZero() && s.base.IsZero() && old == s.chainHead && !s.broken && len(s.pending) == 0 &&
		changes != nil && !old.IsZero() {
		s.base = old // the first move since open (chainHead is the head found then): complete from old
	}
	if old != s.chainHead || changes == nil {
		s.valid, s.broken = false, true
		s.base = plumbing.ZeroHash
	}
	if s.pending == nil {
		s.pending = make(map[string]struct{})
	}
	for _, c := range changes {
		s.pending[c.Path] = struct{}{}
	}
	s.chainHead = newH
	s.seenHead = newH
	s.mu.Unlock()
}

// ScheduleIndexRefresh arranges for RefreshIndex to run soon in a background
// goroutine. Calls made while one is already waiting coalesce into it. A
// held index.lock is retried with backoff. It never blocks the caller.
func (r *Repo) ScheduleIndexRefresh() {
	s := &r.idx
	s.mu.Lock()
	if s.scheduled || s.closed {
		s.mu.Unlock()
		return
	}
	s.scheduled = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		delay := indexRetryFirst
		for attempt := 0; ; attempt++ {
			err := r.refresh(func() {
				// From here on a new commit needs a new refresh.
				s.mu.Lock()
				s.scheduled = false
				s.mu.Unlock()
			}, true)
			if err == nil {
				return
			}
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if !errors.Is(err, gitstore.ErrLocked) || attempt >= indexRetries || closed {
				r.log.Warn("index refresh failed", "repo", r.dir, "err", err)
				return
			}
			// A lock left by a killed process would block us forever.
			s.run.Lock()
			if !s.checkoutLock.Load() { // a long checkout's lock is live, not stale
				_ = r.clearStaleLock(filepath.Join(r.gitDir, "index.lock"), 0, indexLockMinAge)
			}
			s.run.Unlock()
			r.log.Debug("index locked, retrying", "repo", r.dir, "in", delay)
			if attempt == 0 {
				r.waitIndexUnlocked(delay)
			} else {
				time.Sleep(delay) // a git at work: its backoff, however briefly it lets go
			}
			delay = min(delay*2, indexRetryMax)
		}
	}()
}

// indexLockPoll is how often a refresher that found index.lock held looks whether it is gone.
const indexLockPoll = 5 * time.Millisecond

// waitIndexUnlocked waits up to d, less once .git/index.lock is gone: the first retry's wait,
// as the lock is most often memd's own commit writing the index for a few milliseconds, and a
// one-shot command's Close waited out the whole backoff behind it (100 ms of a 0.09 s `memd
// restore`: issue 48). Later retries keep the full backoff, for a person's git at work.
func (r *Repo) waitIndexUnlocked(d time.Duration) {
	lock := filepath.Join(r.gitDir, "index.lock")
	for end := time.Now().Add(d); time.Now().Before(end); {
		if _, err := os.Lstat(lock); errors.Is(err, fs.ErrNotExist) {
			return
		}
		time.Sleep(min(indexLockPoll, time.Until(end)))
	}
}

// WaitIndexRefresh waits for scheduled index refreshes to finish.
func (r *Repo) WaitIndexRefresh() { r.idx.wg.Wait() }

// Close stops scheduling index refreshes and waits for a running one.
func (r *Repo) Close() error {
	r.idx.mu.Lock()
	r.idx.closed = true
	r.idx.mu.Unlock()
	r.idx.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	closeStore(r.repo.Storer)
	r.filters.close()
	if r.fileSrc != nil {
		_ = r.fileSrc.Close()
	}
	return nil
}

// closeStore closes the pack files a gitstore.Storage keeps open between reads.
func closeStore(s any) {
	if c, ok := s.(interface{ Close() error }); ok {
		_ = c.Close()
	}
}

// RefreshIndex writes .git/index to match the branch head, with stat data
// from the work tree for files whose content equals HEAD's (git's way), so
// `git status` shows exactly the uncommitted changes. A held index.lock
// returns an error wrapping ErrLocked.
func (r *Repo) RefreshIndex() error { return r.refresh(nil, false) }

// refresh is one refresh; background: the refresher's (ScheduleIndexRefresh), which yields
// to a person's git (gitAtWork) before doing any work. An explicit RefreshIndex (memd init,
// a one-shot memd sync) is asked for and does not wait.
func (r *Repo) refresh(started func(), background bool) error {
	s := &r.idx
	s.run.Lock()
	defer s.run.Unlock()
	defer s.doneInflight()
	if started != nil {
		started()
	}
	if background {
		if why := r.gitAtWork(); why != "" {
			return fmt.Errorf("refresh index of %s: %s: %w", r.dir, why, gitstore.ErrLocked)
		}
	}
	indexPath := filepath.Join(r.gitDir, "index")
	// The new index is written to a temp file in .git/memd (inside .git, which no fetched
	// tree can reach) and fsynced; index.lock is taken only for the check and the rename
	// (installIndex), so a user's own git in the repo does not find it held for a refresh.
	lock, err := r.createIndexTemp()
	if err != nil {
		return fmt.Errorf("refresh index of %s: %w", r.dir, err)
	}
	installed := false
	defer func() {
		if !installed {
			gitstore.RollbackLock(lock)
		}
	}()
	for try := 1; ; try++ {
		installed, err = r.refreshOnce(indexPath, lock, try < maxSuperseded, background)
		if !errors.Is(err, errSuperseded) {
			return err
		}
		// A commit moved HEAD between reading it and the lookups: start again from the new
		// HEAD and its pending paths (the ones taken are back in them), whose trees the
		// commit left hot, instead of decoding the superseded head's trees cold under r.mu.
		r.log.Debug("index refresh: superseded by a commit, again", "repo", r.dir, "try", try)
	}
}

// maxSuperseded bounds how often a refresh starts again because commits keep moving HEAD
// under it; the last try splices the head it read, superseded or not.
const maxSuperseded = 4

// errAsideNow: memd stood aside (gitops.go) by the time the refresh held index.lock.
var errAsideNow = errors.New("memd stands aside")

// errSuperseded: HEAD moved after the refresh read it; nothing was written.
var errSuperseded = errors.New("index refresh superseded by a commit")

// refreshSnapshot is what memd committed before a refresh took it: restored on failure.
type refreshSnapshot struct {
	valid               bool
	lastHead, chainHead plumbing.Hash
	lastFile            fileID
	base                plumbing.Hash // indexState.base
	pending             map[string]struct{}
	lockHeld            func(tmp string) // crashHooks.indexLockHeld
}

// takePending snapshots what memd committed so far and empties pending for the commits to come.
func (s *indexState) takePending() refreshSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := refreshSnapshot{valid: s.valid, lastHead: s.lastHead, chainHead: s.chainHead,
		lastFile: s.lastFile, base: s.base, pending: s.pending, lockHeld: s.lockHeld}
	s.inflight = s.pending
	s.pending = make(map[string]struct{})
	s.broken = false
	return snap
}

// takeForCheckout is takePending for a checkout's index write, which runs beside a refresh
// (it holds r.mu and index.lock, never s.run): the paths that refresh took are in it too.
func (s *indexState) takeForCheckout() refreshSnapshot {
	s.mu.Lock()
	inflight := s.inflight
	s.mu.Unlock()
	snap := s.takePending()
	s.mu.Lock()
	s.inflight = inflight // still the running refresh's
	s.mu.Unlock()
	if snap.pending == nil {
		snap.pending = make(map[string]struct{})
	}
	for p := range inflight {
		snap.pending[p] = struct{}{}
	}
	return snap
}

// doneInflight: the running refresh is over (installed, or its paths restored to pending).
func (s *indexState) doneInflight() {
	s.mu.Lock()
	s.inflight = nil
	s.mu.Unlock()
}

// restorePending puts a failed refresh's pending paths back.
func (s *indexState) restorePending(snap refreshSnapshot) {
	s.mu.Lock()
	for p := range snap.pending {
		s.pending[p] = struct{}{}
	}
	s.valid = s.valid && snap.valid && !s.broken
	s.mu.Unlock()
}

// refreshOnce is one try of refresh, holding s.run: it writes the new index into lock and
// installs it (installed: lock is consumed), or finds nothing to do. canRetry: it may give
// up with errSuperseded when a commit moved HEAD before its lookups (lock left empty).
func (r *Repo) refreshOnce(indexPath string, lock *os.File, canRetry, background bool) (installed bool, err error) {
	s := &r.idx
	// Snapshot what memd committed so far; restore it on failure.
	snap := s.takePending()
	restore := func() { s.restorePending(snap) }

	head, err := r.readBranch()
	if err != nil {
		restore()
		return false, err
	}
	// While HEAD is on another branch or a git operation waits for the user, the index is
	// theirs (a merge's conflict stages, another branch's files): memd writes none. The
	// paths stay pending for the refresh after the repo is back.
	// (A held index.lock is not skipped: the install below finds it and the refresher backs
	// off and tries again, as it always has.)
	if a := r.StandAside(); a.Reason != "" && !a.Passing {
		restore()
		r.log.Debug("index refresh skipped: memd stands aside", "repo", r.dir, "why", a.Reason)
		return false, nil
	}
	if r.testDuringRefresh != nil {
		r.testDuringRefresh()
	}
	b, err := r.buildIndex(indexPath, lock, head, snap, canRetry, false)
	if err != nil {
		restore()
		return false, err
	}
	if !b.incremental && !b.nothing {
		// After the index is in place (a user's git reads it), and never waiting for r.mu.
		defer r.primeObjects()
	}
	if b.nothing {
		return false, nil // the index is already exactly HEAD's; the caller drops the temp
	}
	if b.unchanged {
		// The file on disk already is HEAD's index (a restart): keep it, unwritten.
		s.refreshed(head, snap.chainHead, b.curFile)
		return false, nil
	}
	curFile, incremental, entries := b.curFile, b.incremental, b.entries
	if err := r.installRefreshed(lock, indexPath, curFile, head, snap, background); err != nil {
		restore()
		if errors.Is(err, errAsideNow) {
			return true, nil // nothing installed; the refresh after the repo is back does it
		}
		return true, fmt.Errorf("refresh index of %s: %w", r.dir, err)
	}
	r.log.Debug("index refreshed", "repo", r.dir, "entries", entries, "incremental", incremental)
	return true, nil
}

// indexBuild is what buildIndex did.
type indexBuild struct {
	curFile     fileID // the index file it started from
	incremental bool   // spliced (else the whole tree walked)
	entries     int
	nothing     bool // the index is already exactly head's: nothing to do, nothing written
	foreign     bool // spliced into a file a git wrote, not memd (muHeld only)
	unchanged   bool // a full walk found the file on disk already head's: nothing written
}

// buildIndex writes into out the index of head (the refresher's temp file, or the
// checkout's index.lock): snap's pending paths spliced into memd's own file when it is
// still the one memd last wrote for the chain that ends at head, else HEAD's whole tree
// walked. muHeld: the caller holds r.mu (a checkout), so the splice's lookups do not take
// it, and a commit cannot supersede head.
func (r *Repo) buildIndex(indexPath string, out *os.File, head plumbing.Hash, snap refreshSnapshot, canRetry, muHeld bool) (indexBuild, error) {
	var b indexBuild
	if fi, err := os.Stat(indexPath); err == nil {
		b.curFile = statID(fi)
	}
	chain := snap.valid && head == snap.chainHead && !snap.lastHead.IsZero()
	b.incremental = chain && b.curFile == snap.lastFile
	if b.incremental && len(snap.pending) == 0 && head == snap.lastHead {
		b.nothing = true
		return b, nil
	}
	if !b.incremental && snap.lastHead.IsZero() && !snap.base.IsZero() && head == snap.chainHead && !snap.valid &&
		r.indexFileIs(indexPath, snap.base, muHeld) {
		// The first move this process made (a one-shot `memd sync`'s checkout), into the
		// index a git wrote for base (a clone, a pull, a commit; its cache-tree says so):
		// pending holds every path from base to head, so the splice is head's whole index,
		// with the file's other entries kept as they are, as git's checkout keeps them.
		b.incremental = true
		r.idx.verifiedBase.Add(1)
	}
	if !b.incremental && !r.opts.WarmTrees && snap.lastHead.IsZero() && len(snap.pending) == 0 &&
		r.indexFileIs(indexPath, head, muHeld) {
		// A one-shot command's first refresh and the index a git wrote for head itself (its
		// cache-tree names head's tree): nothing to walk, nothing to keep warm (WarmTrees).
		b.unchanged = true
		return b, nil
	}
	if !b.incremental && muHeld && chain && gitstore.SpliceableIndexFile(indexPath) {
		// A checkout, and a git rewrote memd's file since (a `git add`, a `git status`), with
		// memd's branch moves still all in pending: splice them into the file as it is, as
		// git's checkout keeps the index's other entries, rather than walk the whole tree
		// under index.lock (~0.1 s at 10k files, every git refused meanwhile). The caller has
		// the refresher walk it after (foreign).
		b.incremental, b.foreign = true, true
	}
	if !b.incremental {
		r.log.Debug("index refresh: full", "repo", r.dir, "valid", snap.valid, "same_file", b.curFile == snap.lastFile,
			"head_is_chain", head == snap.chainHead, "had_head", !snap.lastHead.IsZero())
	}
	b.entries = -1
	if b.incremental {
		var err error
		b.entries, err = r.spliceRefresh(indexPath, out, head, snap.pending, canRetry, muHeld)
		if errors.Is(err, gitstore.ErrNotSpliceable) {
			r.log.Debug("index refresh: not spliceable, full refresh", "repo", r.dir)
			b.entries, err = -1, resetFile(out)
		}
		if err != nil {
			if errors.Is(err, errSuperseded) {
				return b, err
			}
			return b, fmt.Errorf("refresh index of %s: %w", r.dir, err)
		}
	}
	if b.entries < 0 {
		b.incremental = false
		n, unchanged, err := r.fullRefresh(indexPath, out, head)
		if err != nil {
			return b, fmt.Errorf("refresh index of %s: %w", r.dir, err)
		}
		b.entries, b.unchanged = n, unchanged
	}
	return b, nil
}

// indexFileIs reports whether the index file is commit's whole tree by its cache-tree.
// muHeld: the caller holds r.mu, which the owner's go-git instance is read under.
func (r *Repo) indexFileIs(indexPath string, commit plumbing.Hash, muHeld bool) bool {
	if !muHeld {
		r.mu.Lock()
	}
	c, err := getCommit(r.repo.Storer, commit)
	if !muHeld {
		r.mu.Unlock()
	}
	if err != nil {
		return false
	}
	return gitstore.IndexFileIsTree(indexPath, c.TreeHash)
}

// writeCheckoutIndexLocked is a checkout's last step (merge.go), as git's checkout and merge
// end: the index of head, the commit the branch just moved to, written into the index.lock
// the checkout holds (hold) and renamed over .git/index, so no git finds HEAD moved with the
// index still behind it. The entries are a refresh's (buildIndex: the pending and checked-out
// paths spliced into memd's own file, else the whole tree; indexEntry: the stat data of the
// files just written, so `git status` is clean with no refresh). r.mu is held; s.run is not
// taken (a running refresh waits for r.mu under it): the paths it took are spliced too, and
// its own install then finds the index replaced and starts again. A failure leaves the old
// index (the lock is removed) and the refresher does it.
func (r *Repo) writeCheckoutIndexLocked(hold *indexHold, head plumbing.Hash) {
	if hold.f == nil {
		r.ScheduleIndexRefresh() // an outer step holds the lock
		return
	}
	s := &r.idx
	snap := s.takeForCheckout()
	indexPath := filepath.Join(r.gitDir, "index")
	b, err := r.buildIndex(indexPath, hold.f, head, snap, false, true)
	written := err == nil && !b.nothing && !b.unchanged
	if written {
		err = hold.commit(indexPath)
	}
	if err != nil {
		s.restorePending(snap)
		r.log.Warn("checkout: index not written; the refresher writes it", "repo", r.dir, "err", err)
		r.ScheduleIndexRefresh()
		return
	}
	id := b.curFile
	if written {
		id = fileID{}
		if fi, err := os.Stat(indexPath); err == nil {
			id = statID(fi)
		}
	}
	s.refreshed(head, snap.chainHead, id)
	r.log.Debug("checkout wrote the index", "repo", r.dir, "entries", b.entries, "incremental", b.incremental,
		"into_gits", b.foreign, "written", written)
	if b.foreign && written {
		// memd owns the index (the file comment): the rest of the file is the git's, so the
		// refresher walks the whole tree after, off index.lock, as it would have.
		s.mu.Lock()
		s.valid = false
		s.mu.Unlock()
		r.ScheduleIndexRefresh()
	}
}

// installRefreshed installs the new index in lock over indexPath (installIndex; curFile:
// the index the refresh started from) and records that the file now on disk is head's.
//
// index.lock is held for as little as git's protocol allows, because a person's git that
// meets it fails at once ("Unable to create '.git/index.lock': File exists"), it does not
// wait: everything that can be judged before is judged before (a git at work, with the
// /proc scan that costs milliseconds), and under the lock only what a checkout, merge or
// rebase that started meanwhile would have changed: the operation files, HEAD, and the
// index's identity (installIndex).
func (r *Repo) installRefreshed(lock *os.File, indexPath string, curFile fileID, head plumbing.Hash, snap refreshSnapshot, background bool) error {
	if a := r.StandAside(); a.Passing {
		_ = os.Remove(lock.Name())
		_ = lock.Close()
		return fmt.Errorf("index refresh: %s: %w", a.Reason, gitstore.ErrLocked)
	}
	if background {
		if why := r.gitAtWork(); why != "" {
			_ = os.Remove(lock.Name())
			_ = lock.Close()
			return fmt.Errorf("index refresh: %s: %w", why, gitstore.ErrLocked)
		}
	}
	r.idx.installing.Store(true)
	err := installIndex(lock, indexPath, curFile, func(tmp string) error {
		if snap.lockHeld != nil {
			snap.lockHeld(tmp)
		}
		if a := r.operationAside(); a.Reason != "" {
			return fmt.Errorf("index refresh: memd stands aside (%s): %w", a.Reason, errAsideNow)
		}
		return nil
	})
	r.idx.installing.Store(false)
	if err != nil {
		return err
	}
	var id fileID
	if fi, err := os.Stat(indexPath); err == nil {
		id = statID(fi)
	}
	r.idx.refreshed(head, snap.chainHead, id)
	return nil
}

// refreshed records that the index file (id) now is head's. chainHead is the newest memd
// commit when the refresh took pending: the commits since then are in s.pending, and they
// are the complete list of changes since head if head is chainHead and none broke the
// chain. (Deciding this from the state before the refresh made a refresh that overlapped
// a commit leave the next one full, and a full refresh at 100k files overlaps the next
// commit: every refresh was full.)
func (s *indexState) refreshed(head, chainHead plumbing.Hash, id fileID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastHead, s.lastFile = head, id
	s.base = plumbing.ZeroHash
	noCommit := s.chainHead == chainHead
	if noCommit {
		s.chainHead = head
	}
	s.valid = !head.IsZero() && !s.broken && (noCommit || head == chainHead)
}

// spliceRefresh writes into lock the index file with only the pending paths' entries
// re-made from HEAD's tree (root): O(changed) lookups, one streaming copy of the file.
//
// The lookups go through the owner's go-git instance under r.mu (a few ms: the trees along
// the changed paths), so the refresher keeps no second copy of the pack indexes and object
// cache; the file reads and the write run outside it. They are a few ms because the last
// commit left those trees hot: a head that a commit has since superseded has cold trees
// (at 100k files, a 2 MB tree to read and decode while every commit waits for r.mu), so
// with canRetry a moved HEAD, read again under r.mu, returns errSuperseded instead.
//
// muHeld: the caller (a checkout) holds r.mu already.
func (r *Repo) spliceRefresh(indexPath string, lock io.Writer, head plumbing.Hash, pending map[string]struct{}, canRetry, muHeld bool) (int, error) {
	type found struct {
		name string
		e    object.TreeEntry
		ok   bool
	}
	fs := make([]found, 0, len(pending))
	err := func() error {
		if !muHeld {
			r.mu.Lock()
			defer r.mu.Unlock()
		}
		if canRetry {
			// Commits move the branch under r.mu: what is read here stays HEAD until the
			// lookups are done.
			if now, err := r.readBranch(); err == nil && now != head {
				return errSuperseded
			}
		}
		r.syncPacksLocked()
		root, err := r.rootTree(r.repo.Storer, head)
		if err != nil {
			return err
		}
		tc := newTreeCacheHot(r.repo.Storer, r.hot)
		for p := range pending {
			e, ok, err := tc.entryAt(root, p)
			if err != nil {
				return err
			}
			fs = append(fs, found{p, e, ok && e.Mode != filemode.Dir})
		}
		return nil
	}()
	if err != nil {
		return 0, err
	}
	edits := make([]gitstore.IndexEdit, 0, len(fs))
	for _, f := range fs {
		ed := gitstore.IndexEdit{Name: f.name}
		if f.ok {
			ed.Entry = r.indexEntry(f.name, f.e.Mode, f.e.Hash)
		}
		edits = append(edits, ed)
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].Name < edits[j].Name })
	f, err := os.Open(indexPath)
	if err != nil {
		return 0, gitstore.ErrNotSpliceable
	}
	defer f.Close()
	return gitstore.SpliceIndex(f, lock, edits)
}

// fullRefresh writes into lock the index of HEAD's whole tree, reusing every entry of the
// current file whose blob and mode still match. unchanged: the current file already is
// exactly that (nothing written).
//
// It reads through a go-git instance of its own, made for this refresh and dropped after
// it (a full refresh runs at start and after someone else wrote the index: rarely), so the
// owner can commit meanwhile and nothing of the walk stays in memory.
func (r *Repo) fullRefresh(indexPath string, lock io.Writer, head plumbing.Hash) (n int, unchanged bool, err error) {
	gr, err := openGitCache(r.layout, indexCacheSize)
	if err != nil {
		return 0, false, err
	}
	defer closeStore(gr.Storer)
	root, err := r.rootTree(gr.Storer, head)
	if err != nil {
		return 0, false, err
	}
	tc := newTreeCache(gr.Storer)
	old, _ := readIndexFile(indexPath)
	reuse := make(map[string]*index.Entry)
	if old != nil {
		for _, e := range old.Entries {
			if e.Stage == 0 && !e.IntentToAdd && !e.SkipWorktree {
				reuse[e.Name] = e
			}
		}
	}
	var entries []*index.Entry
	reused := 0
	if !root.IsZero() {
		err := tc.walkTree(root, "", func(p string, e object.TreeEntry) error {
			if o, ok := reuse[p]; ok && o.Hash == e.Hash && o.Mode == e.Mode {
				entries = append(entries, o)
				reused++
				return nil
			}
			entries = append(entries, r.indexEntry(p, e.Mode, e.Hash))
			return nil
		})
		if err != nil {
			return 0, false, err
		}
	}
	if !root.IsZero() {
		r.warmHot(tc, root) // every tree of HEAD is decoded now (treewarm.go)
	}
	if old != nil && reused == len(entries) && len(old.Entries) == len(entries) && !root.IsZero() && gitstore.PlainIndexFile(indexPath) {
		return len(entries), true, nil
	}
	return len(entries), false, gitstore.WriteIndexVersion(lock, indexVersion(indexPath, gr), entries)
}

// rootTree is the tree of commit head (zero for an unborn branch).
func (r *Repo) rootTree(st storer.EncodedObjectStorer, head plumbing.Hash) (plumbing.Hash, error) {
	if head.IsZero() {
		return plumbing.ZeroHash, nil
	}
	c, err := getCommit(st, head)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", head, err)
	}
	return c.TreeHash, nil
}

// resetFile empties f for a rewrite.
func resetFile(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

// readIndexFile decodes the current index; nil when absent or unreadable
// (then nothing is reused).
func readIndexFile(path string) (*index.Index, fileID) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileID{}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileID{}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fileID{}
	}
	idx := &index.Index{}
	if err := index.NewDecoder(bytes.NewReader(b)).Decode(idx); err != nil {
		return nil, statID(fi)
	}
	return idx, statID(fi)
}

// indexEntry builds the entry for path at HEAD (mode, hash). When the work
// tree file has that exact content and type, the entry carries its stat data
// (so git treats it as clean without re-reading); otherwise the stat data
// is zero, which git sees as "changed" and re-checks — so an uncommitted
// edit or deletion still shows in `git status`.
func (r *Repo) indexEntry(p string, mode filemode.FileMode, h plumbing.Hash) *index.Entry {
	e := &index.Entry{Name: p, Mode: mode, Hash: h}
	abs := filepath.Join(r.dir, filepath.FromSlash(p))
	fi, err := os.Lstat(abs)
	if err != nil {
		return e
	}
	var cur plumbing.Hash
	switch {
	case mode == filemode.Symlink && fi.Mode()&fs.ModeSymlink != 0:
		t, err := os.Readlink(abs)
		if err != nil {
			return e
		}
		cur = gitstore.HashObject(plumbing.BlobObject, []byte(filepath.ToSlash(t)))
	case (mode == filemode.Regular || mode == filemode.Executable) && fi.Mode().IsRegular():
		if (fi.Mode()&0o111 != 0) != (mode == filemode.Executable) {
			return e
		}
		f, err := openNoFollow(abs)
		if err != nil {
			return e
		}
		var err2 error
		cur, err2 = r.workBlobHash(p, f, fi.Size()) // what `git add` would store (filters.go)
		f.Close()
		if err2 != nil {
			return e
		}
	default:
		return e
	}
	if cur != h {
		return e
	}
	fillStat(e, fi)
	return e
}

// createIndexTemp creates the file a refresh writes the new index into, in .git/memd
// (statedir: never through a symlinked state dir).
func (r *Repo) createIndexTemp() (*os.File, error) {
	d, err := statedir.Create(filepath.Join(r.gitDir, memd.StateDirName))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return d.CreateScratch("index-", ".tmp")
}

// installIndex fsyncs tmp (the new index) and only then takes index.lock, for as short as
// git's protocol allows: check that the index is still the one the refresh started from
// (was: its identity then), rename tmp over it, drop the lock. A held lock or an index
// someone rewrote meanwhile returns ErrLocked and changes nothing (tmp is removed): the next
// round starts again. The lock file stays empty: git's readers never read it. lockHeld,
// nil in production, runs with the lock held (crashHooks.indexLockHeld).
func installIndex(tmp *os.File, indexPath string, was fileID, lockHeld func(tmp string) error) error {
	name := tmp.Name()
	err := tmp.Sync()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("write index: %w", err)
	}
	lock, err := gitstore.CreateLock(indexPath, 0)
	if err != nil {
		_ = os.Remove(name)
		return err
	}
	defer gitstore.RollbackLock(lock)
	if lockHeld != nil {
		if err := lockHeld(name); err != nil {
			_ = os.Remove(name)
			return err
		}
	}
	var now fileID
	if fi, err := os.Stat(indexPath); err == nil {
		now = statID(fi)
	}
	if now != was {
		_ = os.Remove(name)
		return fmt.Errorf("index %s changed during the refresh: %w", indexPath, gitstore.ErrLocked)
	}
	if err := os.Rename(name, indexPath); err != nil {
		_ = os.Remove(name)
		return fmt.Errorf("rename %s: %w", name, err)
	}
	return nil
}
