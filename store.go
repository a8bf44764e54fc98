package memd

import (
	"errors"
	"time"
)

// What a commit of the repo reports, shared by the package that commits (sync/gitrepo) and
// the ones that ask it to (sleep, the agent): spelled here so that a caller needs the
// vocabulary, not the go-git-heavy package, to name a commit's outcome.

// ErrHeadMoved is returned when the branch ref changed between the start of
// a commit and its ref update (compare-and-set failure). Nothing was lost:
// the caller retries and the retry builds on the new HEAD.
var ErrHeadMoved = errors.New("HEAD moved during commit")

// Change is one path changed by a commit. Op is 'A', 'M' or 'D'.
type Change struct {
	Path string
	Op   byte
}

// CommitResult says what a commit did. Hash "" means nothing changed and no
// commit was made.
type CommitResult struct {
	Hash                     string
	Added, Modified, Deleted int
	Changes                  []Change
	Kind                     CommitKind
	Duration                 time.Duration
	// Skipped lists paths that could not be read (e.g. permission
	// denied): left as they are in HEAD, for a later commit; the rest of
	// the batch is committed.
	Skipped []string
}

// A commit guard's answer (sync/gitrepo.Guard; internal/secrets implements one), spelled here so
// that the guard needs the vocabulary, not the package that commits.

// GuardVerdict is a commit guard's answer for one file.
type GuardVerdict struct {
	// Hold: nothing of this version is committed; HEAD keeps what it has at the path.
	Hold bool
	// Content, when not nil (and not Hold), is committed instead of the work tree's
	// version: the ledger without its held records. The work tree keeps its version.
	Content []byte
	// Findings say why (rule and line, never the secret); empty = nothing held.
	Findings []GuardFinding
}

// GuardFinding is one held line of a file: the rule that matched and the 1-based line (0: the
// rule matched the path).
type GuardFinding struct {
	Rule string
	Line int
}
