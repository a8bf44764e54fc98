package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd/sync/gitrepo"
)

// benchLog times memd log against git log --follow, first without git's commit-graph (as
// fast-import leaves the repo), then with the one memd's first long walk had git write.
func (g *genPlan) benchLog(bin, big string, e []string, reps int) ([]result, error) {
	graph := filepath.Join(big, ".git", "objects", "info", "commit-graph")
	_ = os.Remove(graph)
	gitLog := func() error {
		return sh(big, gitEnv, "git", "log", "--follow", "--format=%H", "--", g.logPath)
	}
	memdLog := func() error { return sh(big, e, bin, "log", "--repo", big, g.logPath) }
	gitCold, err := timed(reps, nil, gitLog)
	if err != nil {
		return nil, err
	}
	memdCold, err := timed(1, nil, memdLog)
	if err != nil {
		return nil, err
	}
	// pathlog.KeepGraph has git write the graph after a walk of 20,000 commits; a smaller
	// run writes it as git gc would.
	if g.n < 20000 {
		if err := sh(big, gitEnv, "git", "commit-graph", "write", "--reachable", "--changed-paths"); err != nil {
			return nil, err
		}
	}
	if err := waitFile(graph, 5*time.Minute); err != nil {
		return nil, err
	}
	if err := g.sameLog(bin, big, e); err != nil {
		return nil, err
	}
	gitWarm, err := timed(reps, nil, gitLog)
	if err != nil {
		return nil, err
	}
	memdWarm, err := timed(reps, nil, memdLog)
	if err != nil {
		return nil, err
	}
	return []result{
		{"`memd log PATH` vs `git log --follow -- PATH`, no commit-graph (memd: its first run)", sec(memdCold), sec(gitCold), ratio(memdCold, gitCold), "≤ 1.0x"},
		{"`memd log PATH` vs `git log --follow -- PATH`, with the commit-graph memd's first walk had git write", sec(memdWarm), sec(gitWarm), ratio(memdWarm, gitWarm), "≤ 1.0x"},
	}, nil
}

// sameLog checks that memd log's commits are git's.
func (g *genPlan) sameLog(bin, big string, e []string) error {
	out, err := shOut(big, e, bin, "log", "--repo", big, "--json", g.logPath)
	if err != nil {
		return err
	}
	var es []struct{ Commit string }
	if err := json.Unmarshal([]byte(out), &es); err != nil {
		return err
	}
	var got []string
	for _, x := range es {
		got = append(got, x.Commit)
	}
	want, err := shOut(big, gitEnv, "git", "log", "--follow", "--format=%H", "--", g.logPath)
	if err != nil {
		return err
	}
	if strings.Join(got, "\n") != strings.TrimSpace(want) {
		return fmt.Errorf("memd log %s: %d commits, git log --follow: %d", g.logPath, len(got), len(strings.Fields(want)))
	}
	return nil
}

// benchRestore times memd restore of the memory deleted in the tip and of the one deleted
// ago commits back (the repo reset to its tip before each), and git finding and reading the
// same version.
func (g *genPlan) benchRestore(bin, big string, e []string, reps int) ([]result, error) {
	tip, err := shOut(big, gitEnv, "git", "rev-parse", "HEAD")
	if err != nil {
		return nil, err
	}
	reset := func() error { return sh(big, gitEnv, "git", "reset", "-q", "--hard", strings.TrimSpace(tip)) }
	var rs []result
	for _, c := range []struct{ name, path string }{{"the last commit", g.deletedLast}, {fmt.Sprintf("%d commits ago", g.ago), g.deletedOld}} {
		memdRestore := func() error { return sh(big, e, bin, "restore", "--repo", big, c.path) }
		if err := reset(); err != nil {
			return nil, err
		}
		if err := memdRestore(); err != nil {
			return nil, err
		}
		if _, err := shOut(big, gitEnv, "git", "cat-file", "-e", "HEAD:"+c.path); err != nil {
			return nil, fmt.Errorf("memd restore %s did not bring it back: %v", c.path, err)
		}
		gitFind := func() error {
			h, err := shOut(big, gitEnv, "git", "log", "--diff-filter=D", "-1", "--format=%H", "--", c.path)
			if err != nil {
				return err
			}
			return sh(big, gitEnv, "git", "show", strings.TrimSpace(h)+"^:"+c.path)
		}
		m, gt, err := timedPair(reps, reset, memdRestore, gitFind)
		if err != nil {
			return nil, err
		}
		target := "≤ 1.0x"
		if c.path == g.deletedLast {
			target = "≤ 0.1 s"
		}
		rs = append(rs, result{"`memd restore` of a memory deleted " + c.name + " vs `git log --diff-filter=D -1` + `git show`", sec(m), sec(gt), ratio(m, gt), target})
		// The history part alone (what the walk costs, without the process, the writer
		// lock and the commit): PlanRestore in this process.
		r, err := gitrepo.Open(big, gitrepo.Options{})
		if err != nil {
			return nil, err
		}
		pm, err := timed(reps, reset, func() error { _, _, err := r.History().PlanRestore(c.path, ""); return err })
		r.Close()
		if err != nil {
			return nil, err
		}
		rs = append(rs, result{"its history part: `gitrepo.PlanRestore` in process, vs the same git", sec(pm), sec(gt), ratio(pm, gt), target})
	}
	return rs, reset()
}

func waitFile(p string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(p); err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not appear in %s", p, d)
}
