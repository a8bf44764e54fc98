// Command history benchmarks memd's history commands against git on a generated history
// (gen.go: git fast-import; edits, renames, archive moves, deletes and restores) and prints
// a Markdown table of the ratios, all measured in one run on the same repo:
//
//   - `memd log PATH` against `git log --follow -- PATH`, before git's commit-graph exists
//     (memd's first walk has git write it: pathlog.KeepGraph) and after;
//
//   - `memd restore` of a memory deleted in the last commit (target at most 0.1 s) and of
//     one deleted -ago commits back against `git log --diff-filter=D -1 -- PATH` + `git show`;
//
//   - the page's first 20 history entries (GET /history?limit=20 of a running `memd run`;
//     target at most 0.5 s);
//
//   - daemon start-up, a 1-file commit (write to ref moved) and `memd status`, on this repo
//     against one of 100 commits with the same tree (target at most 1.1x).
//
//     go run ./bench/history -commits 200000
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

func main() {
	commits := flag.Int("commits", 200000, "commits in the generated history")
	memories := flag.Int("memories", 2000, "memories in the generated history")
	ago := flag.Int("ago", 100000, "how many commits back the older deleted memory was deleted")
	reps := flag.Int("reps", 3, "timed runs of each command (median reported)")
	work := flag.String("work", "", "generate into (or reuse) this directory instead of a temp one")
	flag.Parse()
	g := &genPlan{n: *commits, m: *memories, ago: min(*ago, *commits/2)}
	if err := run(g, *work, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "bench/history:", err)
		os.Exit(1)
	}
}

var gitEnv = append(os.Environ(),
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid",
	"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")

func sh(dir string, env []string, name string, args ...string) error {
	_, err := shOut(dir, env, name, args...)
	return err
}

func shOut(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// timed is the median wall time of reps runs of f (before runs first, untimed, when set).
func timed(reps int, before func() error, f func() error) (time.Duration, error) {
	var ds []time.Duration
	for range reps {
		if before != nil {
			if err := before(); err != nil {
				return 0, err
			}
		}
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], nil
}

// timedPair is the medians of reps runs of a and of b taken in turn (a, b, a, b...), so a
// noisy neighbour weighs on both alike; before runs, untimed, ahead of every run.
func timedPair(reps int, before, a, b func() error) (time.Duration, time.Duration, error) {
	var das, dbs []time.Duration
	for range reps {
		for _, x := range []struct {
			f  func() error
			ds *[]time.Duration
		}{{a, &das}, {b, &dbs}} {
			d, err := timed(1, before, x.f)
			if err != nil {
				return 0, 0, err
			}
			*x.ds = append(*x.ds, d)
		}
	}
	med := func(ds []time.Duration) time.Duration {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[len(ds)/2]
	}
	return med(das), med(dbs), nil
}

type result struct {
	what, memd, git, ratio, target string
}

func sec(d time.Duration) string { return fmt.Sprintf("%.3f s", d.Seconds()) }

func ratio(a, b time.Duration) string { return fmt.Sprintf("%.2fx", a.Seconds()/b.Seconds()) }

func run(g *genPlan, work string, reps int) error {
	if work == "" {
		tmp, err := os.MkdirTemp("", "bench-history-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		work = tmp
	}
	home := filepath.Join(work, "home")
	big, small := filepath.Join(home, "big"), filepath.Join(home, "small")
	bin := filepath.Join(work, "memd")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	if err := sh(".", os.Environ(), "go", "build", "-o", bin, "./cmd/memd"); err != nil {
		return err
	}
	t0 := time.Now()
	if err := g.prepare(big, small); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench/history: %d commits generated in %s\n", g.n, time.Since(t0).Round(time.Second))
	e := env(home)
	var rs []result
	logRows, err := g.benchLog(bin, big, e, reps)
	if err != nil {
		return err
	}
	rs = append(rs, logRows...)
	restoreRows, err := g.benchRestore(bin, big, e, reps)
	if err != nil {
		return err
	}
	rs = append(rs, restoreRows...)
	daemonRows, err := g.benchDaemon(bin, home, big, small, reps)
	if err != nil {
		return err
	}
	rs = append(rs, daemonRows...)
	fmt.Printf("history benchmark: %d commits over %d memories (renames, archive moves, deletes), median of %d runs, load average %s\n\n",
		g.n, g.m, reps, loadavg())
	fmt.Println("| measure | memd | reference | ratio | target |")
	fmt.Println("| --- | ---: | ---: | ---: | --- |")
	for _, r := range rs {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.what, r.memd, r.git, r.ratio, r.target)
	}
	return nil
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// prepare generates the big repo (kept when work is reused) and a 100-commit one with the
// same tree at its tip: the big tip's files committed, then 99 one-file edits.
func (g *genPlan) prepare(big, small string) error {
	g.paths()
	if _, err := os.Stat(filepath.Join(big, ".git")); err != nil {
		_ = os.RemoveAll(small)
		if err := os.MkdirAll(big, 0o755); err != nil {
			return err
		}
		if err := g.generate(big); err != nil {
			return err
		}
		if err := sh(big, gitEnv, "git", "reset", "-q", "--hard"); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(small, ".git")); err == nil {
		return nil
	}
	_ = os.RemoveAll(small)
	if err := os.MkdirAll(small, 0o755); err != nil {
		return err
	}
	if err := sh(small, gitEnv, "git", "init", "-q", "-b", "main"); err != nil {
		return err
	}
	if err := sh(small, gitEnv, "sh", "-c", "git -C "+big+" archive HEAD | tar -x && git add -A && git commit -qm tip"); err != nil {
		return err
	}
	for i := 1; i < 100; i++ {
		p := filepath.Join(small, memPath(100+i))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("<p>small %d</p>\n", i)), 0o644); err != nil {
			return err
		}
		if err := sh(small, gitEnv, "sh", "-c", fmt.Sprintf("git add -A && git commit -qm 'edit %d'", i)); err != nil {
			return err
		}
	}
	return nil
}

func env(home string) []string {
	var e []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GIT_") || strings.HasPrefix(k, "MEMD_") || strings.HasPrefix(k, "XDG_") || k == "HOME" {
			continue
		}
		e = append(e, kv)
	}
	return append(e, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid")
}
