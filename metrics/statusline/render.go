package statusline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Formats lists what Render (and `memd status --format`) accepts, default first.
var Formats = []string{"plain", "ansi", "tmux", "polybar", "waybar", "i3blocks", "swiftbar", "claude", "json", "sidebar"}

// LineFormats are the formats written as status.<format> beside status.json, for readers that
// `cat` a file rather than start a process.
var LineFormats = []string{"plain", "ansi", "tmux", "polybar", "waybar", "i3blocks", "swiftbar", "claude"}

// Colours for readers that take a hex colour (polybar, i3blocks, SwiftBar).
var hexColour = map[string]string{
	KindOK:    "#50a14f",
	KindWarn:  "#d19a66",
	KindError: "#e45649",
	KindDim:   "#8a8a8a",
	KindInfo:  "#4078f2",
}

// stateKind is the colour of a whole state, for readers that colour a block, not parts.
func stateKind(state string) string {
	switch state {
	case StateOK:
		return KindOK
	case StateBusy:
		return KindDim
	case StateError:
		return KindError
	case StateWarn, StateOffline, StateConflict, StatePaused:
		return KindWarn
	}
	return KindDim
}

// IsFormat reports whether f is a known format.
func IsFormat(f string) bool {
	for _, x := range Formats {
		if x == f {
			return true
		}
	}
	return false
}

// Effective is the document a reader shows: d itself, or a stand-in when there is none
// ("memd: not started") or when it is older than StaleAfter and its pid is gone
// ("memd: not running"). pidAlive nil means the real process table.
func Effective(d *Document, now time.Time, pidAlive func(int) bool) *Document {
	if d == nil {
		return standIn(nil, "not started", "no status document yet: memd has not run in this repo")
	}
	if pidAlive == nil {
		pidAlive = PIDAlive
	}
	// A clean stop said so in its last document: "stopped" is more than "not running".
	if now.Sub(d.UpdatedAt) > StaleAfter && d.State != StateStopped && !pidAlive(d.PID) {
		return standIn(d, "not running", fmt.Sprintf("memd (pid %d) is not running; last status at %s", d.PID, d.UpdatedAt.UTC().Format(time.RFC3339)))
	}
	return d
}

// standIn keeps what the old document knew (repo, counts, last commit) but says memd is not
// there, all faint. Its state is offline: nothing is being committed or synced.
func standIn(old *Document, what, detail string) *Document {
	n := Document{Version: Version, State: StateOffline, Warnings: []string{},
		Memories: map[string]int{}, LedgerNotes: map[string]int{}, ConflictCopies: []string{},
		CommitsPerHour: make([]int, HoursKept), Events: []Event{}}
	if old != nil {
		n = *old
		n.Warnings = append([]string{}, old.Warnings...)
		n.State = StateOffline
	}
	n.Detail = detail
	n.Summary = Summary{Text: "memd: " + what, Parts: []Part{{Text: "memd: " + what, Kind: KindDim}}}
	n.Sections = []Section{{Consumer: "memd", Key: "sync", Title: "memory repo", Until: "session", Order: 20,
		Lines: []Line{{Text: what, Kind: KindDim}, {Text: detail, Kind: KindDim}}}}
	return &n
}

// Render draws the document in one reader's syntax. The result ends without a newline except
// where the protocol has several lines (i3blocks, swiftbar), which end in one; a nil document
// or a stale one renders as Effective says.
func Render(d *Document, format string, now time.Time, pidAlive func(int) bool) (string, error) {
	if !IsFormat(format) {
		return "", fmt.Errorf("%w %q (known: %s)", ErrUnknownFormat, format, strings.Join(Formats, ", "))
	}
	e := Effective(d, now, pidAlive)
	parts := append([]Part(nil), e.Summary.Parts...)
	if len(parts) == 0 { // a hand-written document with only text
		parts = []Part{{Text: e.Summary.Text}}
	}
	// Compose fits the line already; a document written by hand is cut here, so no format
	// draws past MaxColumns.
	for i := range parts {
		parts[i].Text = clean(parts[i].Text)
	}
	parts = fitParts(parts, MaxColumns)
	line := truncate(clean(e.Summary.Text), MaxColumns)
	switch format {
	case "plain":
		return line, nil
	case "ansi", "claude":
		return ansi(parts), nil
	case "tmux":
		return tmux(parts), nil
	case "polybar":
		return polybar(parts), nil
	case "waybar":
		return waybar(e)
	case "i3blocks":
		full := line
		return full + "\n" + shortText(full) + "\n" + hexColour[stateKind(e.State)] + "\n", nil
	case "swiftbar":
		return swiftbar(e), nil
	case "json":
		b, err := json.Marshal(e)
		return string(b), err
	case "sidebar":
		b, err := json.Marshal(e.Sections)
		return string(b), err
	}
	return "", fmt.Errorf("%w %q", ErrUnknownFormat, format)
}

