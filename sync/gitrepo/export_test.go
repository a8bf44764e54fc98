package gitrepo

// Lock and Unlock take the repo mutex, for tests that call *Locked helpers directly.
func (r *Repo) Lock()   { r.mu.Lock() }
func (r *Repo) Unlock() { r.mu.Unlock() }

// setCrashHooks arms r's crash-point hooks (merge.go); nil disarms them.
func (r *Repo) setCrashHooks(h *crashHooks) {
	r.hooks = h
	// The index refresher runs beside the owner: it reads its hook under idx.mu.
	r.idx.mu.Lock()
	r.idx.lockHeld = nil
	if h != nil {
		r.idx.lockHeld = h.indexLockHeld
	}
	r.idx.mu.Unlock()
}
