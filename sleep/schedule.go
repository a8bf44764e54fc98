package sleep

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/memd-dev/memd"
)

// StateFile is the name of the catch-up state inside the state dir (<repo>/.git/memd).
const StateFile = "sleep.json"

// cronParser accepts the 5-field form, descriptors (@daily, @every 1h) and a CRON_TZ= prefix.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ValidateSchedule checks a sleep.schedule spec; the error names the spec.
func ValidateSchedule(spec string) error {
	_, err := parseSchedule(spec)
	return err
}

func parseSchedule(spec string) (cron.Schedule, error) {
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w (use 5 fields such as \"0 3 * * *\", or @daily)", spec, err)
	}
	return s, nil
}

// State is the content of .git/memd/sleep.json: the last successful run per phase. Baseline
// is when catch-up started watching a repo that has never slept, so a first missed night is
// still caught up.
type State struct {
	Version  int                       `json:"version"`
	Baseline time.Time                 `json:"baseline,omitzero"`
	Phases   map[memd.Phase]PhaseState `json:"phases"`
}

// PhaseState is one phase's last success.
type PhaseState struct {
	LastSuccess time.Time `json:"last_success"`
	Run         string    `json:"run,omitempty"`
}

// ReadState reads <stateDir>/sleep.json; a missing file is an empty state.
func ReadState(stateDir string) (State, error) {
	st := State{Version: 1, Phases: map[memd.Phase]PhaseState{}}
	p := filepath.Join(stateDir, StateFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read sleep state %s: %w", p, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return State{Version: 1, Phases: map[memd.Phase]PhaseState{}}, fmt.Errorf("sleep state %s: %w", p, err)
	}
	if st.Phases == nil {
		st.Phases = map[memd.Phase]PhaseState{}
	}
	return st, nil
}

// stateMu serialises read-modify-write of sleep.json inside one process (the scheduler's
// baseline and the runner's MarkDone may race).
var stateMu sync.Mutex

// updateState applies f to the state file atomically (0600, dir 0700).
func updateState(stateDir string, f func(*State)) error {
	stateMu.Lock()
	defer stateMu.Unlock()
	st, err := ReadState(stateDir)
	if err != nil {
		// A corrupt state file only costs a catch-up; replace it rather than stop sleeping.
		st = State{Version: 1, Phases: map[memd.Phase]PhaseState{}}
	}
	f(&st)
	st.Version = 1
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sleep state: %w", err)
	}
	if err := writeStateFile(stateDir, StateFile, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write sleep state: %w", err)
	}
	return nil
}

// MarkDone records a successful run of phase at time at (and its run id) in sleep.json.
func MarkDone(stateDir string, phase memd.Phase, runID string, at time.Time) error {
	return markDone(stateDir, []memd.Phase{phase}, runID, at)
}

func markDone(stateDir string, phases []memd.Phase, runID string, at time.Time) error {
	return updateState(stateDir, func(st *State) {
		for _, ph := range phases {
			st.Phases[ph] = PhaseState{LastSuccess: at.UTC(), Run: runID}
		}
	})
}

// RunID is the stable id of a scheduled slot, e.g. 20261130T030000Z: a killed run resumed
// for the same slot finds its committed phases by it.
func RunID(slot time.Time) string { return slot.UTC().Format("20060102T150405Z") }

// Scheduler fires the trigger at each scheduled time (robfig/cron) and catches up missed
// runs: at Start and every minute it asks Due. The trigger must only enqueue a job (the
// owner runs it); the scheduler never touches the repo except sleep.json.
type Scheduler struct {
	spec     string
	sched    cron.Schedule
	stateDir string
	now      func() time.Time
	trigger  func(slot time.Time)

	// Phases whose last success decides catch-up (default: all four).
	Phases []memd.Phase
	// CatchUp off: only the cron times fire.
	CatchUp bool
	// Logger; nil discards.
	Logger *slog.Logger
	// CheckEvery is the catch-up check interval (default one minute).
	CheckEvery time.Duration

	mu       sync.Mutex
	lastSlot time.Time // the last slot triggered, so cron and catch-up never fire one slot twice
	cron     *cron.Cron
	stop     chan struct{}
	done     chan struct{}
}

// NewScheduler parses spec (exit-2 material when bad: the error names it). now nil = time.Now.
func NewScheduler(spec string, stateDir string, now func() time.Time, trigger func(slot time.Time)) (*Scheduler, error) {
	sched, err := parseSchedule(spec)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Scheduler{spec: spec, sched: sched, stateDir: stateDir, now: now, trigger: trigger,
		Phases: slices.Clone(memd.SleepPhases), CatchUp: true, CheckEvery: time.Minute}, nil
}

func (s *Scheduler) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

// Next is the first scheduled time after t.
func (s *Scheduler) Next(t time.Time) time.Time { return s.schedule().Next(t) }

// Prev is the latest scheduled time at or before t (zero if none within ~4 years).
func (s *Scheduler) Prev(t time.Time) time.Time { return prevSlot(s.schedule(), t) }

