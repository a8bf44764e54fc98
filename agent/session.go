package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/writerlock"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/secrets"
	"github.com/memd-dev/memd/sleep"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// Session is a memory repo opened the one way every command opens it (docs/ARCHITECTURE.md
// §10): what crashes left behind is finished or undone first, so nothing commits a tree a
// killed merge or sleep left half written. The owner loop of `memd run` holds one for its
// life; `memd sync`, `sleep` and `init` hold one for theirs. A Session is not safe for
// concurrent use (one goroutine owns the repo, §2), except that Close may be called once
// from anywhere.
type Session struct {
	cfg     memd.Config
	repo    *gitrepo.Repo
	ignorer *repofiles.Ignorer
	log     *slog.Logger
	now     func() time.Time
	who     string
	held    func(time.Duration)
	guard   *secrets.Guard // the secret scan on repo's commits (held.go); nil: secrets.scan false
	// startup is the stale index.lock check and the start-up index refresh, off the start
	// path (§9.5); startOnce starts it once (Open, or StartIndexUpkeep when deferred).
	startup   sync.WaitGroup
	startOnce sync.Once
	// healed are the git directory repairs Open made; healPending what it could not heal
	// yet (githeal.go, docs/ARCHITECTURE.md §9.7).
	healed      []string
	healPending string
	cut         *cutHolds // files a power cut emptied, held (cutheld.go); nil: read-only
}

// OpenOptions tune Open. Zero values take the defaults.
type OpenOptions struct {
	Logger *slog.Logger
	Now    func() time.Time
	// Who names the writer lock's holder (its `context:` line): "memd", "memd sync".
	Who string
	// ReadOnly repairs nothing and clears no lock (`memd sleep --dry-run`: it writes
	// nothing; a later real run repairs first).
	ReadOnly bool
	// LockHeld is told how long each hold of the writer lock lasted (the agent's
	// memd_writer_lock_held_seconds_total).
	LockHeld func(time.Duration)
	// DeferIndexUpkeep leaves the stale index.lock check and the start-up index refresh to
	// StartIndexUpkeep (memd run calls it at READY): at 100k files the full refresh decodes
	// every tree and warms the big ones, seconds of CPU that would otherwise compete with
	// the watcher's set-up on the way to READY. Commits do not touch the index (§9.5), so
	// none waits for it. It also has that refresh walk an index git wrote for HEAD, for the
	// warm trees (gitrepo.Options.WarmTrees), where a one-shot command skips the walk.
	DeferIndexUpkeep bool
}

// maxCASRetries bounds how often a commit is retried when HEAD moved under it (a user's own
// `git commit` in the repo, §9.1); each retry re-reads HEAD.
const maxCASRetries = 5

