// Package statusline holds memd's status document (docs/ARCHITECTURE.md §6), composes it from plain facts,
// writes and reads it atomically in the state directory, and renders it for status-line
// readers (shells, tmux, bars, coding agents).
//
// It imports only the standard library on purpose: `memd status` reads this document on every
// prompt, so it must start fast and never pull in git or Prometheus.
package statusline

import (
	"errors"
	"time"
)

// Version is the status document format version written in `version`.
const Version = 1

// States of the document (docs/ARCHITECTURE.md §6).
const (
	StateOK       = "ok"
	StateBusy     = "busy"
	StateOffline  = "offline"
	StateConflict = "conflict"
	StateWarn     = "warn"
	StateError    = "error"
	// Added (docs/ARCHITECTURE.md §11): paused while memd stands aside (a branch other than sync.branch, a
	// git operation in progress, `memd pause`, a held mass deletion); stopped after a clean stop.
	StatePaused  = "paused"
	StateStopped = "stopped"
)

// Held reasons (Document.Held[].Reason).
const (
	HeldSecret = "secret"
	HeldSize   = "size"
	HeldHook   = "hook"   // the repo's pre-commit or commit-msg git hook refused it (Rule: the hook)
	HeldFilter = "filter" // its git filter driver failed or is missing (Rule: the driver)
	HeldCut    = "cut"    // empty or zero bytes after an unclean stop where HEAD's version is not: a power cut's doing
)

// Part kinds: the colour a reader draws a part in. "" is the reader's default colour.
const (
	KindNone  = ""
	KindOK    = "ok"
	KindWarn  = "warn"
	KindError = "error"
	KindDim   = "dim"
	KindInfo  = "info" // blue: news that needs nothing done (a sleep run's counts)
)

// Part is a run of a line in one colour.
type Part struct {
	Text string `json:"text"`
	Kind string `json:"kind,omitempty"`
}

// Line is one row of a sidebar section: Text always holds the whole line; Parts, when present,
// colour it piece by piece, else Kind colours all of it.
type Line struct {
	Text  string `json:"text"`
	Kind  string `json:"kind,omitempty"`
	Parts []Part `json:"parts,omitempty"`
}

// Section has the shared sidebar section shape (the seed's $.sidebar.set argument).
type Section struct {
	Consumer string `json:"consumer"`
	Key      string `json:"key"`
	Title    string `json:"title"`
	Until    string `json:"until"`
	Order    int    `json:"order"`
	Lines    []Line `json:"lines"`
}

// Summary is the one status line, whole and in parts.
type Summary struct {
	Text  string `json:"text"`
	Parts []Part `json:"parts"`
}

// CommitInfo describes the last commit memd made.
type CommitInfo struct {
	At       time.Time `json:"at"`
	Added    int       `json:"added"`
	Modified int       `json:"modified"`
	Deleted  int       `json:"deleted"`
}

// SleepInfo describes the last sleep run: when, and what each phase counted.
type SleepInfo struct {
	At     time.Time      `json:"at"`
	Counts map[string]int `json:"counts"`
}

