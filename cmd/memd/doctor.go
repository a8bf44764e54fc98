package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agents/claudecode"
	"github.com/memd-dev/memd/doctor"
	"github.com/memd-dev/memd/internal/repofiles"
)

func init() { register("doctor", "read-only health report; exit 1 when a problem is found", cmdDoctor) }

func cmdDoctor(a *app, args []string) int {
	fs := a.flags("doctor", "")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	scanSecrets := fs.Bool("secrets", false, "scan the whole history for secrets (gitleaks' rules): commit, path, rule of each; exit 1 when found")
	repairGit := fs.Bool("repair", false, "heal what a crash left in .git (corrupt objects, index, HEAD, refs) now, as memd run would")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if *scanSecrets {
		return doctorSecrets(a, *asJSON) // doctor_secrets.go
	}
	if _, err := os.Stat(a.cfg.Repo); err != nil {
		return a.fail("doctor: %v", err)
	}
	ign, err := repofiles.New(a.cfg.Repo, a.cfg.Watch.Ignore)
	if err == nil {
		ign = ign.WithLockFile(a.cfg.Lock.File)
	}
	if err != nil {
		return a.fail("doctor: ignore rules: %v", err)
	}
	var progress io.Writer
	if !*asJSON && isTerminal(os.Stderr) {
		progress = a.stderr
	}
	rep, err := doctor.Check(a.cfg.Repo, doctor.Options{
		Ledger: a.cfg.Expire.Ledger, LockFile: a.cfg.Lock.File, Ignored: ign.Ignored, Progress: progress,
	})
	if err != nil {
		return a.fail("doctor: %v", err)
	}
	doctorClaudeCode(a, rep)
	helper := doctorRemote(a, rep)                        // doctor_remote.go
	if err := doctorGit(a, rep, *repairGit); err != nil { // doctor_git.go
		return a.fail("doctor: %v", err)
	}
	addFilterFindings(rep, a.cfg.Repo) // doctor_filters.go
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doctorJSON{Report: rep, RemoteHelper: helper})
	} else {
		say(a.stdout, "memd doctor: %s\n", rep.Repo)
		fmt.Fprintf(a.stdout, "  %d files, %d memories, inbox %d, task inbox %d (%s)\n", rep.Files, rep.Memories, rep.Inbox, rep.TaskInbox, rep.Elapsed)
		if helper != nil {
			say(a.stdout, "  remote %s (%s) goes through git's remote helper git-remote-%s: memd runs git fetch, git ls-remote and git push for it\n", helper.Remote, helper.URL, helper.Helper)
		}
		if len(rep.Filters) > 0 {
			say(a.stdout, "  git filters in use: %s\n", strings.Join(rep.Filters, ", "))
		}
		for _, f := range rep.Findings {
			where := f.Path
			if where != "" {
				where += ": "
			}
			say(a.stdout, "  %-7s %-9s %s%s\n", f.Severity, f.Check, where, f.Message)
		}
		fmt.Fprintf(a.stdout, "%d %s, %d %s\n", rep.Problems, plural(rep.Problems, "problem", "problems"), rep.Warnings, plural(rep.Warnings, "warning", "warnings"))
	}
	if rep.Problems > 0 {
		return exitFailed
	}
	return exitOK
}

// isTerminal reports whether f is a character device (a terminal), for progress lines.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// doctorClaudeCode names, as warnings, the Claude Code projects whose memory is not kept in
// the repo (agents.claude_code.memory on), each with why.
func doctorClaudeCode(a *app, rep *doctor.Report) {
	cc := a.cfg.Agents.ClaudeCode
	if !cc.Memory {
		return
	}
	home, _ := os.UserHomeDir()
	roots := make([]string, len(cc.Roots))
	for i, r := range cc.Roots {
		roots[i] = memd.ExpandHome(r)
	}
	scan := claudecode.Scan(claudecode.Options{ConfigDir: claudecode.ConfigDir(memd.ExpandHome(cc.ConfigDir), home),
		Home: home, Roots: claudecode.Abs(roots)})
	for _, p := range scan.Unsynced {
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Warning, Check: "claude-code", Path: p.Path,
			Message: "Claude Code's memory of this project is not synced: " + p.Reason})
		rep.Warnings++
	}
}
