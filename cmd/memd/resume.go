package main

import (
	"fmt"

	"github.com/memd-dev/memd/internal/statedir"
)

func init() {
	register("resume", "end a pause; --allow-deletes lets a held mass deletion through once", cmdResume)
}

// cmdResume ends `memd pause` and, with --allow-deletes, lets the mass deletion the brake
// holds go through once (the brake takes allow-deletes when it has). Resuming what is not
// paused is no error (git's `stash pop` on nothing is; a resume is a state, not an item).
func cmdResume(a *app, args []string) int {
	fs := a.flags("resume", "")
	allow := fs.Bool("allow-deletes", false, "let the held mass deletion be committed or merged, once")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "memd: resume: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	sd, err := statedir.Create(a.cfg.StateDir())
	if err != nil {
		return a.fail("resume: %v", err)
	}
	defer sd.Close()
	p, perr := sd.ReadPause()
	if err := sd.ClearPause(); err != nil {
		return a.fail("resume: %v", err)
	}
	if *allow {
		if err := sd.AllowDeletes(a.now()); err != nil {
			return a.fail("resume: %v", err)
		}
	}
	a.kickDaemon(sd)
	switch {
	case perr != nil:
		fmt.Fprintf(a.stdout, "resumed (the pause file could not be read and was removed: %v)\n", perr)
	case p != nil && p.Active(a.now()):
		fmt.Fprintln(a.stdout, "resumed")
	default:
		fmt.Fprintln(a.stdout, "not paused")
	}
	if *allow {
		fmt.Fprintln(a.stdout, "the held mass deletion may go through once")
	}
	return exitOK
}
