package sync

// Lock and Unlock take the repo mutex, for tests that call *Locked helpers directly.
func (r *Repo) Lock()   { r.mu.Lock() }
func (r *Repo) Unlock() { r.mu.Unlock() }

// setCrashHooks arms r's crash-point hooks (merge.go); nil disarms them.
func (r *Repo) setCrashHooks(h *crashHooks) { r.hooks = h }