// Open opens the repo at cfg.Repo with memd's ignore rules and applies the start-up
// invariants, in this order (§10): the git directory's crash damage healed (§9.7), then under the writer lock, finish (or undo) a merge a crash
// interrupted (§9.2), then undo a sleep phase a crash left half applied (§9.3); then, in the
// background, clear a stale .git/index.lock and bring the index up to HEAD (§9.5).
// The repairs hold the writer lock because a live sync or sleep holds it across its own
// marker or journal: under the lock, a marker or journal found is a dead process's. A lock
// that stays held past lock.timeout fails Open (naming the holder).
// A merge that can be neither finished nor undone does not fail Open: commits wait
// (sync.ErrMergeInProgress) and every sync tries again; the log says why.
func Open(ctx context.Context, cfg memd.Config, o OpenOptions) (*Session, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Who == "" {
		o.Who = "memd"
	}
	s := &Session{cfg: cfg, log: o.Logger, now: o.Now, who: o.Who, held: o.LockHeld}
	if !o.ReadOnly {
		s.cut = newCutHolds(cfg) // before anything of this run writes a status document
		// First: what a crash left in .git (an empty HEAD, a corrupt object) is healed
		// before anything reads it (githeal.go).
		if err := s.healAtOpen(ctx, o); err != nil {
			return nil, fmt.Errorf("open %s: %w", cfg.Repo, err)
		}
	}
	ro := gitrepo.OptionsFromConfig(cfg)
	ro.Logger, ro.Now = o.Logger, o.Now
	ro.Deletions = stateAllowance{cfg.StateDir()} // memd resume --allow-deletes (brake.go)
	ro.WarmTrees = o.DeferIndexUpkeep             // the daemon's start-up refresh warms big trees
	repo, err := gitrepo.Open(cfg.Repo, ro)       // first: it names a missing repo best
	if err != nil {
		return nil, err
	}
	ign, err := repofiles.New(cfg.Repo, cfg.Watch.Ignore)
	if err != nil {
		repo.Close()
		return nil, fmt.Errorf("ignore rules of %s: %w", cfg.Repo, err)
	}
	ign = ign.WithLockFile(cfg.Lock.File) // lock.file is never committed, whatever its name
	repo.SetIgnore(ign.Ignored)
	s.repo, s.ignorer = repo, ign
	if o.ReadOnly {
		return s, nil
	}
	s.guard = guardRepo(repo, cfg) // held.go: every commit of this session is scanned
	// The repo's own git hooks around its commits, pushes and merges (commit.hooks).
	repo.SetGitHooks(repo.GitHooks(cfg.Commit.Hooks, cfg.Sync.TokenEnv))
	if err := s.WithLock(ctx, s.recover); err != nil {
		repo.Close()
		return nil, fmt.Errorf("open %s: %w", cfg.Repo, err)
	}
	if !o.DeferIndexUpkeep {
		s.StartIndexUpkeep()
	}
	return s, nil
}

// StartIndexUpkeep clears a stale .git/index.lock and brings the index up to HEAD, in the
// background; once per session (Open calls it unless told to defer, OpenOptions).
func (s *Session) StartIndexUpkeep() {
	s.startOnce.Do(func() {
		s.startup.Add(1)
		go func() {
			defer s.startup.Done()
			// Left by a git or memd killed holding it; it must be a couple of seconds old to
			// be judged stale, so this waits, off the start path. A memd killed between a
			// commit and its index refresh left the index behind HEAD: refresh it either way.
			if err := s.repo.ClearStaleIndexLock(); err != nil {
				s.log.Warn("index lock at start", "err", err)
			}
			s.repo.ScheduleIndexRefresh()
		}()
	})
}

// recover is Open's repairs; the caller holds the writer lock.
func (s *Session) recover() error {
	// A merge killed mid-checkout goes first: a reconcile would commit its not yet updated
	// files as reverts of the merge.
	if done, err := s.repo.FinishInterruptedMerge(); err != nil {
		s.log.Error("interrupted merge could not be finished; commits wait until it is", "err", err)
	} else if done {
		s.log.Warn("finished a merge that was interrupted by a crash")
	}
	// Likewise a sleep phase killed mid-apply: a reconcile would commit the half-applied
	// tree as if a writer had made it.
	if err := s.SleepRunner(sleep.Options{}).Recover(); err != nil {
		return fmt.Errorf("recover interrupted sleep: %w", err)
	}
	return nil
}

// Repo is the open repository.
func (s *Session) Repo() *gitrepo.Repo { return s.repo }

// Ignorer is the ignore rule Open built (a reload builds a new one: the agent keeps its own).
func (s *Session) Ignorer() *repofiles.Ignorer { return s.ignorer }

// SetConfig takes a reloaded config: the writer lock's file and timeout and the remote's
// options follow it. The repo path cannot change.
func (s *Session) SetConfig(cfg memd.Config) {
	cfg.Repo = s.cfg.Repo
	if cfg.Commit != s.cfg.Commit || cfg.Sync.TokenEnv != s.cfg.Sync.TokenEnv {
		s.repo.SetGitHooks(s.repo.GitHooks(cfg.Commit.Hooks, cfg.Sync.TokenEnv)) // commit.hooks reloaded
	}
	s.cfg = cfg
}

