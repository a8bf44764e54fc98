package statusline

import (
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd/internal/textsafe"
)

// Health thresholds (docs/FORMATS.md §1, §3B): above these the status warns.
const (
	InboxWarnAbove     = 20
	TaskInboxWarnAbove = 10
)

// Facts is what the owner knows after a job, as plain values; Compose turns them into a
// Document so the wording lives in one place.
type Facts struct {
	Now  time.Time // publish time; the clock on the line is Now in Now's location
	PID  int
	Repo string

	// Busy is true while a job runs; Activity names it ("committing", "syncing", "sleeping")
	// for the line, while Detail keeps saying what the last job did (the seed's sidebar: the
	// state, then the last event). A non-empty Activity alone also means busy.
	Busy     bool
	Activity string
	// Detail is what is happening or what the last job did, e.g. "committed 3 files".
	Detail string
	// Remote names where pushes go ("origin/main"), for the detail line.
	Remote string
	// Offline is true while the remote cannot be reached; SyncError says why (redacted).
	Offline   bool
	SyncError string
	// Error is the last job's failure ("" when it succeeded).
	Error string

	Ahead, Behind, Pending int
	Inbox, TaskInbox       int
	Invalid                int      // memory files that break the format
	Duplicates             int      // articles two or more active memories share (memhtml's index refuses them)
	Conflicts              int      // conflict copies the last merge kept beside the originals
	OverCapMD              []string // MEMORY.md files over their caps (repo-relative paths)
	UntemplatedMD          []string // project MEMORY.md files out of the four-section template
	Degraded               string   // the watcher's own warning (watches exhausted: scanning)
	Extra                  []string // any further warnings, verbatim

	LastCommit *CommitInfo
	LastPush   *time.Time
	LastSleep  *SleepInfo

	// For the page and the mod (copied as they are; nil maps and slices become empty ones).
	Memories       map[string]int
	Arcs           int
	LedgerNotes    map[string]int
	ConflictCopies []string
	CommitsPerHour []int
	Events         []Event

	// Added (docs/ARCHITECTURE.md §11): copied into the document as they are.
	Paused       *Paused
	Held         []Held
	ConflictList []Conflict
	// PauseBrief is the pause's reason in a few words for the line ("HEAD on
	// sleep/2026-12-01"): `memd: paused (HEAD on sleep/2026-12-01) · 14:32`. "" with
	// Paused set: `memd: paused · 14:32`.
	PauseBrief string
	// Stopped: memd stopped cleanly (the last document it writes): `memd: stopped · 14:32`.
	Stopped bool
	// ClaudeCode is copied into the document as it is (nil: agents.claude_code.memory off).
	ClaudeCode *ClaudeCode
}

// Compose builds the document: state, summary in coloured parts, detail, warnings and the
// sidebar section. The wording follows the memory-save mod: `memd: +2 ~1 · 14:32`, warnings
// yellow after the change, `error:` red then the message in the default colour, busy and
// "no change" faint, the clock faint.
func Compose(f Facts) Document {
	d := documentOf(f)
	var short []string
	d.Warnings, short = warnings(f)
	d.State = stateOf(f, d)
	clock := Part{Text: " · " + f.Now.Format("15:04"), Kind: KindDim}
	front := Part{Text: "memd: "}
	head := headParts(f, d, short, MaxColumns-Width(front.Text)-Width(clock.Text))
	parts := append(append([]Part{front}, head...), clock)
	d.Summary = Summary{Text: joinText(parts), Parts: parts}
	// Paused and stopped say why in the detail, whatever the last job did.
	if d.Detail == "" || d.State == StatePaused || d.State == StateStopped {
		d.Detail = defaultDetail(f, d)
	}
	d.Sections = append([]Section{sidebar(d, parts[1:])}, concernSections(f, d)...)
	return d
}

