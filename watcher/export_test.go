package watcher

// Hooks for the tests in package watcher_test.

// TickCount is how many debounce timer ticks Run has handled. A batch that a tick made
// due is in Batches() (if the consumer had room) before the count moves.
func (w *Watcher) TickCount() uint64 { return w.tickCount.Load() }

// WithAddWatchHook wraps every fsnotify Add, e.g. to fail like an exhausted watch limit.
func WithAddWatchHook(o Options, f func(path string, add func(string) error) error) Options {
	o.addWatch = f
	return o
}

// InjectError hands err to the reader as if fsnotify had reported it.
func (w *Watcher) InjectError(err error) { w.onReader(func() { w.handleErr(err) }) }

// PauseReader blocks the reader goroutine until resume is called, so the kernel queue
// fills up.
func (w *Watcher) PauseReader() (resume func()) {
	paused, release := make(chan struct{}), make(chan struct{})
	w.onReader(func() {
		close(paused)
		<-release
	})
	<-paused
	return func() { close(release) }
}
