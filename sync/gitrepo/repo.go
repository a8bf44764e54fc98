// Package gitrepo keeps an AI-agent memory repo committed and synced through
// go-git: Repo is the owner's handle on one repo (commit, index refresh,
// reconcile, checkout, fetch → merge → push). What needs objects but not the
// work tree is in packages beside it: treemerge (the three-way tree merge),
// gitremote (a remote's credentials, error kinds, redaction, backoff, and the
// push protocol and merge base over an object store), gitstore (git's lock
// files, refs, index file and loose-object writer, as git writes them) and
// internal/gitpath (what a fetched tree may hold); the merge policy is
// treemerge's (treemerge.Policy).
//
// It lives under sync/ (the product's folder) with a name of its own, so the
// standard library's sync keeps its name for every importer.
//
// Concurrency: go-git is not safe for concurrent use. A *Repo is meant to be
// driven by one owner goroutine (docs/ARCHITECTURE.md §2). The coalesced index
// refresher (ScheduleIndexRefresh) runs beside it but opens its own go-git
// repository and never takes r.mu (index.go). r.mu serialises the exported
// methods that use r.repo, so a stray call from another goroutine cannot
// interleave with the owner's; they take it themselves, and unexported
// helpers named *Locked expect the caller to hold it. Code in this package
// that adds methods on *Repo (remote, merge) must follow the same rule.
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/sync/githooks"
	"github.com/memd-dev/memd/sync/gitsign"
	"github.com/memd-dev/memd/sync/gitstore"

	"github.com/memd-dev/memd/sync/gitremote"
)

// ErrUnrelatedHistory is returned when the remote branch shares no history
// with the local one. memd never merges such histories silently.
var ErrUnrelatedHistory = errors.New("remote history is unrelated to local history")

// ErrNotRepo is returned by Open for a directory that is not a git work tree.
var ErrNotRepo = errors.New("not a git repository")

// DefaultBranch is the branch used when Options.Branch is empty.
const DefaultBranch = "main"

// Author is the identity written into commits.
type Author struct {
	Name, Email string
}

// Options configure a Repo.
type Options struct {
	Branch string // default "main"
	// Author empty → git config user.name/email seen by the repo, else
	// "memd <memd@HOSTNAME>".
	Author Author
	Logger *slog.Logger
	Now    func() time.Time // commit timestamps; nil = time.Now
	// Ignore is the repo's ignore rule, (*repofiles.Ignorer).Ignored; nil =
	// only private paths (repofiles.PrivateFor) and nested repositories are
	// skipped (those always are). It never applies to a tracked path.
	Ignore func(rel string, isDir bool) bool
	// MaxDeletes is sync.max_deletes, the mass deletion brake (massdelete.go); 0 =
	// DefaultMaxDeletes. Deletions, when set, lets one held deletion through.
	MaxDeletes int
	Deletions  DeletionAllowance
	// LockFile is lock.file, the writer lock's name: never committed, never
	// written by a checkout ("" = memd.DefaultLockFile).
	LockFile string
	Hostname string // for messages / conflict names; default os.Hostname
	// Ledger is the repo-relative ledger that merges of edits made during a
	// checkout merge by record id (edits.go); "" = memory.jsonl.
	Ledger string
	// MaxFileSize is sync.max_file_size: a larger fetched blob is refused
	// (ErrBlobTooLarge), a larger local file is held, not committed
	// (HeldFiles). 0 = no limit.
	MaxFileSize int64
	// WarmTrees: the first index refresh walks HEAD's whole tree even when the index is
	// one a git wrote for HEAD, to keep its big trees hot for the commits to come
	// (treewarm.go): the daemon. A one-shot command skips that walk (~30 ms at 2,000 files
	// of a `memd restore`).
	WarmTrees bool
}