// documentOf is the document's copy of the facts: cleaned, times in UTC, maps and slices
// copied (never nil).
func documentOf(f Facts) Document {
	d := Document{
		Version:   Version,
		UpdatedAt: f.Now.UTC().Truncate(time.Second),
		PID:       f.PID,
		Repo:      f.Repo,
		Detail:    clean(f.Detail),
		Ahead:     f.Ahead,
		Behind:    f.Behind,
		Pending:   f.Pending,
		Inbox:     f.Inbox,
		Error:     clean(f.Error),

		TaskInbox:      f.TaskInbox,
		Memories:       copyCounts(f.Memories),
		Arcs:           f.Arcs,
		LedgerNotes:    copyCounts(f.LedgerNotes),
		ConflictCopies: append([]string{}, f.ConflictCopies...),
		CommitsPerHour: hours(f.CommitsPerHour),
		Events:         lastEvents(f.Events),

		Held:      append([]Held{}, f.Held...),
		Conflicts: append([]Conflict{}, f.ConflictList...),

		ClaudeCode: f.ClaudeCode,
	}
	if f.Paused != nil {
		p := *f.Paused
		d.Paused = &p
	}
	if f.LastCommit != nil {
		c := *f.LastCommit
		c.At = c.At.UTC()
		d.LastCommit = &c
	}
	if f.LastPush != nil {
		p := f.LastPush.UTC()
		d.LastPush = &p
	}
	if f.LastSleep != nil {
		d.LastSleep = &SleepInfo{At: f.LastSleep.At.UTC(), Counts: copyCounts(f.LastSleep.Counts)}
	}
	return d
}

// warnings are what needs a look: the long form for the document, the short form for the
// line.
func warnings(f Facts) (long, short []string) {
	long = []string{}
	warn := func(l, brief string) {
		long = append(long, l)
		short = append(short, brief)
	}
	if n := f.Conflicts; n > 0 {
		warn(fmt.Sprintf("%d conflict %s kept beside the originals", n, plural(n, "copy", "copies")),
			fmt.Sprintf("%d %s", n, plural(n, "conflict", "conflicts")))
	}
	if l, s, ok := heldWarning(f.Held); ok {
		warn(l, s) // held.go: files not committed, with why (never a secret)
	}
	if f.Inbox > InboxWarnAbove {
		warn(fmt.Sprintf("inbox %d (over %d)", f.Inbox, InboxWarnAbove), fmt.Sprintf("inbox %d", f.Inbox))
	}
	if f.TaskInbox > TaskInboxWarnAbove {
		warn(fmt.Sprintf("task inbox %d (over %d)", f.TaskInbox, TaskInboxWarnAbove), fmt.Sprintf("tasks %d", f.TaskInbox))
	}
	if f.Invalid > 0 {
		warn(fmt.Sprintf("%d invalid %s (memd doctor names them)", f.Invalid, plural(f.Invalid, "memory", "memories")), fmt.Sprintf("%d invalid", f.Invalid))
	}
	if n := f.Duplicates; n > 0 {
		warn(fmt.Sprintf("%d duplicate %s: memhtml index update fails (memd doctor names them)", n, plural(n, "article", "articles")),
			fmt.Sprintf("%d %s", n, plural(n, "duplicate", "duplicates")))
	}
	if n := len(f.OverCapMD); n > 0 {
		warn(fmt.Sprintf("%d MEMORY.md over the soft cap: %s", n, strings.Join(firstN(f.OverCapMD, 3), ", ")+more(n, 3)),
			fmt.Sprintf("%d MEMORY.md over cap", n))
	}
	if n := len(f.UntemplatedMD); n > 0 {
		warn(fmt.Sprintf("%d MEMORY.md out of the four-section template (tidy repairs it): %s", n, strings.Join(firstN(f.UntemplatedMD, 3), ", ")+more(n, 3)),
			fmt.Sprintf("%d MEMORY.md out of template", n))
	}
	if f.Degraded != "" {
		warn(clean(f.Degraded), "degraded")
	}
	for _, x := range f.Extra {
		warn(clean(x), clean(x))
	}
	return long, short
}

