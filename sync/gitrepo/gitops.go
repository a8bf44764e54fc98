package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd/sync/gitstore"
)

// The HEAD and git-operation gate (docs/ARCHITECTURE.md §11 "Other writers"): memd is one writer among
// several, and it commits, merges, pushes and refreshes the index only while the repo is
// where memd left it: HEAD the symbolic ref refs/heads/<branch>, and no git operation of
// someone else's half done. Otherwise it stands aside, the way git itself refuses to start
// a second operation over one in progress ("You have not concluded your merge").

// ErrStandAside is returned (wrapped in a *StandAsideError) by a commit or sync that did
// nothing because the repo is in another writer's hands: HEAD on another branch or
// detached, a merge, rebase, cherry-pick, revert or bisect in progress, or git holding
// .git/index.lock. Nothing was committed, merged or pushed; the caller shows state
// paused and tries again once the repo is back (Repo.StandAside returns "").
var ErrStandAside = errors.New("memd stands aside")

// Aside says why memd stands aside: Reason is the sentence for the detail ("HEAD is on
// sleep/2026-12-01, not main"), Brief the few words for a status line ("HEAD on
// sleep/2026-12-01"). The zero Aside means memd may work.
type Aside struct {
	Reason, Brief string
	// Passing: a git holding .git/index.lock for a moment (a `git status` in a prompt) is
	// waited out, not news: no event.
	Passing bool
}

// StandAsideError is ErrStandAside with its reason.
type StandAsideError struct{ Aside Aside }

func (e *StandAsideError) Error() string { return "memd stands aside: " + e.Aside.Reason }

// Unwrap makes errors.Is(err, ErrStandAside) hold.
func (e *StandAsideError) Unwrap() error { return ErrStandAside }

// AsideOf returns the Aside carried by err, if it is (or wraps) a *StandAsideError.
func AsideOf(err error) (Aside, bool) {
	var e *StandAsideError
	if errors.As(err, &e) {
		return e.Aside, true
	}
	return Aside{}, false
}

// operations are the files and directories git leaves in .git while an operation waits for
// the user, in the order git's own status (wt-status.c) looks at them. REBASE_HEAD (in
// docs/ARCHITECTURE.md §11's list) is not one on its own: git leaves it behind after a rebase that
// finished (`git rebase --continue` to the end), and git's status, too, judges a rebase by
// rebase-merge/ and rebase-apply/ alone; while a rebase stops, those are there.
var operations = []struct {
	name, reason, brief string
}{
	{"rebase-merge", "a rebase is in progress", "rebasing"},
	{"rebase-apply", "a rebase (or git am) is in progress", "rebasing"},
	{"MERGE_HEAD", "a merge is in progress", "merging"},
	{"CHERRY_PICK_HEAD", "a cherry-pick is in progress", "cherry-picking"},
	{"REVERT_HEAD", "a revert is in progress", "reverting"},
	{"sequencer", "a cherry-pick or revert is in progress", "cherry-picking"},
	{"BISECT_LOG", "a bisect is in progress", "bisecting"},
}

// GateFiles are the names at the top of .git whose appearance or removal can change what
// StandAside answers: a daemon that watches .git reacts to these only.
func GateFiles() []string {
	out := []string{"HEAD", "index.lock", "REBASE_HEAD"}
	for _, op := range operations {
		out = append(out, op.name)
	}
	return out
}

// StandAside says why memd must not commit or sync now (the zero Aside: it may). It reads
// a handful of files in .git (no go-git, no r.mu), so it is cheap enough to poll.
func (r *Repo) StandAside() Aside {
	if a := r.operationAside(); a.Reason != "" {
		return a
	}
	if r.foreignIndexLock() {
		return Aside{Reason: "git is writing the index (.git/index.lock)", Brief: "index locked", Passing: true}
	}
	// git moves no branch another worktree has checked out (a `git checkout
	// --ignore-other-worktrees` there since memd started); neither does memd (gitlayout).
	if at := r.layout.CheckedOutElsewhere(r.BranchRef().String()); at != "" {
		return Aside{Reason: fmt.Sprintf("the branch %s is checked out at %s too", r.Branch(), at), Brief: "branch checked out elsewhere"}
	}
	// A git command running in the work tree (Linux: /proc) may be between two of its steps,
	// each under its own index.lock: `git stash` saves, then resets, then cleans; a commit
	// of memd's in a gap moves HEAD under it (the stash's pop then fails on a file memd
	// committed). Waited out like the lock. The /proc scan costs milliseconds, so it is made
	// only when some git wrote the index in the last seconds (every such command does).
	if r.indexTouchedByGit() {
		if live, _ := gitstore.LiveGitProcess(r.dir); live {
			return gitRunningAside
		}
	}
	return Aside{}
}

// HeadMovedByOthers reports whether memd's branch moved since memd last moved it, or since
// the last call that said so: another writer committed on it (a person's `git commit`,
// memhtml's). git builds such a commit from the index, which can lag memd's own last commit
// (the refresher runs after it, and yields to a person's git): the commit then leaves out
// files memd had just committed. They stay in the work tree, unchanged, so no watcher event
// comes to commit them again; the caller reconciles. The first call only records the head.
func (r *Repo) HeadMovedByOthers() bool {
	cur, err := r.readBranch()
	if err != nil {
		return false
	}
	s := &r.idx
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seenHead == cur {
		return false
	}
	first := s.seenHead.IsZero()
	s.seenHead = cur
	return !first
}

