package sleep

// Report.Counts keys (status last_sleep and the agent's metrics read them).
const (
	CountArcs     = "arcs"     // arcs written (created or updated)
	CountArchived = "archived" // memories moved under archive/: also the expire and archive phases' own count
	CountExpired  = "expired"  // ledger notes drained
	CountStale    = "stale"    // ledger notes soft-expired, in their grace
	CountLinks    = "links"    // links and index bullets repointed
	CountRepaired = "repaired" // MEMORY.md files put back in the template
)

// CountsText renders a phase's nonzero counts as k=v in key order, joined by sep: the form of
// the commit trailer and the log (sep ","), and of `memd sleep`'s report (sep " ").
func CountsText(counts map[string]int, sep string) string { return countsString(counts, sep) }