// stateOf is what is happening now first, then what went wrong, then what needs a look.
func stateOf(f Facts, d Document) string {
	switch {
	case f.Stopped:
		return StateStopped
	case f.Busy || f.Activity != "":
		return StateBusy
	case f.Paused != nil:
		// Before error and conflict: while memd stands aside nothing it reports moves,
		// and why it stands aside is what the user must act on.
		return StatePaused
	case d.Error != "":
		return StateError
	case f.Conflicts > 0:
		return StateConflict
	case f.Offline:
		return StateOffline
	case len(d.Warnings) > 0:
		return StateWarn
	}
	return StateOK
}

// headParts is the line after "memd: " and before the clock, for d's state, fitted to
// budget columns (line.fit: state first, then counts, then warnings as `+N warnings`).
func headParts(f Facts, d Document, short []string, budget int) []Part {
	var l line
	switch d.State {
	case StateBusy:
		what := clean(f.Activity)
		if what == "" {
			what = d.Detail
		}
		l.state = []Part{{Text: busyText(what), Kind: KindDim}}
	case StateError:
		// The message is cut, never the "error:" that says what the line is.
		l.state = []Part{{Text: "error:", Kind: KindError}, {Text: " " + truncate(d.Error, budget-len("error: "))}}
	case StateStopped:
		l.state = []Part{{Text: "stopped", Kind: KindDim}}
	case StatePaused:
		// Short on the line (`paused (HEAD on other)`); the whole reason is the detail.
		what := "paused"
		if b := clean(f.PauseBrief); b != "" {
			what += " (" + b + ")"
		}
		l.state = []Part{{Text: truncate(what, budget), Kind: KindWarn}}
	case StateOffline:
		l.state = changeParts(d.LastCommit)
		l.afterChange = d.LastCommit != nil
		l.counts = []Part{{Text: offlineText(f.Ahead), Kind: KindWarn}}
	default:
		l.state = changeParts(d.LastCommit)
		l.afterChange = d.LastCommit != nil
		if f.Behind > 0 {
			l.counts = append(l.counts, Part{Text: fmt.Sprintf("↓%d", f.Behind), Kind: KindWarn})
		}
		if f.Pending > 0 {
			l.counts = append(l.counts, Part{Text: fmt.Sprintf("%d pending", f.Pending), Kind: KindDim})
		}
		if f.Offline && d.State == StateConflict {
			// A conflict outranks offline, but the line still says it: `1 conflict, offline, 2 ahead`.
			short = append(short, offlineText(f.Ahead))
		} else if d.State == StateConflict && f.Ahead > 0 {
			short = append(short, fmt.Sprintf("%d ahead", f.Ahead))
		}
		l.warnings = short
	}
	return l.fit(budget)
}

// sidebar is the mod's section: the state line without the "memd: " front (the title says
// whose it is), then the detail faint, then each warning yellow.
func sidebar(d Document, state []Part) Section {
	lines := []Line{{Text: joinText(state), Parts: state}}
	if d.Detail != "" {
		lines = append(lines, Line{Text: d.Detail, Kind: KindDim})
	}
	if n := syncNumbers(d); n != "" {
		lines = append(lines, Line{Text: n, Kind: KindDim})
	}
	for _, w := range d.Warnings {
		lines = append(lines, Line{Text: w, Kind: KindWarn})
	}
	return Section{Consumer: "memd", Key: "sync", Title: "memory repo", Until: "session", Order: 20, Lines: lines}
}