// operationAside is StandAside's part that reads only .git's operation files and HEAD
// (microseconds): what the index refresher checks again while it holds index.lock.
func (r *Repo) operationAside() Aside {
	// An operation first: a rebase or bisect detaches HEAD, and "a rebase is in progress"
	// says what to finish, where "HEAD is detached" would not.
	for _, op := range operations {
		if _, err := os.Lstat(filepath.Join(r.gitDir, op.name)); err == nil {
			return Aside{Reason: op.reason, Brief: op.brief}
		}
	}
	return r.headAside()
}

// gitAtWork says why a person's git is at work on the index ("" = it is not): an
// index.lock memd did not take. Before it looks, it waits (up to refreshQuiet) for an index
// some git wrote just now to have been still that long: git commands come in runs (a
// script's `git add` then `git commit`), each taking index.lock without waiting, and the
// next one is due within milliseconds. The wait is short: while memd's index lags its last
// commit or checkout, a person's `git commit` or `git stash` works from the stale index.
func (r *Repo) gitAtWork() string {
	if age, ok := r.indexAgeByGit(); ok && age < refreshQuiet {
		time.Sleep(refreshQuiet - age)
	}
	if _, err := os.Lstat(filepath.Join(r.gitDir, "index.lock")); err == nil && !r.idx.checkoutLock.Load() && !r.idx.installing.Load() {
		return "git holds .git/index.lock"
	}
	return ""
}

// refreshQuiet is how long the index must have been still, after a git other than memd
// wrote it, before the background refresher takes index.lock.
const refreshQuiet = 50 * time.Millisecond

// indexTouchedByGit: .git/index was written within indexLockMinAge, and not by memd's own
// refresh (the file is not the one it installed last).
func (r *Repo) indexTouchedByGit() bool {
	age, ok := r.indexAgeByGit()
	return ok && age <= indexLockMinAge
}

// indexAgeByGit is how long ago .git/index was written, when not by memd's own refresh
// (ok false: memd's, or no index).
func (r *Repo) indexAgeByGit() (time.Duration, bool) {
	fi, err := os.Stat(filepath.Join(r.gitDir, "index"))
	if err != nil {
		return 0, false
	}
	r.idx.mu.Lock()
	mine := r.idx.lastFile == statID(fi)
	r.idx.mu.Unlock()
	return time.Since(fi.ModTime()), !mine
}

// standAsideErr is StandAside as an error (nil when memd may work), wrapped with what was
// about to happen.
func (r *Repo) standAsideErr(what string) error {
	if a := r.StandAside(); a.Reason != "" {
		return fmt.Errorf("%s in %s: %w", what, r.dir, &StandAsideError{Aside: a})
	}
	return nil
}

// passingWait bounds how long a job waits, where it starts, for a git command that is
// passing (Aside.Passing: git's own commands hold their locks for milliseconds) before it
// stands aside; a one-shot command then does not fail for a `git status` in a prompt.
const passingWait = 3 * time.Second

// standAsideWait is standAsideErr after waiting out a passing git (passingWait).
func (r *Repo) standAsideWait(what string) error {
	r.waitPassing(false)
	return r.standAsideErr(what)
}

// waitPassing waits, at most passingWait, while StandAside says a git is passing (only
// while one is running in the repo, processOnly: a held index.lock is the checkout's to
// meet, by its own lock protocol).
func (r *Repo) waitPassing(processOnly bool) {
	deadline := time.Now().Add(passingWait)
	for time.Now().Before(deadline) {
		a := r.StandAside()
		if !a.Passing || processOnly && a != gitRunningAside {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// gitRunningAside: a git process runs in the work tree (StandAside).
var gitRunningAside = Aside{Reason: "a git command is running in the repo", Brief: "git running", Passing: true}

// headAside checks that HEAD is the symbolic ref to memd's branch. A HEAD that cannot be
// read at all is git's problem to report: memd stands aside, naming it.
func (r *Repo) headAside() Aside {
	want := r.BranchRef().String()
	b, err := os.ReadFile(filepath.Join(r.gitDir, "HEAD"))
	if err != nil {
		return Aside{Reason: fmt.Sprintf("cannot read HEAD: %v", err), Brief: "HEAD unreadable"}
	}
	s := strings.TrimSpace(string(b))
	target, symbolic := strings.CutPrefix(s, "ref: ")
	switch {
	case symbolic && strings.TrimSpace(target) == want:
		return Aside{}
	case symbolic:
		name := strings.TrimPrefix(strings.TrimSpace(target), "refs/heads/")
		return Aside{Reason: fmt.Sprintf("HEAD is on %s, not %s", name, r.Branch()), Brief: "HEAD on " + name}
	}
	at := s
	if len(at) > 12 {
		at = at[:12]
	}
	return Aside{Reason: fmt.Sprintf("HEAD is detached at %s, not on %s", at, r.Branch()), Brief: "HEAD detached"}
}

// foreignIndexLock reports a live .git/index.lock that memd's own index refresher did not
// take. Live as git's own tools judge it (gitstore.ClearStaleLock): younger than
// indexLockMinAge, or a git process runs in the work tree. An older lock with no git
// running is a killed process's: the refresher clears it, and it holds nothing up.
func (r *Repo) foreignIndexLock() bool {
	fi, err := os.Lstat(filepath.Join(r.gitDir, "index.lock"))
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return false
	}
	if r.idx.installing.Load() || r.idx.checkoutLock.Load() {
		return false // memd's refresher holds it, for the rename only, or memd's checkout
	}
	if time.Since(fi.ModTime()) < indexLockMinAge {
		return true
	}
	live, canSee := gitstore.LiveGitProcess(r.dir)
	return live || (!canSee && time.Since(fi.ModTime()) < blindLockAge)
}

// blindLockAge: without /proc an index.lock this young is taken as live (gitstore's own
// blind rule for removing one is ten minutes; holding commits up that long for a lock left
// by a killed git would be worse than the rare overlap with a slow one).
const blindLockAge = time.Minute