// shortText is the line without the clock and the "memd: " front, for narrow bars.
func shortText(full string) string {
	if i := strings.LastIndex(full, " · "); i > 0 {
		full = full[:i]
	}
	return "memd " + strings.TrimPrefix(full, "memd: ")
}

var sgr = map[string]string{KindOK: "\x1b[32m", KindWarn: "\x1b[33m", KindError: "\x1b[31m", KindDim: "\x1b[2m", KindInfo: "\x1b[34m"}

func ansi(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		t := clean(p.Text)
		if c, ok := sgr[p.Kind]; ok {
			b.WriteString(c + t + "\x1b[0m")
		} else {
			b.WriteString(t)
		}
	}
	return b.String()
}

var tmuxStyle = map[string]string{KindOK: "#[fg=green]", KindWarn: "#[fg=yellow]", KindError: "#[fg=red]", KindDim: "#[dim]", KindInfo: "#[fg=blue]"}

func tmux(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		t := strings.ReplaceAll(clean(p.Text), "#", "##") // tmux reads # as a format start
		if s, ok := tmuxStyle[p.Kind]; ok {
			b.WriteString(s + t + "#[default]")
		} else {
			b.WriteString(t)
		}
	}
	return b.String()
}

func polybar(parts []Part) string {
	var b strings.Builder
	for _, p := range parts {
		t := strings.ReplaceAll(clean(p.Text), "%{", "% {") // never let text open a polybar tag
		if c, ok := hexColour[p.Kind]; ok {
			b.WriteString("%{F" + c + "}" + t + "%{F-}")
		} else {
			b.WriteString(t)
		}
	}
	return b.String()
}

// waybar: a custom module with return-type json. Text and tooltip are Pango markup (waybar's
// default), so they are escaped; the colour comes from CSS on class (= state).
func waybar(e *Document) (string, error) {
	tip := []string{clean(e.Detail)}
	for _, w := range e.Warnings {
		tip = append(tip, clean(w))
	}
	if e.Error != "" && e.State != StateError {
		tip = append(tip, "error: "+clean(e.Error))
	}
	v := struct {
		Text    string `json:"text"`
		Tooltip string `json:"tooltip"`
		Class   string `json:"class"`
		Alt     string `json:"alt"`
	}{pangoEscape(truncate(clean(e.Summary.Text), MaxColumns)), pangoEscape(strings.Join(nonEmpty(tip), "\n")), e.State, e.State}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// swiftbar: the menu-bar line, then `---`, then the dropdown. A " | " in text would start
// SwiftBar parameters, so bars are swapped for a look-alike.
func swiftbar(e *Document) string {
	esc := func(s string) string { return strings.ReplaceAll(clean(s), "|", "¦") }
	var b strings.Builder
	b.WriteString(esc(truncate(clean(e.Summary.Text), MaxColumns)))
	if k := stateKind(e.State); e.State != StateOK {
		b.WriteString(" | color=" + hexColour[k])
	}
	b.WriteString("\n---\n")
	if e.Detail != "" {
		b.WriteString(esc(e.Detail) + "\n")
	}
	if e.Error != "" {
		b.WriteString("error: " + esc(e.Error) + " | color=" + hexColour[KindError] + "\n")
	}
	for _, w := range e.Warnings {
		b.WriteString(esc(w) + " | color=" + hexColour[KindWarn] + "\n")
	}
	if e.Repo != "" {
		fmt.Fprintf(&b, "ahead %d · behind %d · pending %d · inbox %d\n", e.Ahead, e.Behind, e.Pending, e.Inbox)
		b.WriteString("repo: " + esc(e.Repo) + "\n")
	}
	return b.String()
}

func nonEmpty(s []string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

// pangoEscape escapes text for Pango markup exactly as html.EscapeString does; the html
// package is not imported so `memd status` initialises as little as it can.
var pangoEscape = strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace
