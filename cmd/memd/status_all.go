package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memd-dev/memd/internal/drain"
	"github.com/memd-dev/memd/internal/registry"
	"github.com/memd-dev/memd/metrics/statusline"
)

// statusAll is `memd status --all`: every repo in the machine's registry (each `memd run`
// adds its own) and the configured one, worst state first, in one line; --format json
// prints the list of documents.
func (a *app) statusAll(format string) int {
	if !statusline.IsFormat(format) {
		fmt.Fprintf(a.stderr, "memd: status: unknown --format %q (known: %s)\n", format, strings.Join(statusline.Formats, ", "))
		return exitUsage
	}
	if format == "claude" {
		drain.Input(a.stdin, 1<<20, statusline.ClaudeInputWait)
	}
	named := a.knownRepos()
	now := a.now()
	if format == "json" {
		for i := range named {
			named[i].Doc = statusline.Effective(named[i].Doc, now, nil)
		}
		b, err := json.Marshal(named)
		if err != nil {
			return a.fail("status: %v", err)
		}
		fmt.Fprintln(a.stdout, string(b))
		return exitOK
	}
	doc := statusline.All(named, now, nil)
	out, err := statusline.Render(&doc, format, now, func(int) bool { return true })
	if err != nil {
		return a.fail("status: %v", err)
	}
	if !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	fmt.Fprint(a.stdout, out)
	return exitOK
}

// knownRepos reads the registry and each repo's document; the configured repo is included
// when it has a document. An unreadable registry file or document is said on stderr; the
// line still draws.
func (a *app) knownRepos() []statusline.Named {
	var repos []string
	if dir, err := registry.Dir(os.Getenv); err == nil {
		entries, err := registry.List(dir)
		if err != nil {
			fmt.Fprintf(a.stderr, "memd: status: %v\n", err)
		}
		for _, e := range entries {
			repos = append(repos, e.Repo)
		}
	}
	if r, err := filepath.Abs(a.cfg.Repo); err == nil && !slices.Contains(repos, r) {
		if _, err := statusline.ReadAt(r); err == nil {
			repos = append(repos, r)
		}
	}
	names := registry.Names(repos)
	out := make([]statusline.Named, 0, len(repos))
	for i, r := range repos {
		d, err := statusline.ReadAt(r)
		if err != nil && !errors.Is(err, statusline.ErrNoDocument) {
			fmt.Fprintf(a.stderr, "memd: status: %s: %v\n", r, err)
		}
		out = append(out, statusline.Named{Name: names[i], Repo: r, Doc: d})
	}
	return out
}
