package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/memd-dev/memd/internal/textsafe"
	"github.com/memd-dev/memd/sync/gitrepo"
)

func init() {
	register("log", "a memory's history, following renames and archive moves", cmdLog)
}

// cmdLog reads history only: no writer lock, no repair (a read-only open). Entries are
// printed as the walk finds them, newest first; --json streams the same array `memd log
// --json` always printed.
func cmdLog(a *app, args []string) int {
	fs := a.flags("log", "PATH")
	asJSON := fs.Bool("json", false, "print the history as JSON, newest first")
	limit := fs.Int("limit", 0, "print at most `N` entries, the newest (0: all)")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || *limit < 0 {
		fs.Usage()
		return exitUsage
	}
	rel, err := a.repoRel(fs.Arg(0))
	if err != nil {
		return a.fail("log: %s", textsafe.Escape(err.Error()))
	}
	ro := gitrepo.OptionsFromConfig(a.cfg)
	ro.Logger, ro.Now = a.log, a.now
	repo, err := gitrepo.Open(a.cfg.Repo, ro)
	if err != nil {
		return a.fail("log: %s", textsafe.Escape(err.Error()))
	}
	defer repo.Close()
	n := 0
	var werr error
	print := func(e gitrepo.LogEntry) bool {
		if *asJSON {
			werr = printJSONEntry(a, n, e)
		} else {
			werr = printLogEntry(a, e)
		}
		n++
		return werr == nil && (*limit == 0 || n < *limit)
	}
	var progress func(int)
	if f, ok := a.stderr.(*os.File); ok && !*asJSON && isTerminal(f) {
		progress = func(c int) { fmt.Fprintf(f, "\r%d commits walked\x1b[K", c) }
		defer fmt.Fprint(f, "\r\x1b[K")
	}
	err = repo.History().LogWalk(rel, print, progress)
	if *asJSON && n > 0 {
		fmt.Fprint(a.stdout, "\n]\n")
	}
	if err == nil {
		err = werr
	}
	if err != nil {
		return a.fail("log: %s", textsafe.Escape(err.Error()))
	}
	return exitOK
}

// printJSONEntry writes the i'th element of the array json.Encoder with a two-space indent
// would write for the whole log.
func printJSONEntry(a *app, i int, e gitrepo.LogEntry) error {
	b, err := json.MarshalIndent(e, "  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n  "
	if i == 0 {
		sep = "[\n  "
	}
	_, err = fmt.Fprintf(a.stdout, "%s%s", sep, b)
	return err
}

func printLogEntry(a *app, e gitrepo.LogEntry) error {
	fmt.Fprintf(a.stdout, "%s  %s  %-10s %s\n", e.Commit[:12], localTime(e.At), e.Action, textsafe.Escape(e.Path))
	if e.From != "" {
		fmt.Fprintf(a.stdout, "%26s was %s\n", "", textsafe.Escape(e.From))
	}
	_, err := fmt.Fprintf(a.stdout, "%26s %s\n", "", textsafe.Escape(e.Subject))
	return err
}
