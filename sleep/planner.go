package sleep

import (
	"fmt"
	"io"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
)

// A planner reads the tree the phases plan on, plans each phase on it, and keeps what it
// learnt for the next run. The plain planner parses every memory file; the caching one
// wraps it with the parse cache (cache.go), so a night re-reads only the files that
// changed. It is the only cache sleep keeps: at 100k files it saves ~6 s of CPU a night
// (1.1 s against 7.2 s: every file parsed); an idle record and a delta plan on top of it
// saved 0.6–0.7 s of CPU (0.4 s of wall time on a quiet machine) and were retired with the
// idle-run target (bench/RESULTS.md).
type planner interface {
	// load walks the repo and parses its memory files.
	load() (*snapshot, error)
	// plan is one phase's plan on s (pure: nothing is written).
	plan(ph memd.Phase, s *snapshot, env *planEnv) (*plan, error)
	// keep is called after the phases of a run that writes (not a dry run).
	keep(s *snapshot) error
}

// plainPlanner parses every memory file of one walk.
type plainPlanner struct {
	dir      string
	ignore   repofiles.Rule
	progress io.Writer
}

func (p plainPlanner) load() (*snapshot, error) {
	t, err := walkTree(p.dir, p.ignore)
	if err != nil {
		return nil, err
	}
	return snapshotOf(p.dir, t, 0, "", p.progress)
}

func (plainPlanner) plan(ph memd.Phase, s *snapshot, env *planEnv) (*plan, error) {
	switch ph {
	case memd.PhaseExpire:
		return planExpire(s, env)
	case memd.PhaseArcs:
		return planArcs(s, env)
	case memd.PhaseArchive:
		return planArchive(s, env)
	case memd.PhaseTidy:
		return planTidy(s, env)
	}
	return nil, fmt.Errorf("%w %q", memd.ErrUnknownPhase, ph)
}

func (plainPlanner) keep(*snapshot) error { return nil }

// cachingPlanner is the plain planner reading through the parse cache in stateDir, and
// saving it after the run.
type cachingPlanner struct {
	plainPlanner
	stateDir string
	wall     func() time.Time // the racy rule's clock
}

func (c cachingPlanner) load() (*snapshot, error) {
	saved := c.wall().UnixNano() // before the walk: anything touched after it is racy
	t, err := walkTree(c.dir, c.ignore)
	if err != nil {
		return nil, err
	}
	return snapshotOf(c.dir, t, saved, c.stateDir, c.progress)
}

func (c cachingPlanner) keep(s *snapshot) error {
	if err := s.saveCacheIfWorth(c.stateDir); err != nil {
		return fmt.Errorf("sleep parse cache: %w", err)
	}
	return nil
}