// Repo is a memory repo: a git work tree with its .git directory.
type Repo struct {
	dir    string // absolute work tree root, symlinks resolved
	given  string // absolute work tree root as the caller named it
	gitDir string // absolute .git directory
	repo   *git.Repository
	opts   Options
	log    *slog.Logger
	author Author
	names  nameFS // how the work tree's file system compares names (treefold.go)

	// gitDir above is this work tree's own git dir (HEAD, index, the state dir): .git, or
	// what a .git file names. commonDir is the one all worktrees share (objects, refs,
	// packed-refs, config): gitDir but in a linked worktree (internal/gitlayout).
	commonDir string
	layout    gitlayout.Layout

	// maxFile is Options.MaxFileSize as SetMaxFileSize last set it (a reload).
	maxFile atomic.Int64
	// oversize: the local files held, not committed, for being over maxFile (heldsize.go).
	oversize oversizeSet

	// mu serialises go-git use: the exported methods, and the index refresher's
	// lookups through the owner's repository (index.go).
	mu sync.Mutex
	// look caches the remote look's credentials (remotehead.go); its own lock, since the
	// look runs beside the owner.
	look lookCache
	// signers: how commits are signed, as git would (commit.go encodeCommit); its own lock.
	signers gitsign.Cache
	// hot are the trees memd's commits wrote, decoded, newest per directory (hotDirs: path →
	// hash), under mu: the next commits' bases, so a file in a directory of 40k files does
	// not re-read and decode a 2 MB tree per commit. Trees are content-addressed: a cached
	// view is never stale, at worst no longer HEAD's. Bounded by maxHotEntries.
	hot     map[plumbing.Hash]*treeView
	hotDirs map[string]plumbing.Hash

	// index refresh state (see index.go).
	idx indexState

	// durable is a sync's checkout tail left for after the writer lock
	// (durable.go); under mu.
	durable durableState
	// held: versions a checkout took off their names, open until the edit
	// merges are done (checkout.go heldVersion); under mu.
	held []*heldVersion
	// filters: the attributes engine and the paths held for their filter (filters.go).
	filters filterState
	// guard vets what commits take (guard.go); guarded is what it holds now, by path.
	// Both under mu.
	guard   Guard
	guarded map[string]Guarded
	// gitHooks runs the repo's own git hooks (githooks.go; nil: none); hookHeld is what
	// a commit hook refused, by path. Both under mu.
	gitHooks *githooks.Runner
	hookHeld map[string]HookHeld

	// brakeTotal is the last count of a tree's memory files (massdelete.go); under mu.
	brakeTotal struct {
		tree plumbing.Hash
		n    int
	}
	// deletes is the brake's window as last read or written (massdelete.go), deletesRead
	// once it was read; under mu.
	deletes     statedir.DeleteWindow
	deletesRead bool

	// packs is what objects/pack looked like when go-git last indexed it
	// (owner side, under mu); see syncPacks.
	packs packStamp

	// fileSrc is the object store of the file remote last copied from (filefetch.go), kept
	// so its pack indexes stay mapped between fetches; under mu.
	fileSrc    *gitstore.Storage
	fileSrcDir string
	// filePush is the last verdict on a file remote's taking a direct push (filepush.go);
	// under mu.
	filePush filePushVerdict

	// testBeforeRef, when set (tests only), runs between writing a commit's
	// objects and moving the ref: the window a concurrent git can use.
	testBeforeRef func()
	// testDuringRefresh, when set (tests only), runs in an index refresh after it read
	// the branch head.
	testDuringRefresh func()
	// testPushStats, when set (tests only), receives each push's
	// enumeration statistics (gitremote/push.go).
	testPushStats func(gitremote.PushStats)
	// testFileCopied, when set (tests only), hears of each fetch copied from a file
	// remote (filefetch.go) and how many objects it wrote.
	testFileCopied func(objects int)
	// testPushWalkLimit, when set (tests only), bounds a push's commit walk
	// (gitremote.Push.WalkLimit).
	testPushWalkLimit int
	// hooks, set by tests only, stop a sync where a crash matters or let a
	// writer race the checkout (crashHooks, merge.go).
	hooks *crashHooks
}

// objectCacheSize bounds go-git's cache of decoded objects. git.PlainOpen gives every
// repository 96 MiB, which a daemon that runs for weeks fills slowly (a soak saw its heap
// climb); memd's commit path reads few objects, and a merge's trees fit in far less.
// A commit reads HEAD's trees along the changed paths, which the previous commit wrote (not
// through go-git, so never cached): the cache serves merges and pushes, which read a remote
// commit's trees more than once. 4 MiB fills within minutes of steady work, after which the
// heap is flat (the soak's check); a tree larger than the cache is not cached at all.
const objectCacheSize = 4 * cache.MiByte

