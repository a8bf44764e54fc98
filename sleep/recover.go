package sleep

// Recover undoes a phase that a killed sleep left half applied in the tree (or only drops the
// journal when that phase was committed after all). The agent calls it at start, before its
// reconcile, which would otherwise commit the half-applied tree as if a writer had made it.
func (r *Runner) Recover() error {
	return r.recoverJournal("", nil)
}
