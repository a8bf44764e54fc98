package main

import (
	"context"
	"fmt"
	"time"

	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/doctor"
	"github.com/memd-dev/memd/sync/gitrepair"
)

// doctorGit looks at the git directory for what a crash of git or of the machine left
// (docs/ARCHITECTURE.md §9.7, the deep look: every object read whole) and adds a finding for
// each, saying what `memd run` will do about it. With repair it does that now, holding the
// writer lock, and says what it did; what was healed is no longer a problem.
func doctorGit(a *app, rep *doctor.Report, repair bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := agent.GitRepairOptions(a.cfg, a.log, a.now, true)
	ps, err := gitrepair.Diagnose(ctx, o)
	if err != nil {
		return fmt.Errorf("git directory: %w", err)
	}
	if len(ps) == 0 {
		return nil
	}
	remote := a.cfg.Sync.Remote
	if !repair {
		for _, p := range ps {
			rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Problem, Check: "git", Path: p.Path,
				Message: p.String() + "; memd run will " + p.Plan(remote) + " (memd doctor --repair does it now)"})
			rep.Problems++
		}
		return nil
	}
	_, done, err := agent.RepairGitDir(ctx, a.cfg, a.log, a.now, "memd doctor --repair", true)
	for _, line := range done.Done {
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Warning, Check: "git", Message: "repaired: " + line})
		rep.Warnings++
	}
	if err != nil {
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Problem, Check: "git", Message: "not repaired: " + err.Error()})
		rep.Problems++
	}
	return nil
}
