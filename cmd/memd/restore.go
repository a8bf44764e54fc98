package main

import (
	"context"
	"fmt"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/internal/textsafe"
)

func init() {
	register("restore", "bring a deleted, archived or older version back as a new commit", cmdRestore)
}

// cmdRestore brings a version back under the writer lock (a new commit: history is never
// rewritten) and kicks the running daemon so it shows the event.
func cmdRestore(a *app, args []string) int {
	fs := a.flags("restore", "PATH [--at COMMIT|RFC3339]")
	at := fs.String("at", "", "the version at this `commit` (a hash or prefix) or RFC3339 time; default: the archived or last deleted one")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return exitUsage
	}
	rel, err := a.repoRel(fs.Arg(0))
	if err != nil {
		return a.fail("restore: %s", textsafe.Escape(err.Error()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sess, err := agent.Open(ctx, a.cfg, agent.OpenOptions{Logger: a.log, Now: a.now, Who: "memd restore"})
	if err != nil {
		return a.fail("restore: %s", textsafe.Escape(err.Error()))
	}
	defer sess.Close()
	before, okBefore := head(sess.Repo())
	target, res, err := sess.Restore(ctx, rel, *at)
	if err != nil {
		return a.fail("restore: %s (memd log %s shows its versions)", textsafe.Escape(err.Error()), textsafe.Escape(rel))
	}
	if after, ok := head(sess.Repo()); ok && okBefore && after != before {
		defer a.runHooks(sess.Repo(), oneShotHook{memd.HookAfterCommit, before, after})
	}
	if res.Hash == "" {
		fmt.Fprintf(a.stdout, "%s is already that version: nothing to commit\n", textsafe.Escape(target))
		return exitOK
	}
	fmt.Fprintf(a.stdout, "restored %s\ncommitted %s\n", textsafe.Escape(target), res.Hash[:12])
	return exitOK
}