// indexCacheSize is the cache of a full index refresh's own go-git instance: the walk reads
// each tree once, so a cache would only hold garbage.
const indexCacheSize = 256 * cache.KiByte

// openGit is git.PlainOpen for the work tree of layout l (its .git a directory or a file,
// a linked worktree's git dir over its common dir), with the object cache bounded by
// objectCacheSize.
func openGit(l gitlayout.Layout) (*git.Repository, error) { return openGitCache(l, objectCacheSize) }

// Objects are read through gitstore.Storage, whose pack indexes stay in the files instead of
// on the heap.
func openGitCache(l gitlayout.Layout, size cache.FileSize) (*git.Repository, error) {
	st := gitstore.NewWorktreeStorage(l.GitDir, l.CommonDir, cache.NewObjectLRU(size), largeObject)
	gr, err := git.Open(extensionsKnown{st}, osfs.New(l.WorkTree))
	if err == nil {
		gr.Storer = st // extensionsKnown only for go-git's check at open
	}
	return gr, err
}

// withDefaults fills what o leaves unset: this machine's host name, the wall clock, a
// logger that discards, the default branch.
func (o Options) withDefaults() Options {
	if o.Hostname == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "localhost"
		}
		o.Hostname = h
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Branch == "" {
		o.Branch = DefaultBranch
	}
	return o
}

// Open opens the git work tree at dir. Errors name the dir.
func Open(dir string, opts Options) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open repo %s: %w", dir, err)
	}
	given := abs
	// Resolve symlinks so paths we compute (and /proc cwd checks) agree
	// with what the kernel reports.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	layout, err := gitlayout.Resolve(abs)
	if errors.Is(err, gitlayout.ErrNoGitDir) {
		return nil, fmt.Errorf("open repo %s: %w", dir, ErrNotRepo)
	} else if err != nil {
		return nil, fmt.Errorf("open repo %s: %w", dir, err)
	}
	gitDir := layout.GitDir
	if err := checkLayout(layout); err != nil {
		return nil, fmt.Errorf("open repo %s: %w", dir, err)
	}
	gr, err := openGit(layout)
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, fmt.Errorf("open repo %s: %w", dir, ErrNotRepo)
		}
		return nil, fmt.Errorf("open repo %s: %w", dir, err)
	}
	opts = opts.withDefaults()
	log := opts.Logger
	if err := plumbing.NewBranchReferenceName(opts.Branch).Validate(); err != nil {
		return nil, fmt.Errorf("open repo %s: branch %q: %w", dir, opts.Branch, err)
	}
	if at := layout.CheckedOutElsewhere(plumbing.NewBranchReferenceName(opts.Branch).String()); at != "" {
		// git refuses to move a branch another worktree has checked out; so does memd.
		return nil, fmt.Errorf("open repo %s: %w: the branch %s is checked out at %s (set sync.branch to this worktree's branch)",
			dir, gitlayout.ErrUnsupported, opts.Branch, at)
	}
	if cfg, err := gr.Config(); err == nil && partialClone(cfg) {
		if st, ok := gr.Storer.(*gitstore.Storage); ok {
			st.SetLazyFetch(lazyFetcher(abs))
		}
	}
	r := &Repo{dir: abs, given: given, gitDir: gitDir, commonDir: layout.CommonDir, layout: layout, repo: gr, opts: opts, log: log,
		durable: durableState{dirs: map[string]bool{}}}
	r.maxFile.Store(opts.MaxFileSize)
	r.filters.dir, r.filters.commonDir, r.filters.layout, r.filters.log = abs, layout.CommonDir, layout, log
	// The signer reads git's config from the process's one read (filters and hooks share it).
	r.signers.Read = func(ctx context.Context, _ string) ([][2]string, error) { return gitconfig.ForRepo(ctx, layout) }
	r.author = r.resolveAuthor()
	// memd's commits chain from the head found at open; a first index refresh that
	// overlaps the first commit then leaves the next refresh incremental (index.go).
	if h, err := r.readBranch(); err == nil {
		r.idx.chainHead = h
	}
	r.dropTornRemoteRefs()
	if head, err := gr.Storer.Reference(plumbing.HEAD); err == nil && head.Type() == plumbing.SymbolicReference {
		if want := plumbing.NewBranchReferenceName(opts.Branch); head.Target() != want {
			// Commits go to the configured branch; git's view of the work
			// tree follows HEAD. Say so once rather than silently diverge.
			log.Warn("HEAD points at another branch than memd commits to",
				"repo", abs, "head", head.Target().String(), "branch", want.String())
		}
	}
	return r, nil
}

