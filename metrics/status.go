package metrics

import (
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

// The status document lives in the std-only statusline package so `memd status` starts fast;
// these aliases let the agent use one import.
type (
	Document    = statusline.Document
	Facts       = statusline.Facts
	Summary     = statusline.Summary
	Part        = statusline.Part
	Line        = statusline.Line
	Section     = statusline.Section
	CommitInfo  = statusline.CommitInfo
	SleepInfo   = statusline.SleepInfo
	StatusEvent = statusline.Event // one of Document.Events (Event is the hub's SSE event)
	Conflict    = statusline.Conflict
)

// Part kinds (colours) and the bounds of the document's events and commit hours.
const (
	KindOK    = statusline.KindOK
	KindWarn  = statusline.KindWarn
	KindError = statusline.KindError
	KindDim   = statusline.KindDim
	KindInfo  = statusline.KindInfo
	MaxEvents = statusline.MaxEvents
	HoursKept = statusline.HoursKept
)

// States of the status document.
const (
	StateOK       = statusline.StateOK
	StateBusy     = statusline.StateBusy
	StateOffline  = statusline.StateOffline
	StateConflict = statusline.StateConflict
	StateWarn     = statusline.StateWarn
	StateError    = statusline.StateError
)

// Compose builds the status document from the owner's facts (see statusline.Compose).
func Compose(f Facts) Document { return statusline.Compose(f) }

// Write publishes status.json and the status.<format> lines into the state directory.
func Write(stateDir string, d Document) error { return statusline.Write(stateDir, d) }

// Read loads status.json from the state directory.
func Read(stateDir string) (*Document, error) { return statusline.Read(stateDir) }

// Render draws a document in one reader's format.
func Render(d *Document, format string, now time.Time, pidAlive func(int) bool) (string, error) {
	return statusline.Render(d, format, now, pidAlive)
}

// standInDoc is what the page shows before the first publish.
func standInDoc() *Document {
	return statusline.Effective(nil, time.Time{}, nil)
}
