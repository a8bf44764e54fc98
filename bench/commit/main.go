// Command commit measures memd's incremental commit against git on the same
// data in the same run (docs/ARCHITECTURE.md §3; target: 1 changed file in a 100k-file
// repo at ≤ 0.25x git).
//
// For each size it writes a memory repo of N small files (its own simple
// generator: PARA-like folders, ~100 files a folder), commits it with git,
// packs it (the steady state after memd's nightly gc), and copies it twice
// with cp -a. On one copy it times memd's CommitPaths; on the other
// `git add -A && git commit -q`; each with the same changed files, median of
// -reps runs after one untimed warm-up (memd is a long-running agent; git's
// warm-up refreshes the stat cache the copy invalidated). memd's index
// refresh (scheduled by each commit, in the background) is reported apart.
//
//	go run ./bench/commit -sizes 1000,10000,100000 -reps 5
//
// With -hooks both copies get the same git hooks (benchHooks) and memd runs them as git
// does (sync/githooks): memd's commit with hooks against `git commit` with them.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memd-dev/memd/sync/gitrepo"
)

func main() {
	sizesFlag := flag.String("sizes", "1000,10000,100000", "comma-separated repo sizes (files)")
	reps := flag.Int("reps", 5, "timed repetitions per cell (median reported)")
	changedFlag := flag.String("changed", "1,20", "comma-separated numbers of changed files")
	keep := flag.Bool("keep", false, "keep the generated repos")
	hooks := flag.Bool("hooks", false, "the same git hooks (pre-commit, commit-msg, post-commit) in both copies; memd runs them as git does")
	flag.Parse()
	sizes, err := ints(*sizesFlag)
	if err != nil {
		fatal(fmt.Errorf("-sizes %q: %w", *sizesFlag, err))
	}
	changed, err := ints(*changedFlag)
	if err != nil {
		fatal(fmt.Errorf("-changed %q: %w", *changedFlag, err))
	}
	if *reps < 1 {
		fatal(fmt.Errorf("-reps %d: must be at least 1", *reps))
	}
	if _, err := exec.LookPath("git"); err != nil {
		fatal(fmt.Errorf("git not on PATH: %w", err))
	}
	type row struct {
		files, changed    int
		memd, git, idx    time.Duration
		open, firstCommit time.Duration
	}
	var rows []row
	var roots []string
	for _, n := range sizes {
		root, err := os.MkdirTemp("", "memd-bench-commit-")
		if err != nil {
			fatal(err)
		}
		base := filepath.Join(root, "base")
		t0 := time.Now()
		files, err := generate(base, n)
		if err != nil {
			fatal(err)
		}
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "initial"}, {"repack", "-adq"}, {"prune-packed"}} {
			if err := git(base, args...); err != nil {
				fatal(err)
			}
		}
		fmt.Fprintf(os.Stderr, "generated %d files in %s\n", n, time.Since(t0).Round(time.Millisecond))
		for _, k := range changed {
			if k > len(files) {
				continue
			}
			memdDir := filepath.Join(root, fmt.Sprintf("memd-%d", k))
			gitDir := filepath.Join(root, fmt.Sprintf("git-%d", k))
			for _, d := range []string{memdDir, gitDir} {
				if out, err := exec.Command("cp", "-a", base, d).CombinedOutput(); err != nil {
					fatal(fmt.Errorf("cp -a %s %s: %v: %s", base, d, err, out))
				}
			}
			if *hooks {
				for _, d := range []string{memdDir, gitDir} {
					if err := installHooks(d); err != nil {
						fatal(err)
					}
				}
			}
			// git's index holds the original inodes: refresh it (untimed),
			// as it would be in a repo git has been using.
			if err := git(gitDir, "update-index", "-q", "--refresh"); err != nil {
				fatal(err)
			}
			rng := rand.New(rand.NewSource(int64(n*31 + k)))
			pick := func() []string {
				idx := rng.Perm(len(files))[:k]
				out := make([]string, k)
				for i, j := range idx {
					out[i] = files[j]
				}
				return out
			}
			t1 := time.Now()
			repo, err := gitrepo.Open(memdDir, gitrepo.Options{
				Author: gitrepo.Author{Name: "bench", Email: "bench@example.invalid"}, Hostname: "bench",
			})
			if err != nil {
				fatal(err)
			}
			open := time.Since(t1)
			if *hooks {
				repo.SetGitHooks(repo.GitHooks(true, ""))
			}
			var memdTimes, gitTimes, idxTimes []time.Duration
			var first time.Duration
			for rep := 0; rep <= *reps; rep++ {
				paths := pick()
				for _, d := range []string{memdDir, gitDir} {
					if err := touch(d, paths, rep); err != nil {
						fatal(err)
					}
				}
				t := time.Now()
				res, err := repo.CommitPaths(paths)
				el := time.Since(t)
				if err != nil {
					fatal(err)
				}
				if len(res.Changes) != k {
					fatal(fmt.Errorf("memd committed %d changes, want %d", len(res.Changes), k))
				}
				// The refresh the commit scheduled, off the critical path:
				// timed from the commit's return until it is written.
				t = time.Now()
				repo.WaitIndexRefresh()
				idxEl := time.Since(t)
				t = time.Now()
				if err := gitSh(gitDir, fmt.Sprintf("git add -A && git commit -q -m 'rep %d'", rep)); err != nil {
					fatal(err)
				}
				gitEl := time.Since(t)
				if rep == 0 {
					first = el // warm-up: not in the medians
					continue
				}
				memdTimes = append(memdTimes, el)
				gitTimes = append(gitTimes, gitEl)
				idxTimes = append(idxTimes, idxEl)
			}
			_ = repo.Close()
			// Same content on both sides, and git agrees memd's tree is clean.
			if err := sameTree(memdDir, gitDir); err != nil {
				fatal(err)
			}
			if *hooks {
				if err := hooked(memdDir); err != nil {
					fatal(err)
				}
			}
			rows = append(rows, row{files: n, changed: k, memd: median(memdTimes), git: median(gitTimes),
				idx: median(idxTimes), open: open, firstCommit: first})
			fmt.Fprintf(os.Stderr, "%d files, %d changed: memd %s, git %s\n", n, k,
				median(memdTimes).Round(time.Microsecond), median(gitTimes).Round(time.Microsecond))
		}
		roots = append(roots, root)
	}
	fmt.Printf("| files | changed | memd ms | git ms | ratio |\n| ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Printf("| %d | %d | %.2f | %.2f | %.3fx |\n", r.files, r.changed, ms(r.memd), ms(r.git), float64(r.memd)/float64(r.git))
	}
	fmt.Printf("\nmemd extras (not on the commit path): Open, first (cold) commit, index refresh median.\n\n")
	fmt.Printf("| files | changed | open ms | cold commit ms | index refresh ms |\n| ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rows {
		fmt.Printf("| %d | %d | %.2f | %.2f | %.2f |\n", r.files, r.changed, ms(r.open), ms(r.firstCommit), ms(r.idx))
	}
	// Removing 100k-file trees takes a while: after the table is out.
	for _, root := range roots {
		if *keep {
			fmt.Fprintf(os.Stderr, "kept %s\n", root)
		} else {
			os.RemoveAll(root)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// generate writes n small memory-like files, ~100 a folder, two folder
// levels under the PARA buckets, and returns their repo-relative paths.
func generate(dir string, n int) ([]string, error) {
	buckets := []string{"projects", "areas", "resources", "archive"}
	var files []string
	body := strings.Repeat("A remembered fact, with enough words to look like a note. ", 12)
	for i := 0; i < n; i++ {
		folder := i / 100
		rel := fmt.Sprintf("%s/g%03d/f%03d/2025%02d%02d-memory-%06d.html",
			buckets[folder%4], folder/40%1000, folder%40, i%12+1, i%28+1, i)
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
		}
		content := fmt.Sprintf("<!doctype html>\n<title>memory %d</title>\n<article><p><mark>%d</mark> %s</p></article>\n", i, i, body)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return nil, err
		}
		files = append(files, rel)
	}
	return files, nil
}

