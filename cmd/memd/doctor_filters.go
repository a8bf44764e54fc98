package main

import (
	"fmt"
	"strings"

	"github.com/memd-dev/memd/doctor"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// renormalizeAdvice is how to fix a blob git would not have stored, with git: memd never
// rewrites history (the old blob stays in the commits that have it).
const renormalizeAdvice = "re-store it with git: `git add --renormalize -- <path> && git commit` (for git-crypt, after `git-crypt unlock`); memd never rewrites history, so the old blob stays in the commits that have it"

// addFilterFindings adds doctor's look at git's filters and line endings (gitrepo.CheckFilters):
// the drivers in use, a locked git-crypt tree, and each committed blob `git add` would
// not have stored.
func addFilterFindings(rep *doctor.Report, repo string) {
	fc, err := gitrepo.CheckFilters(repo)
	if err != nil {
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Warning, Check: "filters", Message: fmt.Sprintf("cannot check filters: %v", err)})
		rep.Warnings++
		return
	}
	rep.Filters = fc.Drivers
	if len(fc.Locked) > 0 {
		msg := fmt.Sprintf("%d %s under a filter git config does not define here; memd commits no change to them", len(fc.Locked), plural(len(fc.Locked), "file", "files"))
		if gitrepo.LockedGitCrypt(repo, fc.Locked[0]) {
			msg = fmt.Sprintf("git-crypt locked: %d %s hold ciphertext in the work tree; memd commits no change to them until `git-crypt unlock`", len(fc.Locked), plural(len(fc.Locked), "file", "files"))
		}
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Warning, Check: "filters", Path: fc.Locked[0], Message: msg})
		rep.Warnings++
	}
	for _, d := range fc.Differ {
		why := "line endings (text/eol)"
		if d.Filter != "" {
			why = "filter " + d.Filter
		}
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Problem, Check: "filters", Path: d.Path,
			Message: fmt.Sprintf("the committed blob is not what `git add` stores under %s; %s", why, strings.ReplaceAll(renormalizeAdvice, "<path>", d.Path))})
		rep.Problems++
	}
}
