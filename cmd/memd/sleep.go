package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/sleep"
	memsync "github.com/memd-dev/memd/sync"
)

func init() {
	register("sleep", "run sleep phases now, in order (expire, arcs, archive, tidy)", cmdSleep)
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
	fs.Var(&phases, "phase", "run only this `phase` (expire, arcs, archive, tidy); repeatable; default: sleep.phases")
	dryRun := fs.Bool("dry-run", false, "print the plan and write nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	noGC := fs.Bool("no-gc", false, "skip `git gc --auto` after the phases")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if len(phases) > 0 {
		if _, err := sleep.SelectPhases(phases); err != nil {
			fmt.Fprintf(a.stderr, "memd: sleep: --phase: %v\n", err)
			return exitUsage
		}
	}
	opts := memsync.OptionsFromConfig(a.cfg)
	opts.Now, opts.Logger = a.now, a.log
	repo, err := memsync.Open(a.cfg.Repo, opts)
	if err != nil {
		return a.fail("sleep: %v", err)
	}
	defer repo.Close()
	// The committer's ignore rules, the same the daemon uses: sleep never plans, and the
	// repo never commits, a path .gitignore or memd's list excludes.
	ign, err := repofiles.New(a.cfg.Repo, a.cfg.Watch.Ignore)
	if err != nil {
		return a.fail("sleep: ignore rules: %v", err)
	}
	repo.SetIgnore(ign.Ignored)
	// A sleep (or git) killed while holding .git/index.lock leaves it behind, and the index
	// then never follows HEAD again; `memd run` clears it at start, and so does this.
	if !*dryRun {
		if err := repo.ClearStaleIndexLock(); err != nil {
			a.log.Warn("index lock", "err", err)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var progress io.Writer
	if f, ok := a.stderr.(*os.File); ok && !*asJSON && isTerminal(f) {
		progress = f
	}
	ro := sleep.Options{Config: a.cfg, Now: a.now, Logger: a.log, DryRun: *dryRun, Progress: progress,
		StateDir: a.cfg.StateDir(), NoGC: *noGC, Ignore: ign.Ignored}
	if len(phases) > 0 {
		ro.Phases = phases
	}
	// The run id is the clock's second: a run killed midway and started again with the same
	// --now resumes (committed phases are skipped, a half-applied one is undone first).
	runID := sleep.RunID(a.now())
	before, okBefore := head(repo)
	rep, err := sleep.NewRunner(a.cfg.Repo, repo, ro).Run(ctx, runID)
	if after, ok := head(repo); ok && okBefore && !*dryRun {
		// The phases' commits are done and their lock released: the hook sees the result.
		defer a.runHooks(repo, oneShotHook{memd.HookAfterSleep, before, after})
	}
	if err != nil {
		return a.fail("sleep: %v", err)
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

func printSleepReport(w io.Writer, rep sleep.Report) {
	suffix := ""
	if rep.DryRun {
		suffix = " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "sleep run %s%s\n", rep.RunID, suffix)
	for _, p := range rep.Phases {
		counts := countsText(p.Counts)
		switch {
		case p.Skipped:
			fmt.Fprintf(w, "%-8s already committed in run %s\n", p.Name, rep.RunID)
		case p.Err != nil:
			fmt.Fprintf(w, "%-8s FAILED (undone): %v\n", p.Name, p.Err)
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
				fmt.Fprintln(w, line)
			}
		} else {
			// Reports (caps, stale notes, skips) are worth a line even when applied.
			for _, it := range p.Items {
				if it.Action == "report" || it.Action == "skip" {
					fmt.Fprintf(w, "  %s %s: %s\n", it.Action, it.Path, it.Reason)
				}
			}
		}
	}
	if rep.GC != "" && rep.GC != "ran" {
		fmt.Fprintf(w, "gc: %s\n", rep.GC)
	}
}

func countsText(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k, v := range c {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, c[k])
	}
	return strings.Join(parts, " ")
}
