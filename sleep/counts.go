package sleep

// CountsText renders a phase's nonzero counts as k=v in key order, joined by sep: the form of
// the commit trailer and the log (sep ","), and of `memd sleep`'s report (sep " ").
func CountsText(counts map[string]int, sep string) string { return countsString(counts, sep) }
