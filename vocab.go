package memd

import "github.com/memd-dev/memd/internal/statedir"

// The names memd's packages share, defined once: a label, a default file name or a phase is
// spelled here and nowhere else. Buckets and special folders are in paths.go, lifecycle
// modes and note states beside JudgeNote in ledger.go.

// Default repo-relative files (docs/FORMATS.md §4, §5); config may name others.
const (
	DefaultLedgerFile = "memory.jsonl" // expire.ledger
	DefaultLockFile   = ".memory.lock" // lock.file: the writer lock, never committed
	MemoryMDName      = "MEMORY.md"    // an index or project MEMORY.md, in any directory (§3)
)

// StateDirName is memd's directory inside the repo's git dir (.git/memd): state that is never
// committed (sleep journal and state, merge marker, status document). Config.StateDir joins it.
const StateDirName = statedir.Name

// Sleep phases (docs/ARCHITECTURE.md §5), in the order they always run: SleepPhases.
const (
	PhaseExpire  = "expire"
	PhaseArcs    = "arcs"
	PhaseArchive = "archive"
	PhaseTidy    = "tidy"
)

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