// Init makes dir a git repo whose HEAD points at refs/heads/<branch>, unless
// it already is one; then it opens it. Used by `memd init`.
func Init(dir string, branch string) (*Repo, error) {
	if branch == "" {
		branch = DefaultBranch
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if err := ref.Validate(); err != nil {
		return nil, fmt.Errorf("init repo %s: branch %q: %w", dir, branch, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("init repo %s: %w", dir, err)
	}
	_, err := git.PlainOpen(dir)
	switch {
	case err == nil:
	case errors.Is(err, git.ErrRepositoryNotExists):
		if _, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
			InitOptions: git.InitOptions{DefaultBranch: ref},
		}); err != nil {
			return nil, fmt.Errorf("init repo %s: %w", dir, err)
		}
	default:
		return nil, fmt.Errorf("init repo %s: %w", dir, err)
	}
	return Open(dir, Options{Branch: branch})
}

// Dir is the absolute work tree root.
func (r *Repo) Dir() string { return r.dir }

// Branch is the branch memd commits to.
func (r *Repo) Branch() string { return r.opts.Branch }

// BranchRef is refs/heads/<branch>.
func (r *Repo) BranchRef() plumbing.ReferenceName {
	return plumbing.NewBranchReferenceName(r.opts.Branch)
}

// Hostname is the host name used in messages and conflict names.
func (r *Repo) Hostname() string { return r.opts.Hostname }

// Now is the injected clock.
func (r *Repo) Now() time.Time { return r.opts.Now() }

// Logger is the repo's logger (never nil).
func (r *Repo) Logger() *slog.Logger { return r.log }

// CommitAuthor is the resolved author identity.
func (r *Repo) CommitAuthor() Author { return r.author }

// SetIgnore replaces the ignore hook (config reload). nil = only .git/ and
// .memory.lock.
func (r *Repo) SetIgnore(ignore func(rel string, isDir bool) bool) {
	r.mu.Lock()
	r.opts.Ignore = ignore
	r.mu.Unlock()
}

// resolveAuthor: Options.Author, else git config (repo, global, system),
// else memd <memd@HOSTNAME>.
func (r *Repo) resolveAuthor() Author {
	a := r.opts.Author
	if a.Name != "" && a.Email != "" {
		return a
	}
	if cfg, err := r.repo.ConfigScoped(config.SystemScope); err == nil {
		if a.Name == "" {
			a.Name = cfg.User.Name
		}
		if a.Email == "" {
			a.Email = cfg.User.Email
		}
	}
	if a.Name == "" {
		a.Name = "memd"
	}
	if a.Email == "" {
		a.Email = "memd@" + r.opts.Hostname
	}
	return a
}

// go-git loads the list of pack indexes once and never looks again, so
// packs that git writes behind its back (nightly `git gc`, a user's fetch
// or repack) are invisible to a long-running Repo, and objects that moved
// from loose into such a pack read as "not found". We stat objects/pack
// (one stat) before each job and make go-git re-index when it changed, and
// getCommit/treeCache retry once after a re-index on "not found".
type packStamp struct {
	mtime time.Time
	size  int64
}

type reindexer interface{ Reindex() }

// syncPacks re-indexes st's packs when objects/pack changed since *last.
func syncPacks(gitDir string, st any, last *packStamp) {
	fi, err := os.Stat(filepath.Join(gitDir, "objects", "pack"))
	if err != nil {
		return
	}
	cur := packStamp{fi.ModTime(), fi.Size()}
	if cur == *last {
		return
	}
	if ri, ok := st.(reindexer); ok {
		ri.Reindex()
	}
	*last = cur
}

