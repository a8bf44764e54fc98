package memd

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/memd-dev/memd/internal/gitlayout"
)

// The names memd's packages share, defined once: a label, a default file name or a phase is
// spelled here and nowhere else. Special folders are in paths.go, note states beside JudgeNote
// in format/ledger. Phases, lifecycle modes and buckets are types of their own: a config key, a
// flag or a ledger line reaches them as a string: a phase is converted once at that edge with
// ParsePhase; a ledger keeps any mode it carries (LifecycleMode.Known); a path's bucket is
// BucketOf's.

// Default repo-relative files (docs/FORMATS.md §4, §5); config may name others.
const (
	DefaultLedgerFile = "memory.jsonl" // expire.ledger
	DefaultLockFile   = ".memory.lock" // lock.file: the writer lock, never committed
	MemoryMDName      = "MEMORY.md"    // an index or project MEMORY.md, in any directory (§3)
)

// ClaudeCodeDir is the repo folder holding Claude Code's auto memory, one folder per project
// id (agents/claudecode); its MEMORY.md files merge by line (sync/treemerge).
const ClaudeCodeDir = "agents/claude-code"

// StateDirName is memd's directory inside the repo's git dir (.git/memd): state that is never
// committed (sleep journal and state, merge marker, status document). StateDir joins it.
const StateDirName = "memd"

// StateDir is repo's state directory, <repo>/.git/memd (Config.StateDir for a loaded config):
// memd inside the git dir as git resolves it (internal/gitlayout), the per-worktree one, so a
// submodule's, a linked worktree's or a --separate-git-dir repo's memd has its own.
func StateDir(repo string) string { return filepath.Join(gitlayout.GitDir(repo), StateDirName) }

// Phase is a sleep phase (docs/ARCHITECTURE.md §5): the sleep.phases entries, `memd sleep
// --phase`, the phase label of memd_sleep_* and the Memd-Phase trailer.
type Phase string

// Sleep phases, in the order they always run: SleepPhases.
const (
	PhaseExpire  Phase = "expire"
	PhaseArcs    Phase = "arcs"
	PhaseArchive Phase = "archive"
	PhaseTidy    Phase = "tidy"
)

// SleepPhases lists the sleep phases in the order they always run.
var SleepPhases = []Phase{PhaseExpire, PhaseArcs, PhaseArchive, PhaseTidy}

// LifecycleMode is a ledger note's lifecycle.mode (docs/FORMATS.md §4), and the mode label of
// memd_ledger_notes. A ledger line keeps whatever mode it was written with: an unknown one is
// carried, never judged (its note stays live).
type LifecycleMode string

// Lifecycle modes: LifecycleModes lists them.
const (
	ModePersistent LifecycleMode = "persistent"
	ModeReadCount  LifecycleMode = "read-count"
	ModeHardExpiry LifecycleMode = "hard-expiry"
	ModeSoftExpiry LifecycleMode = "soft-expiry"
)

// LifecycleModes are the lifecycle modes in label order.
var LifecycleModes = []LifecycleMode{ModePersistent, ModeReadCount, ModeHardExpiry, ModeSoftExpiry}

// Bucket is one of the four PARA buckets, a top-level folder of the repo (docs/FORMATS.md §1).
// PARA is fixed at four: special folders live inside them.
type Bucket string

// The four PARA buckets: Buckets lists them.
const (
	BucketProjects  Bucket = "projects"
	BucketAreas     Bucket = "areas"
	BucketResources Bucket = "resources"
	BucketArchive   Bucket = "archive"
)

// Buckets lists the four PARA buckets in their canonical order.
var Buckets = []Bucket{BucketProjects, BucketAreas, BucketResources, BucketArchive}

// Sentinels of the parse functions, for callers that branch on the kind of bad name.
var (
	ErrUnknownPhase = errors.New("unknown sleep phase")
)

// ParsePhase returns the phase named s. Names are case-sensitive, as config and the trailer
// spell them; the error names s and lists the phases.
func ParsePhase(s string) (Phase, error) { return parseName(s, SleepPhases, ErrUnknownPhase, "phases") }

// Known reports whether m is one of LifecycleModes (a ledger may carry any string).
func (m LifecycleMode) Known() bool {
	_, ok := lookupName(string(m), LifecycleModes)
	return ok
}

// lookupName is the one match of a name against its closed set: exact bytes, no
// allocation (BucketOf runs it on every path a walk sees).
func lookupName[T ~string](s string, known []T) (T, bool) {
	for _, k := range known {
		if string(k) == s {
			return k, true
		}
	}
	return "", false
}

func parseName[T ~string](s string, known []T, sentinel error, plural string) (T, error) {
	if k, ok := lookupName(s, known); ok {
		return k, nil
	}
	return "", fmt.Errorf("%w %q (%s: %s)", sentinel, s, plural, JoinNames(known, ", "))
}

// JoinNames joins typed names with sep, for messages and flag help.
func JoinNames[T ~string](names []T, sep string) string {
	ss := make([]string, len(names))
	for i, n := range names {
		ss[i] = string(n)
	}
	return strings.Join(ss, sep)
}

// Names returns typed names as strings: metric label lists, JSON keys.
func Names[T ~string](names []T) []string {
	ss := make([]string, len(names))
	for i, n := range names {
		ss[i] = string(n)
	}
	return ss
}

// CommitKind is what made a commit: the kind label of memd_commits_total
// (docs/ARCHITECTURE.md §6).
type CommitKind string

// Commit kinds: CommitKinds lists them.
const (
	CommitChange CommitKind = "change"
	CommitSleep  CommitKind = "sleep"
	CommitMerge  CommitKind = "merge"
)

// CommitKinds are the commit kinds in label order.
var CommitKinds = []CommitKind{CommitChange, CommitSleep, CommitMerge}

// Memory types with rules of their own, the lifecycle statuses and the task status memd acts
// on (docs/FORMATS.md §2): MemoryTypes and TaskStatuses list them all.
const (
	TypeArc  = "arc"
	TypeTask = "task"

	StatusActive   = "active"
	StatusArchived = "archived"

	TaskDone = "done"
)

// Ledger record types (docs/FORMATS.md §4). Only notes have a lifecycle that drains.
const (
	RecordRule   = "rule"
	RecordLesson = "lesson"
	RecordNote   = "note"
)