// touch appends a line to each path, the same bytes in both copies.
func touch(dir string, paths []string, rep int) error {
	for _, p := range paths {
		f, err := os.OpenFile(filepath.Join(dir, filepath.FromSlash(p)), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(f, "<!-- rep %d -->\n", rep)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// gitEnv isolates git from the machine's config and turns off auto gc: a
// detached `gc --auto` after the 100k-file initial commit races cp -a and
// would load the machine during the timed runs of both sides.
func gitEnv() []string {
	return append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid")
}

func git(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}

func gitSh(dir, script string) error {
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s in %s: %v: %s", script, dir, err, out)
	}
	return nil
}

// sameTree checks both copies ended at the same tree and memd's work tree
// is clean for git.
func sameTree(memdDir, gitDir string) error {
	var trees [2]string
	for i, d := range []string{memdDir, gitDir} {
		cmd := exec.Command("git", "rev-parse", "HEAD^{tree}")
		cmd.Dir = d
		cmd.Env = gitEnv()
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("rev-parse in %s: %w", d, err)
		}
		trees[i] = strings.TrimSpace(string(out))
	}
	if trees[0] != trees[1] {
		return fmt.Errorf("trees differ: memd %s, git %s", trees[0], trees[1])
	}
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = memdDir
	cmd.Env = gitEnv()
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git status in %s: %w", memdDir, err)
	}
	if len(out) != 0 {
		return fmt.Errorf("memd copy not clean for git: %.200s", out)
	}
	return nil
}

// benchHooks are a team's usual hooks: pre-commit looks at the staged files for a
// forbidden word, commit-msg adds a trailer with git's interpret-trailers, post-commit
// does nothing.
var benchHooks = map[string]string{
	"pre-commit":  "#!/bin/sh\n! git diff --cached --name-only -z --diff-filter=ACM | xargs -0 -r grep -l FORBIDDEN --\n",
	"commit-msg":  "#!/bin/sh\nexec git interpret-trailers --in-place --trailer 'Hooked-By: bench' \"$1\"\n",
	"post-commit": "#!/bin/sh\nexit 0\n",
}

// hooked checks that commit-msg's trailer is on memd's last commit: the hooks ran.
func hooked(dir string) error {
	cmd := exec.Command("git", "log", "-1", "--format=%(trailers:key=Hooked-By,valueonly)")
	cmd.Dir, cmd.Env = dir, gitEnv()
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "bench" {
		return fmt.Errorf("memd's commit in %s has no commit-msg trailer (%q, %v)", dir, out, err)
	}
	return nil
}

func installHooks(dir string) error {
	hd := filepath.Join(dir, ".git", "hooks")
	if err := os.MkdirAll(hd, 0o755); err != nil {
		return err
	}
	for name, body := range benchHooks {
		if err := os.WriteFile(filepath.Join(hd, name), []byte(body), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/commit:", err)
	os.Exit(1)
}