// syncPacksLocked refreshes the owner's go-git view of packs. Caller holds
// r.mu. Code in this package that reads objects at the start of a job
// (fetch, merge) should call it first.
func (r *Repo) syncPacksLocked() { syncPacks(r.commonDir, r.repo.Storer, &r.packs) }

// getCommit reads a commit, re-indexing packs once if it is not found.
func getCommit(st storer.EncodedObjectStorer, h plumbing.Hash) (*object.Commit, error) {
	c, err := object.GetCommit(st, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		if ri, ok := st.(reindexer); ok {
			ri.Reindex()
			c, err = object.GetCommit(st, h)
		}
	}
	return c, err
}

// Head is the commit hash the branch points at, "" for an unborn branch.
func (r *Repo) Head() (string, error) {
	h, err := r.readBranch()
	if err != nil {
		return "", err
	}
	if h.IsZero() {
		return "", nil
	}
	return h.String(), nil
}

// readBranch reads refs/heads/<branch> the way git does (loose ref file,
// else packed-refs). Zero hash = unborn. It reads files only, so it is safe
// without r.mu.
func (r *Repo) readBranch() (plumbing.Hash, error) {
	h, err := gitstore.ReadRef(r.commonDir, r.BranchRef().String())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s in %s: %w", r.BranchRef(), r.dir, err)
	}
	return h, nil
}

// CommitMessages returns up to limit commit messages, newest first,
// following first parents from the branch head. limit <= 0 means all.
func (r *Repo) CommitMessages(limit int) ([]string, error) {
	head, err := r.readBranch()
	if err != nil || head.IsZero() {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncPacksLocked()
	var out []string
	h := head
	for !h.IsZero() && (limit <= 0 || len(out) < limit) {
		c, err := getCommit(r.repo.Storer, h)
		if err != nil {
			return out, fmt.Errorf("commit messages in %s: read %s: %w", r.dir, h, err)
		}
		out = append(out, c.Message)
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return out, nil
}

// relPath turns a caller path (absolute under the repo, or relative to it)
// into a clean repo-relative slash path. "" means the repo root.
func (r *Repo) relPath(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("empty path")
	}
	if filepath.IsAbs(p) {
		orig := p
		rel, err := filepath.Rel(r.dir, filepath.Clean(p))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			// Named through the path the caller opened (before
			// symlinks were resolved, e.g. /tmp vs /private/tmp)?
			if r2, err2 := filepath.Rel(r.given, filepath.Clean(p)); err2 == nil {
				rel, err = r2, nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("path %q: %w", orig, err)
		}
		p = rel
	}
	p = filepath.ToSlash(filepath.Clean(p))
	if p == "." {
		return "", nil
	}
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("path %q is outside repo %s", p, r.dir)
	}
	return p, nil
}

// private says whether a repo-relative path is this machine's own and never committed,
// tracked or not: .git at any depth, the writer lock (Options.LockFile), memd's temp
// files (repofiles.PrivateFor, the one definition).
func (r *Repo) private(rel string) bool { return repofiles.PrivateFor(rel, r.opts.LockFile) }

// ignored says whether a repo-relative path is outside what memd commits when it is not
// tracked: private, or ignored by the Ignore hook. Ignore rules never apply to a tracked
// path (git's rule): callers that may meet one ask ignoredUntracked.
func (r *Repo) ignored(rel string, isDir bool) bool {
	if rel == "" {
		return false
	}
	if r.private(rel) {
		return true
	}
	return r.opts.Ignore != nil && r.opts.Ignore(rel, isDir)
}

// ignoredUntracked is ignored with git's exception: a path tracked says true (for a
// directory: it holds tracked files) is never ignored, only private.
func (r *Repo) ignoredUntracked(rel string, isDir bool, tracked func(rel string, isDir bool) bool) bool {
	if !r.ignored(rel, isDir) {
		return false
	}
	return r.private(rel) || tracked == nil || !tracked(rel, isDir)
}

// largeObject: packed objects above this size are streamed from the pack
// when read, never decoded whole into memory (a checkout streams a blob to
// its file; a 200 MB memory must not cost several times that).
const largeObject = 1 << 20
