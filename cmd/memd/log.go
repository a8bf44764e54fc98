package main

import (
	"encoding/json"
	"fmt"

	"github.com/memd-dev/memd/internal/textsafe"
	"github.com/memd-dev/memd/sync/gitrepo"
)

func init() {
	register("log", "a memory's history, following renames and archive moves", cmdLog)
}

// cmdLog reads history only: no writer lock, no repair (a read-only open).
func cmdLog(a *app, args []string) int {
	fs := a.flags("log", "PATH")
	asJSON := fs.Bool("json", false, "print the history as JSON, newest first")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
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
	entries, err := repo.Log(rel)
	if err != nil {
		return a.fail("log: %s", textsafe.Escape(err.Error()))
	}
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(entries); err != nil {
			return a.fail("log: %s", textsafe.Escape(err.Error()))
		}
		return exitOK
	}
	for _, e := range entries {
		fmt.Fprintf(a.stdout, "%s  %s  %-10s %s\n", e.Commit[:12], localTime(e.At), e.Action, textsafe.Escape(e.Path))
		if e.From != "" {
			fmt.Fprintf(a.stdout, "%26s was %s\n", "", textsafe.Escape(e.From))
		}
		fmt.Fprintf(a.stdout, "%26s %s\n", "", textsafe.Escape(e.Subject))
	}
	return exitOK
}