// SleepRunner is a sleep runner over this session's repo with its config; o's Now, Logger
// and Ignore are filled from the session when unset.
func (s *Session) SleepRunner(o sleep.Options) *sleep.Runner {
	o.Config = s.cfg
	if o.Now == nil {
		o.Now = s.now
	}
	if o.Logger == nil {
		o.Logger = s.log
	}
	if o.Ignore == nil {
		o.Ignore = s.ignorer.Ignored
	}
	return sleep.NewRunner(s.cfg.Repo, s.repo, o)
}

// WithLock runs fn holding the writer lock (§9.4).
func (s *Session) WithLock(ctx context.Context, fn func() error) error {
	release, err := s.acquireLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	return fn()
}

// acquireLock takes the writer lock; release (idempotent) gives it back and reports how long
// it was held.
func (s *Session) acquireLock(ctx context.Context) (release func(), err error) {
	lk, err := writerlock.Acquire(ctx, s.cfg.LockPath(), writerlock.Options{
		Timeout: s.cfg.Lock.Timeout.D(), Context: s.who, Logger: s.log,
	})
	if err != nil {
		return nil, err
	}
	at := time.Now()
	var once sync.Once
	return func() {
		once.Do(func() {
			if err := lk.Release(); err != nil {
				s.log.Warn("release writer lock", "err", err)
			}
			d := time.Since(at)
			if s.held != nil {
				s.held(d)
			}
			s.log.Debug("writer lock released", "held", d)
		})
	}, nil
}

// CommitPending commits paths (repo-relative or absolute) as a change commit, holding the
// writer lock only while they are read, and tries again on the new HEAD when HEAD moved
// under it (§9.1). No change: no commit (Hash "").
func (s *Session) CommitPending(ctx context.Context, paths []string) (memd.CommitResult, error) {
	var res memd.CommitResult
	var err error
	if paths = s.cutFilter(paths); len(paths) == 0 {
		return res, nil
	}
	for range maxCASRetries {
		release, lerr := s.acquireLock(ctx)
		if lerr != nil {
			err = lerr
			break
		}
		// The lock goes as soon as the paths are read: the fsyncs and the ref move that
		// follow touch nothing a writer writes.
		res, err = s.repo.CommitPathsRead(paths, release)
		release()
		if !errors.Is(err, memd.ErrHeadMoved) {
			break
		}
	}
	if err != nil {
		return res, fmt.Errorf("commit %d paths: %w", len(paths), err)
	}
	return res, nil
}

// CommitChanges commits whatever differs from HEAD (a full reconcile, §3): what a one-shot
// command commits before it syncs.
func (s *Session) CommitChanges(ctx context.Context) (memd.CommitResult, error) {
	dirty, err := s.repo.Reconcile()
	if err != nil {
		return memd.CommitResult{}, fmt.Errorf("reconcile %s: %w", s.cfg.Repo, err)
	}
	if len(dirty) == 0 {
		return memd.CommitResult{}, nil
	}
	return s.CommitPending(ctx, dirty)
}

// SyncOnce fetches, merges and pushes once (§4), holding the writer lock for each round's
// local work only, never across the network. Edits in a checkout's way are committed first by
// commitFirst (nil: CommitPending), which takes the lock itself; beforeRetry (may be nil) runs
// before each round that follows a lost push race.
func (s *Session) SyncOnce(ctx context.Context, commitFirst func(paths []string) error, beforeRetry func()) (gitrepo.SyncResult, error) {
	if commitFirst == nil {
		commitFirst = func(paths []string) error { _, err := s.CommitPending(ctx, paths); return err }
	}
	ro := gitrepo.RemoteOptionsFromConfig(s.cfg)
	ro.LocalWork = func(fn func() error) error { return s.WithLock(ctx, fn) }
	ro.CommitFirst = commitFirst
	ro.BeforeRetry = beforeRetry
	return s.repo.Sync(ctx, ro)
}

// RefreshIndex brings .git/index up to HEAD now (a one-shot command's last step), after
// Open's stale-lock check.
func (s *Session) RefreshIndex() error {
	s.StartIndexUpkeep()
	s.startup.Wait()
	return s.repo.RefreshIndex()
}

// Close waits for the start-up index work and the index refreshes, and closes the repo.
func (s *Session) Close() {
	s.startup.Wait()
	s.repo.Close()
}