// Document is status.json, version 1 (docs/ARCHITECTURE.md §6). Field order is the documented JSON order.
type Document struct {
	Version    int         `json:"version"`
	UpdatedAt  time.Time   `json:"updated_at"`
	PID        int         `json:"pid"`
	Repo       string      `json:"repo"`
	State      string      `json:"state"`
	Summary    Summary     `json:"summary"`
	Detail     string      `json:"detail"`
	Ahead      int         `json:"ahead"`
	Behind     int         `json:"behind"`
	Pending    int         `json:"pending"`
	Inbox      int         `json:"inbox"`
	Warnings   []string    `json:"warnings"`
	Error      string      `json:"error"`
	LastCommit *CommitInfo `json:"last_commit"`
	LastPush   *time.Time  `json:"last_push"`
	LastSleep  *SleepInfo  `json:"last_sleep"`
	Sections   []Section   `json:"sections"`

	// Added after version 1 shipped (additions only, docs/ARCHITECTURE.md §6): what the page at / and the
	// Claude Code mod show besides the line.
	TaskInbox      int            `json:"task_inbox"`
	Memories       map[string]int `json:"memories"`     // memory files per bucket
	Arcs           int            `json:"arcs"`         // arc files under areas/arcs/
	LedgerNotes    map[string]int `json:"ledger_notes"` // ledger notes by state: live, stale, expired
	ConflictCopies []string       `json:"conflict_copies"`
	// CommitsPerHour counts memd's commits (change, merge, sleep) per clock hour over the last
	// day, oldest first; the last entry is the hour updated_at falls in.
	CommitsPerHour []int `json:"commits_per_hour"`
	// Events are the last MaxEvents things that happened, oldest first, ids increasing across
	// restarts, so a reader shows each exactly once.
	Events []Event `json:"events"`

	// Added (docs/ARCHITECTURE.md §11).
	Paused    *Paused    `json:"paused"`    // null unless memd stands aside
	Held      []Held     `json:"held"`      // files (or ledger records) not committed
	Conflicts []Conflict `json:"conflicts"` // what `memd conflicts --json` prints

	// Added: Claude Code's memory kept in the repo (agents.claude_code.memory); absent when
	// off.
	ClaudeCode *ClaudeCode `json:"claude_code,omitempty"`
}

// ClaudeCode is the state of Claude Code's memory in the repo: the projects found on this
// machine, synced (Projects counts them) or not, each not synced with why.
type ClaudeCode struct {
	Projects int            `json:"projects"`
	Synced   []AgentProject `json:"synced"`
	Unsynced []AgentProject `json:"unsynced"`
}

// AgentProject is one project checkout: its id in the repo (agents/claude-code/<id>/), or
// why it has none; LastChange is when this machine last copied one of its memories, and
// LastMachine the machine that change was made on.
type AgentProject struct {
	Path        string     `json:"path"`
	ID          string     `json:"id,omitempty"`
	Reason      string     `json:"reason,omitempty"`
	LastChange  *time.Time `json:"last_change,omitempty"`
	LastMachine string     `json:"last_machine,omitempty"`
}

// Paused says why memd stands aside and until when ("" until: until resumed or the repo
// is back). CommitOnly: commits go on, sync does not.
type Paused struct {
	Reason     string `json:"reason"`
	Until      string `json:"until"`
	CommitOnly bool   `json:"commit_only"`
}

// Held is one file not committed: reason secret (with the gitleaks rule and line, never the
// secret) or size.
type Held struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Rule   string `json:"rule,omitempty"`
	Line   int    `json:"line,omitempty"`
	// Message is what the refusing git hook said last (its last stderr line, escaped).
	Message string `json:"message,omitempty"`
}

// Conflict is one conflict copy in the tree: the original path, the copy, the machine and
// time it came from, and both versions' blob ids.
type Conflict struct {
	Path    string    `json:"path"`
	Copy    string    `json:"copy"`
	Machine string    `json:"machine"`
	At      time.Time `json:"at"`
	Ours    string    `json:"ours"`
	Theirs  string    `json:"theirs"`
}

// Event is one thing that happened: a conflict copy made, a sleep run, offline and back, an
// error. Text is the whole line; Parts, when present, colour it piece by piece.
type Event struct {
	ID    uint64    `json:"id"`
	At    time.Time `json:"at"`
	Kind  string    `json:"kind"`
	Text  string    `json:"text"`
	Parts []Part    `json:"parts,omitempty"`
}

// MaxEvents bounds Document.Events; HoursKept is the length of Document.CommitsPerHour.
const (
	MaxEvents = 50
	HoursKept = 24
)

// Errors callers branch on.
var (
	// ErrNoDocument: the state directory holds no status.json (memd never ran there).
	ErrNoDocument = errors.New("no status document")
	// ErrBadDocument: status.json exists but cannot be read as a version 1 document.
	ErrBadDocument = errors.New("bad status document")
	// ErrUnknownFormat: Render was asked for a format not in Formats.
	ErrUnknownFormat = errors.New("unknown status format")
)

// StaleAfter is how old a document must be, with its pid gone, to read "not running".
const StaleAfter = 2 * time.Minute