// changeParts is the last commit as `+A ~M -D` in green, or a faint "no change".
func changeParts(c *CommitInfo) []Part {
	if c == nil {
		return []Part{{Text: "no change", Kind: KindDim}}
	}
	var w []string
	for _, x := range []struct {
		sign string
		n    int
	}{{"+", c.Added}, {"~", c.Modified}, {"-", c.Deleted}} {
		if x.n > 0 {
			w = append(w, fmt.Sprintf("%s%d", x.sign, x.n))
		}
	}
	if len(w) == 0 {
		return []Part{{Text: "committed", Kind: KindOK}}
	}
	return []Part{{Text: strings.Join(w, " "), Kind: KindOK}}
}

// busyText is the running job, faint with an ellipsis like the seed's "saving…".
func busyText(detail string) string {
	if detail == "" {
		detail = "working"
	}
	return strings.TrimSuffix(detail, "…") + "…"
}

func offlineText(ahead int) string {
	if ahead > 0 {
		return fmt.Sprintf("offline, %d ahead", ahead)
	}
	return "offline"
}

func defaultDetail(f Facts, d Document) string {
	switch d.State {
	case StateBusy:
		if f.Activity != "" {
			return clean(f.Activity)
		}
		return "working"
	case StateError:
		return "last job failed: " + d.Error
	case StateStopped:
		return "memd stopped at " + f.Now.Format("15:04")
	case StatePaused:
		return clean(f.Paused.Reason)
	case StateOffline, StateConflict:
		if d.State == StateConflict && !f.Offline {
			break
		}
		if f.SyncError != "" {
			return fmt.Sprintf("remote unreachable (%s); %d %s kept locally", clean(f.SyncError), f.Ahead, plural(f.Ahead, "commit", "commits"))
		}
		return fmt.Sprintf("remote unreachable; %d %s kept locally", f.Ahead, plural(f.Ahead, "commit", "commits"))
	}
	if d.LastCommit == nil {
		return "nothing committed yet"
	}
	n := d.LastCommit.Added + d.LastCommit.Modified + d.LastCommit.Deleted
	s := fmt.Sprintf("committed %d %s", n, plural(n, "file", "files"))
	if f.Ahead == 0 && f.LastPush != nil {
		s += ", pushed"
		if f.Remote != "" {
			s += " to " + clean(f.Remote)
		}
	} else if f.Ahead > 0 {
		s += fmt.Sprintf(", %d ahead", f.Ahead)
	}
	return s
}

func joinText(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func firstN(s []string, n int) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	if len(c) > n {
		c = c[:n]
	}
	for i := range c {
		c[i] = clean(c[i])
	}
	return c
}

func more(total, shown int) string {
	if total > shown {
		return fmt.Sprintf(" and %d more", total-shown)
	}
	return ""
}

// clean is the one sanitiser (internal/textsafe): controls and bidi marks become visible
// escapes, so a name a remote chose cannot drive the terminal a status line lands in.
func clean(s string) string { return textsafe.Escape(s) }

// copyCounts is maps.Clone, but never nil: the document's maps are {} when empty.
func copyCounts(m map[string]int) map[string]int {
	c := make(map[string]int, len(m))
	maps.Copy(c, m)
	return c
}

// hours is h as exactly HoursKept entries: the newest kept, zeros in front.
func hours(h []int) []int {
	out := make([]int, HoursKept)
	if len(h) > HoursKept {
		h = h[len(h)-HoursKept:]
	}
	copy(out[HoursKept-len(h):], h)
	return out
}

// lastEvents is the newest MaxEvents of evs, copied, each made safe for one-line readers.
func lastEvents(evs []Event) []Event {
	if len(evs) > MaxEvents {
		evs = evs[len(evs)-MaxEvents:]
	}
	out := make([]Event, len(evs))
	for i, e := range evs {
		e.At = e.At.UTC()
		e.Text = clean(e.Text)
		if len(e.Parts) > 0 {
			ps := make([]Part, len(e.Parts))
			for j, p := range e.Parts {
				ps[j] = Part{Text: clean(p.Text), Kind: p.Kind}
			}
			e.Parts = ps
		}
		out[i] = e
	}
	return out
}
