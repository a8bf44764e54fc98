// Command sync benchmarks memd's fetch + fast-forward and fetch + merge
// against `git pull --no-rebase` on identical copies of a repo, and prints
// a Markdown table with the ratios (target: memd < 2x git).
//
//	go run ./bench/sync -files 10000 -changes 100 -runs 5
//
// The fixture (fixture.go) is written once with git fast-import; each run
// works on fresh copies (cp -a) of the same clone, so memd and git see
// byte-identical repos. memd's time includes waiting for its
// background index refresh, so both sides end with an up-to-date index.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"

	"github.com/memd-dev/memd/sync/gitrepo"
)

func main() {
	files := flag.Int("files", 10000, "files in the repo")
	changes := flag.Int("changes", 100, "files changed on each side")
	runs := flag.Int("runs", 5, "runs per scenario (median reported)")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.StringVar(&baseDir, "base", "", "fixture directory to build once and reuse across invocations (default: a fresh one in the work directory)")
	verbose = flag.Bool("v", false, "print per-phase times of each run")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the memd runs")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench/sync:", err)
			os.Exit(1)
		}
		profile = f
	}
	if err := run(*files, *changes, *runs, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/sync:", err)
		os.Exit(1)
	}
}

var verbose *bool

// baseDir, when set, holds the fixture across invocations.
var baseDir string

// profile, when set, records a CPU profile around each memd run only.
var profile *os.File

var gitEnv = append(os.Environ(),
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid",
	"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")

func git(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s in %s: %w: %s", strings.Join(args, " "), dir, err, errb.String())
	}
	return nil
}

func cpTree(src, dst string) error {
	out, err := exec.Command("cp", "-a", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp -a %s %s: %w: %s", src, dst, err, out)
	}
	return nil
}

// memoryPath spreads n files over PARA folders, 100 per directory.
func memoryPath(i int) string {
	buckets := []string{"projects", "areas", "resources", "archive/2024"}
	return fmt.Sprintf("%s/d%03d/20240101-m%05d.html", buckets[i%4], i/100, i)
}

type scenario struct {
	name      string
	local     string // clone to copy for each run
	memd, git []time.Duration
}

func run(nFiles, nChanges, runs int, keep bool) error {
	work, err := os.MkdirTemp("", "memd-bench-sync-")
	if err != nil {
		return err
	}
	if !keep {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "work dir:", work)
	}
	base := baseDir
	if base == "" {
		base = filepath.Join(work, "base")
	}
	t0 := time.Now()
	if err := buildFixture(base, nFiles, nChanges); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fixture %s ready in %v\n", base, time.Since(t0).Round(time.Millisecond))
	behind := filepath.Join(base, "behind")
	diverged := filepath.Join(base, "diverged")

	scens := []*scenario{
		{name: fmt.Sprintf("fast-forward, %d changed files", nChanges), local: behind},
		{name: fmt.Sprintf("diverged merge, %d files each side", nChanges), local: diverged},
	}
	for _, sc := range scens {
		for r := 0; r < runs; r++ {
			gd := filepath.Join(work, fmt.Sprintf("git-%d", r))
			md := filepath.Join(work, fmt.Sprintf("memd-%d", r))
			if err := cpTree(sc.local, gd); err != nil {
				return err
			}
			if err := cpTree(sc.local, md); err != nil {
				return err
			}
			// git status once on both, so both start with a fresh stat cache;
			// then flush the copies to disk so neither side pays for cp's
			// dirty pages in its first fsync.
			_ = git(gd, "status", "-s")
			_ = git(md, "status", "-s")
			_ = exec.Command("sync").Run()

			start := time.Now()
			if err := git(gd, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main"); err != nil {
				return err
			}
			sc.git = append(sc.git, time.Since(start))

			if profile != nil {
				_ = pprof.StartCPUProfile(profile)
			}
			start = time.Now()
			opts := gitrepo.Options{Author: gitrepo.Author{Name: "bench", Email: "bench@example.invalid"}, Hostname: "bench"}
			if *verbose {
				opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}
			repo, err := gitrepo.Open(md, opts)
			if err != nil {
				return err
			}
			tOpen := time.Since(start)
			res, err := repo.Sync(context.Background(), gitrepo.RemoteOptions{})
			if err != nil {
				return err
			}
			tSync := time.Since(start)
			repo.WaitIndexRefresh()
			sc.memd = append(sc.memd, time.Since(start))
			if profile != nil {
				pprof.StopCPUProfile()
				profile = nil // one profile: the first memd run
			}
			if *verbose {
				fmt.Fprintf(os.Stderr, "%s run %d: open %v, sync %v, index %v; git %v\n", sc.name, r,
					tOpen.Round(time.Millisecond), (tSync - tOpen).Round(time.Millisecond),
					(time.Since(start) - tSync).Round(time.Millisecond), sc.git[len(sc.git)-1].Round(time.Millisecond))
			}
			_ = repo.Close()
			if res.Behind != 0 || (!res.FastForward && !res.Merged) {
				return fmt.Errorf("%s: unexpected result %+v", sc.name, res)
			}
			if err := sameTree(gd, md); err != nil {
				return fmt.Errorf("%s: %w", sc.name, err)
			}
			_ = os.RemoveAll(gd)
			_ = os.RemoveAll(md)
		}
	}

	fmt.Printf("sync benchmark: %d files, %d runs each, median wall time (memd includes fetch and index refresh)\n\n", nFiles, runs)
	fmt.Println("| scenario | memd | git pull --no-rebase | ratio memd/git |")
	fmt.Println("| --- | ---: | ---: | ---: |")
	for _, sc := range scens {
		m, g := median(sc.memd), median(sc.git)
		fmt.Printf("| %s | %s | %s | %.2fx |\n", sc.name, m.Round(time.Millisecond), g.Round(time.Millisecond), float64(m)/float64(g))
	}
	return nil
}

// sameTree checks that memd's result has the same tree as git's: same
// merge outcome, so the timing compares equal work.
func sameTree(gitDir, memdDir string) error {
	a, err := treeOf(gitDir)
	if err != nil {
		return err
	}
	b, err := treeOf(memdDir)
	if err != nil {
		return err
	}
	if a != b {
		return fmt.Errorf("trees differ: git %s memd %s", a, b)
	}
	return nil
}

func treeOf(dir string) (string, error) {
	cmd := exec.Command("git", "rev-parse", "HEAD^{tree}")
	cmd.Dir = dir
	cmd.Env = gitEnv
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
