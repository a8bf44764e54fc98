package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/internal/statedir"
	"github.com/memd-dev/memd/sleep"
)

func init() {
	register("sleep", "run sleep phases now, in order ("+memd.JoinNames(memd.SleepPhases, ", ")+")", cmdSleep)
	// A bad sleep.schedule is a config error (exit 2) naming the spec.
	validateSchedule = sleep.ValidateSchedule
}

// phaseList is a repeatable --phase flag (also accepts a comma-separated list).
type phaseList []string

func (p *phaseList) String() string { return strings.Join(*p, ",") }

func (p *phaseList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*p = append(*p, s)
		}
	}
	return nil
}

func cmdSleep(a *app, args []string) int {
	fs := a.flags("sleep", "")
	var phases phaseList
	fs.Var(&phases, "phase", "run only this `phase` ("+memd.JoinNames(memd.SleepPhases, ", ")+"); repeatable; default: sleep.phases")
	dryRun := fs.Bool("dry-run", false, "print the plan and write nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	noGC := fs.Bool("no-gc", false, "skip `git gc --auto` after the phases")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	var only []memd.Phase // the flag's strings, converted here: the runner sees phases only
	for _, s := range phases {
		p, err := memd.ParsePhase(s)
		if err != nil {
			fmt.Fprintf(a.stderr, "memd: sleep: --phase: %v\n", err)
			return exitUsage
		}
		only = append(only, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Opened the way `memd run` opens it (docs/ARCHITECTURE.md §10): a merge a crash left
	// half checked out is finished before a plan reads the tree, a half-applied phase undone,
	// a stale .git/index.lock cleared. The committer's ignore rules, the same the daemon
	// uses: sleep never plans, and the repo never commits, a path .gitignore or memd's list
	// excludes. A dry run repairs nothing: it writes nothing.
	sess, err := agent.Open(ctx, a.cfg, agent.OpenOptions{Logger: a.log, Now: a.now, Who: "memd sleep", ReadOnly: *dryRun})
	if err != nil {
		return a.fail("sleep: %v", err)
	}
	defer sess.Close()
	repo := sess.Repo()
	// A sleep moves and rewrites files: never in a tree that is not sync.branch's, nor over a
	// git operation waiting for the user (docs/ARCHITECTURE.md §11). A dry run writes nothing: it may look.
	if aside := repo.StandAside(); aside.Reason != "" && !aside.Passing && !*dryRun {
		return a.fail("sleep: %s; nothing done (finish it, or switch back to %s, then run again)", aside.Reason, a.cfg.Sync.Branch)
	}

	var progress io.Writer
	if f, ok := a.stderr.(*os.File); ok && !*asJSON && isTerminal(f) {
		progress = f
	}
	ro := sleep.Options{DryRun: *dryRun, Progress: progress, StateDir: a.cfg.StateDir(), NoGC: *noGC}
	if len(only) > 0 {
		ro.Phases = only
	}
	// The run id is the clock's second: a run killed midway and started again with the same
	// --now resumes (committed phases are skipped, a half-applied one is undone first).
	runID := sleep.RunID(a.now())
	before, okBefore := head(repo)
	rep, err := sess.SleepRunner(ro).Run(ctx, runID)
	if after, ok := head(repo); ok && okBefore && !*dryRun {
		// The phases' commits are done and their lock released: the hook sees the result.
		defer a.runHooks(repo, oneShotHook{memd.HookAfterSleep, before, after})
	}
	if err != nil {
		return a.fail("sleep: %v", err)
	}
	if !*dryRun {
		a.reportToDaemon(sleepReport(rep))
	}
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return a.fail("sleep: %v", err)
		}
	} else {
		printSleepReport(a.stdout, rep)
	}
	if rep.Failed() {
		return exitFailed
	}
	return exitOK
}

// sleepReport is what a running daemon shows of this run: its counts, failures and commits.
func sleepReport(rep sleep.Report) statedir.Report {
	r := statedir.Report{Command: "sleep", Sleep: &statedir.SleepDone{Counts: rep.Counts}}
	for _, p := range rep.Phases {
		if p.Commit != "" && !p.Skipped {
			r.Commits++
		}
		if p.Err != nil {
			r.Sleep.Failed = append(r.Sleep.Failed, string(p.Name)+": "+p.Err.Error())
		}
	}
	return r
}

func printSleepReport(w io.Writer, rep sleep.Report) {
	suffix := ""
	if rep.DryRun {
		suffix = " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "sleep run %s%s\n", rep.RunID, suffix)
	for _, p := range rep.Phases {
		counts := sleep.CountsText(p.Counts, " ")
		switch {
		case p.Skipped:
			fmt.Fprintf(w, "%-8s already committed in run %s\n", p.Name, rep.RunID)
		case errors.Is(p.Err, sleep.ErrNotCommitted):
			// Not undone: the commit (if any) took part of the files, the rest wait on disk.
			say(w, "%-8s FAILED, partly committed%s: %v\n", p.Name, commitSuffix(p.Commit), p.Err)
		case p.Err != nil:
			say(w, "%-8s FAILED (undone): %v\n", p.Name, p.Err)
		case counts == "":
			fmt.Fprintf(w, "%-8s nothing to do\n", p.Name)
		case p.Commit != "":
			fmt.Fprintf(w, "%-8s %s (commit %.10s)\n", p.Name, counts, p.Commit)
		default:
			fmt.Fprintf(w, "%-8s %s\n", p.Name, counts)
		}
		if rep.DryRun || p.Err != nil {
			for _, it := range p.Items {
				line := "  " + it.Action + " " + it.Path
				if it.To != "" {
					line += " -> " + it.To
				}
				if it.Reason != "" {
					line += " (" + it.Reason + ")"
				}
				say(w, "%s\n", line)
			}
		} else {
			// Reports (caps, stale notes, skips) are worth a line even when applied.
			for _, it := range p.Items {
				if it.Action == "report" || it.Action == "skip" {
					say(w, "  %s %s: %s\n", it.Action, it.Path, it.Reason)
				}
			}
		}
	}
	if rep.GC != "" && rep.GC != "ran" {
		fmt.Fprintf(w, "gc: %s\n", rep.GC)
	}
}

func commitSuffix(c string) string {
	if c == "" {
		return " (no commit)"
	}
	return fmt.Sprintf(" (commit %.10s)", c)
}
