package statusline

import (
	"fmt"
	"sort"
	"strings"
)

// The sidebar's sections besides `sync`, one per concern, each present only when it has
// something to say (a reader clears a key memd no longer prints). Orders follow sync's 20.
const (
	KeyConflicts = "conflicts"
	KeySleep     = "sleep"
	KeyNotes     = "notes"
	KeyHeld      = "held"
)

// maxSectionLines bounds a list section: the rest is one "… and N more" line.
const maxSectionLines = 10

// syncNumbers is the sync section's count line, "2 ahead · 1 behind · 3 pending", or "" when
// all are zero.
func syncNumbers(d Document) string {
	var w []string
	if d.Ahead > 0 {
		w = append(w, fmt.Sprintf("%d ahead", d.Ahead))
	}
	if d.Behind > 0 {
		w = append(w, fmt.Sprintf("%d behind", d.Behind))
	}
	if d.Pending > 0 {
		w = append(w, fmt.Sprintf("%d pending", d.Pending))
	}
	return strings.Join(w, " · ")
}

func concernSections(f Facts, d Document) []Section {
	var out []Section
	add := func(key, title string, order int, lines []Line) {
		if len(lines) > 0 {
			out = append(out, Section{Consumer: "memd", Key: key, Title: title, Until: "session", Order: order, Lines: lines})
		}
	}
	add(KeyConflicts, "conflicts", 21, conflictLines(d))
	if s := d.LastSleep; s != nil {
		add(KeySleep, "last sleep", 22, []Line{{Text: sleepText(f, s), Kind: KindInfo}})
	}
	add(KeyNotes, "ledger notes", 23, noteLines(d.LedgerNotes))
	add(KeyHeld, "held back, not committed", 24, heldLines(d.Held))
	return out
}

// conflictLines: one line per copy, the original then the copy and where it came from.
func conflictLines(d Document) []Line {
	var lines []Line
	if len(d.Conflicts) > 0 {
		for _, c := range d.Conflicts {
			t := clean(c.Path) + " ← " + clean(c.Copy)
			if c.Machine != "" {
				t += " (from " + clean(c.Machine) + ")"
			}
			lines = append(lines, Line{Text: t, Kind: KindWarn})
		}
	} else {
		for _, cp := range d.ConflictCopies {
			lines = append(lines, Line{Text: clean(cp), Kind: KindWarn})
		}
	}
	return capLines(lines)
}

// sleepText is the last sleep's clock in the daemon's zone (the user's own) and its counts.
func sleepText(f Facts, s *SleepInfo) string {
	keys := make([]string, 0, len(s.Counts))
	for k, v := range s.Counts {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var w []string
	for _, k := range keys {
		w = append(w, fmt.Sprintf("%s %d", clean(k), s.Counts[k]))
	}
	what := strings.Join(w, ", ")
	if what == "" {
		what = "nothing to do"
	}
	at := s.At.In(f.Now.Location())
	when := at.Format("15:04")
	if y, m, dd := at.Date(); y != f.Now.Year() || m != f.Now.Month() || dd != f.Now.Day() {
		when = at.Format("Jan 2 15:04")
	}
	return when + ": " + what
}

// noteLines says something only when notes need a look: stale or expired ones.
func noteLines(n map[string]int) []Line {
	if n["stale"] == 0 && n["expired"] == 0 {
		return nil
	}
	return []Line{{Text: fmt.Sprintf("%d live · %d stale · %d expired", n["live"], n["stale"], n["expired"]), Kind: KindWarn}}
}

func heldLines(held []Held) []Line {
	var lines []Line
	for _, h := range held {
		why := clean(h.Reason)
		switch h.Reason {
		case HeldSecret:
			why = "looks like a secret"
			if h.Rule != "" {
				why += " (" + clean(h.Rule)
				if h.Line > 0 {
					why += fmt.Sprintf(", line %d", h.Line)
				}
				why += ")"
			}
		case HeldSize:
			why = "over sync.max_file_size"
		case HeldHook:
			why = "refused by git hook " + clean(h.Rule)
			if h.Message != "" {
				why += ": " + clean(h.Message)
			}
		case HeldFilter:
			why = "git filter " + clean(h.Rule) + " failed or is not set up here"
		case HeldCut:
			why = "emptied by a power cut (git checkout -- it brings it back)"
		}
		lines = append(lines, Line{Text: clean(h.Path) + ": " + why, Kind: KindWarn})
	}
	return capLines(lines)
}

func capLines(lines []Line) []Line {
	if len(lines) > maxSectionLines {
		n := len(lines) - maxSectionLines + 1
		lines = append(lines[:maxSectionLines-1], Line{Text: fmt.Sprintf("… and %d more", n), Kind: KindDim})
	}
	return lines
}
