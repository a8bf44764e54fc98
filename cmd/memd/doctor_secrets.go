package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"unicode"

	"github.com/memd-dev/memd/internal/secrets"
)

// secretsAdvice is the one line printed under the findings: what to do about a secret that
// is in history already. memd never rewrites or force-pushes history; that is the user's call.
const secretsAdvice = "rotate each key now (it is in every clone's history); rewriting history (git filter-repo) is your call: memd never force-pushes"

// doctorSecrets is `memd doctor --secrets`: every commit of the repo's history scanned as
// `gitleaks git` scans it, each finding named by commit, path, rule and line (never the
// secret). Exit 1 when anything is found.
func doctorSecrets(a *app, asJSON bool) int {
	path := a.cfg.Secrets.Config
	if path != "" && !filepath.IsAbs(path) {
		path = filepath.Join(a.cfg.Repo, path) // as the daemon reads it (agent/held.go)
	}
	rs, err := secrets.Load(path)
	if err != nil {
		return a.fail("doctor --secrets: %v", err)
	}
	var progress func(int)
	if f, ok := a.stderr.(*os.File); ok && isTerminal(f) {
		progress = func(n int) { fmt.Fprintf(f, "\rscanning history: %d commits\x1b[K", n) }
		defer fmt.Fprint(f, "\r\x1b[K")
	}
	found, err := secrets.ScanHistoryProgress(context.Background(), a.cfg.Repo, rs, progress)
	if err != nil {
		return a.fail("doctor --secrets: %v", err)
	}
	if asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Repo     string                   `json:"repo"`
			Findings []secrets.HistoryFinding `json:"findings"`
			Advice   string                   `json:"advice,omitempty"`
		}{a.cfg.Repo, append([]secrets.HistoryFinding{}, found...), adviceIf(len(found) > 0)})
	} else {
		fmt.Fprintf(a.stdout, "memd doctor --secrets: %s\n", visible(a.cfg.Repo))
		for _, f := range found {
			fmt.Fprintf(a.stdout, "  secret  commit %s  %s:%d  rule %s\n", f.Commit[:min(12, len(f.Commit))], visible(f.Path), f.Line, visible(f.Rule))
		}
		fmt.Fprintf(a.stdout, "%d %s in history\n", len(found), pluralWord(len(found), "secret", "secrets"))
		if len(found) > 0 {
			fmt.Fprintf(a.stdout, "  advice: %s\n", secretsAdvice)
		}
	}
	if len(found) > 0 {
		return exitFailed
	}
	return exitOK
}

func adviceIf(found bool) string {
	if found {
		return secretsAdvice
	}
	return ""
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// visible quotes a name that holds characters a terminal would act on (docs/ARCHITECTURE.md §11 "Human
// output"); a plain name is printed as it is.
func visible(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}
