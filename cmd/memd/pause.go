package main

import (
	"fmt"
	"time"

	"github.com/memd-dev/memd/internal/statedir"
)

func init() {
	register("pause", "stop syncing (and committing, unless --commit-only) until `memd resume`; survives restarts", cmdPause)
}

// cmdPause writes pause.json for the daemon (and every later `memd run`) and kicks it. A
// second pause replaces the first, as a second `git stash` does not merge with the first:
// the newest ask is the one in force.
func cmdPause(a *app, args []string) int {
	fs := a.flags("pause", "")
	commitOnly := fs.Bool("commit-only", false, "keep committing, stop syncing")
	forD := fs.Duration("for", 0, "end the pause by itself after this `duration` (e.g. 2h); default: until `memd resume`")
	reason := fs.String("reason", "", "say why, for the status line's detail")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "memd: pause: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *forD < 0 {
		fmt.Fprintf(a.stderr, "memd: pause: --for %s: must not be negative\n", *forD)
		return exitUsage
	}
	sd, err := statedir.Create(a.cfg.StateDir())
	if err != nil {
		return a.fail("pause: %v", err)
	}
	defer sd.Close()
	now := a.now()
	p := statedir.Pause{Reason: *reason, CommitOnly: *commitOnly, At: now.UTC()}
	if *forD > 0 {
		p.Until = now.Add(*forD).UTC()
	}
	if err := sd.WritePause(p); err != nil {
		return a.fail("pause: %v", err)
	}
	a.kickDaemon(sd)
	what := "committing and syncing"
	if p.CommitOnly {
		what = "syncing (commits go on)"
	}
	until := "until `memd resume`"
	if !p.Until.IsZero() {
		until = "until " + p.Until.In(now.Location()).Format(time.RFC3339)
	}
	fmt.Fprintf(a.stdout, "paused %s %s\n", what, until)
	return exitOK
}
