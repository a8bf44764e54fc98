// Package agent is memd's owner loop (docs/ARCHITECTURE.md §2): one goroutine owns the repo and runs every
// job that touches git or the tree — commit a batch, reconcile, sync, sleep, reload — one at
// a time, each under the writer lock, then publishes an immutable snapshot for the status
// document, the metrics and the event stream.
//
// Producers (the watcher, timers, the sleep schedule, signals) never touch the repo: they
// only add paths to the pending set and kick a job kind. A kick is a cap-1 channel, so any
// number of kicks while a job runs coalesce into one run of that kind.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/memd-dev/memd"
)

// Notifier is the service manager boundary (systemd's sd_notify; a no-op elsewhere).
type Notifier interface {
	Ready()
	Reloading()
	Stopping()
	Status(text string)
	RunWatchdog(ctx context.Context, alive func() bool)
}

// Options wires an Agent.
type Options struct {
	Config  memd.Config
	Now     func() time.Time
	Logger  *slog.Logger
	Version string
	// LoadConfig re-reads the config file on SIGHUP; a failing load keeps the old config.
	LoadConfig func() (memd.Config, error)
	// OnReload applies process-wide settings of a new config (log level).
	OnReload func(memd.Config)
	Notifier Notifier
	// ScheduleValidator checks sleep.schedule on reload.
	ScheduleValidator memd.ScheduleValidator
	// Registry is the machine's repo registry directory (internal/registry) this run adds
	// its repo to; "" registers nothing (tests).
	Registry string
}

// kicks are the job kinds; each is a cap-1 channel so kicks coalesce.
type kicks struct {
	commit, reconcile, sync, reload chan struct{}
	sleep                           chan time.Time
	// hooks: a hook finished; the owner publishes its result (status warn or clear).
	hooks chan struct{}
	// outside: another writer did something memd shows or waits for (aside.go).
	outside chan struct{}
	// claude: time to compare Claude Code's memory with the repo's copy (claudecode.go).
	claude chan struct{}
}

func newKicks() kicks {
	return kicks{
		commit: make(chan struct{}, 1), reconcile: make(chan struct{}, 1),
		sync: make(chan struct{}, 1), reload: make(chan struct{}, 1),
		sleep: make(chan time.Time, 1), hooks: make(chan struct{}, 1),
		outside: make(chan struct{}, 1), claude: make(chan struct{}, 1),
	}
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// pendingSet is the dirty-path set shared by the watcher reader and the owner.
type pendingSet struct {
	mu    sync.Mutex
	paths map[string]struct{}
}

func (p *pendingSet) add(paths []string) {
	p.mu.Lock()
	if p.paths == nil {
		p.paths = map[string]struct{}{}
	}
	for _, s := range paths {
		p.paths[s] = struct{}{}
	}
	p.mu.Unlock()
}

func (p *pendingSet) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.paths))
	for s := range p.paths {
		out = append(out, s)
	}
	p.paths = nil
	sort.Strings(out)
	return out
}

func (p *pendingSet) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.paths)
}

// ErrAlreadyRunning is returned when another memd holds the repo's pid file.
var ErrAlreadyRunning = errors.New("another memd is already running on this repo")

// jobState is what /healthz reads: which job runs since when.
type jobState struct {
	name  string
	since time.Time
}

// StuckAfter is how long one job may run before /healthz reports the owner loop stuck.
// A sleep run on a big repo takes seconds; ten minutes means something hangs.
var StuckAfter = 10 * time.Minute

func (a *Agent) ownerAlive() error {
	if !a.loopRunning.Load() {
		return errors.New("owner loop not running")
	}
	if js := a.current.Load(); js != nil && js.name != "" {
		if d := time.Since(js.since); d > StuckAfter {
			return fmt.Errorf("owner loop stuck in %s for %s", js.name, d.Round(time.Second))
		}
	}
	return nil
}

func (a *Agent) setJob(name string) {
	if name == "" {
		a.current.Store(&jobState{})
		return
	}
	a.current.Store(&jobState{name: name, since: time.Now()})
}
