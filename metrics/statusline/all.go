package statusline

import (
	"sort"
	"strconv"
	"strings"
	"time"
)

// Named is one repo's document for `memd status --all`; Doc nil means memd never ran there.
type Named struct {
	Name string    `json:"name"`
	Repo string    `json:"repo"`
	Doc  *Document `json:"document"`
}

// AllMaxWidth bounds the --all line, as every line (MaxColumns); repos past it are folded
// into "+N more".
const AllMaxWidth = MaxColumns

// severity orders states worst first for the --all line: what needs a person comes first.
var severity = map[string]int{
	StateError: 0, StateConflict: 1, StateOffline: 2, StatePaused: 3, StateWarn: 4,
	StateStopped: 5, StateBusy: 6, StateOK: 7,
}

func rank(state string) int {
	if r, ok := severity[state]; ok {
		return r
	}
	return len(severity)
}

// All composes one document covering every repo: its state is the worst of theirs and its
// line names each repo with its own short state, worst first, e.g.
// `memd: memory ok · projects +2 · 14:32`. Each repo's document is taken as Effective says
// (stale → not running). The result is fresh (updated now), so Render shows it as it is.
func All(repos []Named, now time.Time, pidAlive func(int) bool) Document {
	type row struct {
		name  string
		eff   *Document
		parts []Part
	}
	rows := make([]row, 0, len(repos))
	for _, r := range repos {
		e := Effective(r.Doc, now, pidAlive)
		rows = append(rows, row{name: r.Name, eff: e, parts: headOf(e)})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rank(rows[i].eff.State) < rank(rows[j].eff.State) })

	d := Document{Version: Version, UpdatedAt: now.UTC().Truncate(time.Second), State: StateOK,
		Warnings: []string{}, Memories: map[string]int{}, LedgerNotes: map[string]int{},
		ConflictCopies: []string{}, CommitsPerHour: make([]int, HoursKept), Events: []Event{},
		Held: []Held{}, Conflicts: []Conflict{}}
	if len(rows) == 0 {
		d.State = StateOffline
		d.Summary = Summary{Text: "memd: no repos", Parts: []Part{{Text: "memd: no repos", Kind: KindDim}}}
		d.Detail = "memd has not run on any repo on this machine"
		d.Sections = []Section{{Consumer: "memd", Key: "repos", Title: "memory repos", Until: "session", Order: 20,
			Lines: []Line{{Text: "no repos", Kind: KindDim}}}}
		return d
	}
	d.State = rows[0].eff.State
	clock := Part{Text: " · " + now.Format("15:04"), Kind: KindDim}
	var lines []Line
	var detail []string
	chunks := make([][]Part, len(rows))
	// Each repo gets at most what fits beside "memd: ", the clock and a "+N more".
	budget := AllMaxWidth - len("memd: ") - len(" · 15:04")
	if len(rows) > 1 {
		budget -= len(" · +99 more")
	}
	for i, r := range rows {
		chunks[i] = fitParts(append([]Part{{Text: clean(r.name) + " "}}, r.parts...), budget)
		lines = append(lines, Line{Text: joinText(chunks[i]), Parts: chunks[i]})
		detail = append(detail, clean(r.name)+": "+clean(r.eff.Detail))
	}
	parts := []Part{{Text: "memd: "}}
	for i, c := range chunks {
		sep := []Part{}
		if i > 0 {
			sep = []Part{{Text: " · ", Kind: KindDim}}
		}
		next := append(append(append([]Part{}, parts...), sep...), c...)
		reserve := 0
		if i < len(chunks)-1 {
			reserve = len(" · +99 more") // room to fold what follows
		}
		if i > 0 && partsWidth(next)+partsWidth([]Part{clock})+reserve > AllMaxWidth {
			parts = append(parts, Part{Text: " · ", Kind: KindDim}, Part{Text: "+" + strconv.Itoa(len(chunks)-i) + " more", Kind: KindDim})
			break
		}
		parts = next
	}
	parts = append(parts, clock)
	d.Summary = Summary{Text: joinText(parts), Parts: parts}
	d.Detail = strings.Join(detail, "; ")
	d.Sections = []Section{{Consumer: "memd", Key: "repos", Title: "memory repos", Until: "session", Order: 20, Lines: lines}}
	return d
}

// headOf is a document's line without "memd: " and the clock: what its own line says
// ("+2 ~1", "offline, 2 ahead", "not running"), and "ok" in green for a repo that is fine
// with nothing new to say ("no change").
func headOf(e *Document) []Part {
	parts := append([]Part{}, e.Summary.Parts...)
	if len(parts) == 0 {
		parts = []Part{{Text: e.Summary.Text}}
	}
	if n := len(parts); n > 1 && parts[n-1].Kind == KindDim && strings.HasPrefix(parts[n-1].Text, " · ") {
		parts = parts[:n-1]
	}
	if t, ok := strings.CutPrefix(parts[0].Text, "memd: "); ok {
		parts[0].Text = t
		if t == "" {
			parts = parts[1:]
		}
	}
	for i := range parts {
		parts[i].Text = clean(parts[i].Text)
	}
	if e.State == StateOK && (len(parts) == 0 || joinText(parts) == "no change") {
		return []Part{{Text: "ok", Kind: KindOK}}
	}
	return parts
}