// prevSlot finds the latest activation <= t by widening a window backwards until the window
// holds one activation, then walking forward: a few Next calls for any schedule, instead of
// walking a per-minute schedule across a year.
func prevSlot(sched cron.Schedule, t time.Time) time.Time {
	for w := time.Minute; w <= 4*366*24*time.Hour; w *= 2 {
		n := sched.Next(t.Add(-w))
		if n.IsZero() || n.After(t) {
			continue
		}
		for {
			nn := sched.Next(n)
			if nn.IsZero() || nn.After(t) {
				return n
			}
			n = nn
		}
	}
	return time.Time{}
}

// Due reports whether some phase's next scheduled time after its last success has passed;
// slot is then the latest scheduled time <= now, so several missed nights make one run.
// A repo with no state at all gets a baseline of now (written) and is not due yet.
func (s *Scheduler) Due(now time.Time) (slot time.Time, ok bool) {
	st, err := ReadState(s.stateDir)
	if err != nil {
		s.logger().Warn("sleep state unreadable; treating as never run", "err", err)
	}
	if st.Baseline.IsZero() && len(st.Phases) == 0 {
		if err := updateState(s.stateDir, func(x *State) {
			if x.Baseline.IsZero() {
				x.Baseline = now.UTC()
			}
		}); err != nil {
			s.logger().Warn("cannot write sleep state", "err", err)
		}
		return time.Time{}, false
	}
	s.mu.Lock()
	phases := slices.Clone(s.Phases)
	s.mu.Unlock()
	for _, p := range phases {
		last := st.Baseline
		if ps, found := st.Phases[p]; found && !ps.LastSuccess.IsZero() {
			last = ps.LastSuccess
		}
		if last.IsZero() {
			continue
		}
		n := s.Next(last)
		if !n.IsZero() && !n.After(now) {
			slot = s.Prev(now)
			if slot.IsZero() {
				slot = n
			}
			return slot, true
		}
	}
	return time.Time{}, false
}

// fire triggers slot once.
func (s *Scheduler) fire(slot time.Time, why string) {
	s.mu.Lock()
	if !slot.After(s.lastSlot) {
		s.mu.Unlock()
		return
	}
	s.lastSlot = slot
	s.mu.Unlock()
	s.logger().Info("sleep due", "slot", slot.UTC().Format(time.RFC3339), "why", why)
	if s.trigger != nil {
		s.trigger(slot)
	}
}

// Check runs the catch-up check once (Start does it at start and every CheckEvery).
// It does nothing when CatchUp is off.
func (s *Scheduler) Check() {
	s.mu.Lock()
	on := s.CatchUp
	s.mu.Unlock()
	if !on {
		return
	}
	if slot, ok := s.Due(s.now()); ok {
		s.fire(slot, "catch-up")
	}
}

// SetCatchUp turns catch-up on or off (sleep.catch_up; a config reload may change it).
func (s *Scheduler) SetCatchUp(on bool) {
	s.mu.Lock()
	s.CatchUp = on
	s.mu.Unlock()
}

// SetSpec replaces the schedule (a config reload); a running scheduler is rescheduled. A bad
// spec is refused and the old one kept.
func (s *Scheduler) SetSpec(spec string) error {
	sched, err := parseSchedule(spec)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.spec, s.sched = spec, sched
	running := s.cron != nil
	s.mu.Unlock()
	if running {
		s.Stop()
		s.Start()
	}
	return nil
}

// Spec is the schedule in use.
func (s *Scheduler) Spec() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.spec
}

func (s *Scheduler) schedule() cron.Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sched
}

// Start begins firing: cron at the scheduled times, and the catch-up check now and then
// every CheckEvery. Stop ends both.
func (s *Scheduler) Start() {
	s.mu.Lock()
	if s.cron != nil {
		s.mu.Unlock()
		return
	}
	cl := cronLogger{s.logger()}
	c := cron.New(cron.WithParser(cronParser), cron.WithLogger(cl),
		cron.WithChain(cron.Recover(cl), cron.SkipIfStillRunning(cl)))
	c.Schedule(s.sched, cron.FuncJob(func() {
		slot := s.Prev(s.now())
		if slot.IsZero() {
			slot = s.now()
		}
		s.fire(slot, "schedule")
	}))
	s.cron = c
	s.stop = make(chan struct{})
	s.done = make(chan struct{})
	s.mu.Unlock()
	c.Start()
	go func() {
		defer close(s.done)
		s.Check()
		every := s.CheckEvery
		if every <= 0 {
			every = time.Minute
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.Check()
			}
		}
	}()
}

// Stop stops the cron and the catch-up loop; a trigger already running finishes.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	c, stop, done := s.cron, s.stop, s.done
	s.cron = nil
	s.mu.Unlock()
	if c == nil {
		return
	}
	<-c.Stop().Done()
	close(stop)
	<-done
}

// MarkDone records phase's success at at (see the package func MarkDone).
func (s *Scheduler) MarkDone(phase memd.Phase, at time.Time) error {
	return MarkDone(s.stateDir, phase, RunID(s.Prev(at)), at)
}

// cronLogger adapts slog to cron.Logger.
type cronLogger struct{ l *slog.Logger }

func (c cronLogger) Info(msg string, kv ...any) { c.l.Debug("cron: "+msg, kv...) }
func (c cronLogger) Error(err error, msg string, kv ...any) {
	c.l.Error("cron: "+msg, append([]any{"err", err}, kv...)...)
}
