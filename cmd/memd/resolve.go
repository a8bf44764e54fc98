package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/internal/textsafe"
	"github.com/memd-dev/memd/sync/gitrepo"
)

func init() {
	register("resolve", "end one conflict: --keep ours|theirs|both (a commit and an event)", cmdResolve)
}

// cmdResolve ends one conflict under the writer lock, the way `memd sync` commits, so it
// never races `memd run`; the running daemon is kicked and shows the event.
func cmdResolve(a *app, args []string) int {
	fs := a.flags("resolve", "PATH --keep ours|theirs|both")
	keep := fs.String("keep", "", "`which` version stays: ours (the copy), theirs (the original), both (the copy becomes a memory of its own)")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || (*keep != gitrepo.KeepOurs && *keep != gitrepo.KeepTheirs && *keep != gitrepo.KeepBoth) {
		fs.Usage()
		return exitUsage
	}
	rel, err := a.repoRel(fs.Arg(0))
	if err != nil {
		return a.fail("resolve: %s", textsafe.Escape(err.Error()))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sess, err := agent.Open(ctx, a.cfg, agent.OpenOptions{Logger: a.log, Now: a.now, Who: "memd resolve"})
	if err != nil {
		return a.fail("resolve: %s", textsafe.Escape(err.Error()))
	}
	defer sess.Close()
	before, okBefore := head(sess.Repo())
	out, err := sess.Resolve(ctx, rel, *keep)
	if err != nil {
		if errors.Is(err, gitrepo.ErrNoConflict) {
			return a.fail("resolve: %s (memd conflicts lists them)", textsafe.Escape(err.Error()))
		}
		return a.fail("resolve: %s", textsafe.Escape(err.Error()))
	}
	if after, ok := head(sess.Repo()); ok && okBefore && after != before {
		defer a.runHooks(sess.Repo(), oneShotHook{memd.HookAfterCommit, before, after})
	}
	switch {
	case out.Kept != "":
		fmt.Fprintf(a.stdout, "resolved %s: kept both, the copy is now %s\n", textsafe.Escape(rel), textsafe.Escape(out.Kept))
	default:
		fmt.Fprintf(a.stdout, "resolved %s: kept %s\n", textsafe.Escape(rel), *keep)
	}
	if out.Commit.Hash != "" {
		fmt.Fprintf(a.stdout, "committed %s\n", out.Commit.Hash[:12])
	}
	return exitOK
}
