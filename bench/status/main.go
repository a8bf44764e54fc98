// Command status benchmarks `memd status` as a process against `git status --porcelain` on
// the same repo (1k and 100k files by default) and against a minimal Go program that reads
// one small file and prints it, and prints a Markdown table with the ratios. The target is
// memd status <= 2x the minimal program. It also sums GODEBUG=inittrace=1 by module so the
// cost of package initialisation shows.
//
//	go run ./bench/status -files 1000,100000 -runs 200
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/metrics/statusline/statuslinetest"
)

func main() {
	files := flag.String("files", "1000,100000", "comma-separated repo sizes (files)")
	runs := flag.Int("runs", 200, "timed runs per command (median reported)")
	keep := flag.Bool("keep", false, "keep the work directory")
	flag.Parse()
	if err := run(*files, *runs, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench/status:", err)
		os.Exit(1)
	}
}

var gitEnv = append(os.Environ(),
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.invalid",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.invalid",
	"GIT_TERMINAL_PROMPT=0", "LC_ALL=C")

func sh(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return nil
}

const minimalSrc = `package main

import (
	"fmt"
	"os"
)

func main() {
	b, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Println("memd: not started")
		return
	}
	fmt.Print(string(b))
}
`

// liteSrc is memd status with nothing but the statusline package: the floor a fast path
// inside memd could reach.
const liteSrc = `package main

import (
	"fmt"
	"os"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

func main() {
	out, _ := statusline.Show(os.Args[1], "plain", time.Now(), nil)
	fmt.Println(out)
}
`

func run(sizes string, runs int, keep bool) error {
	work, err := os.MkdirTemp("", "memd-bench-status")
	if err != nil {
		return err
	}
	if keep {
		fmt.Fprintln(os.Stderr, "work dir:", work)
	} else {
		defer os.RemoveAll(work)
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(work, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	// memd as `make build` and `make install` build it (static, CGO_ENABLED=0), and as a plain
	// `go install` on a machine with a C compiler does (linked to libc through cgo, so every
	// start also runs the dynamic loader).
	memd := filepath.Join(bin, "memd")
	if err := sh(root, append(os.Environ(), "CGO_ENABLED=0"), "go", "build", "-trimpath", "-o", memd, "./cmd/memd"); err != nil {
		return err
	}
	memdCgo := filepath.Join(bin, "memd-cgo")
	if err := sh(root, append(os.Environ(), "CGO_ENABLED=1"), "go", "build", "-trimpath", "-o", memdCgo, "./cmd/memd"); err != nil {
		return err
	}
	// The minimal program, as its own module.
	mdir := filepath.Join(work, "minimal")
	os.MkdirAll(mdir, 0o755)
	os.WriteFile(filepath.Join(mdir, "go.mod"), []byte("module minimal\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(mdir, "main.go"), []byte(minimalSrc), 0o644)
	minimal := filepath.Join(bin, "minimal")
	if err := sh(mdir, os.Environ(), "go", "build", "-o", minimal, "."); err != nil {
		return err
	}
	// The statusline-only program, inside this module so it can import the package.
	ldir, err := os.MkdirTemp(filepath.Join(root, "bench", "status"), "lite")
	if err != nil {
		return err
	}
	os.WriteFile(filepath.Join(ldir, "main.go"), []byte(liteSrc), 0o644)
	lite := filepath.Join(bin, "lite")
	err = sh(root, os.Environ(), "go", "build", "-o", lite, "./"+filepath.ToSlash(mustRel(root, ldir)))
	os.RemoveAll(ldir)
	if err != nil {
		return err
	}

	// memd must not read the user's config.
	env := append(os.Environ(), "MEMD_CONFIG=", "XDG_CONFIG_HOME="+filepath.Join(work, "xdg"))

	type row struct {
		files                                       int
		memd, cgo, config, slow, lite, minimal, git timing
		initTot, slowInit                           time.Duration
	}
	var rows []row
	var initGroups map[string]float64
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("-files %q: %v", s, err)
		}
		repo := filepath.Join(work, fmt.Sprintf("repo-%d", n))
		fmt.Fprintf(os.Stderr, "making a %d-file repo...\n", n)
		if err := makeRepo(repo, n); err != nil {
			return err
		}
		d := statusline.Compose(statuslinetest.Fixtures()[statusline.StateOK])
		d.PID = os.Getpid()
		d.Repo = repo
		if err := statusline.Write(statusline.Dir(repo), d); err != nil {
			return err
		}
		plainFile := filepath.Join(statusline.Dir(repo), "status.plain")
		// Sanity: all print the same line.
		want, _ := statusline.Render(&d, "plain", time.Now(), nil)
		for _, c := range [][]string{{memd, "status", "--repo", repo}, {memdCgo, "status", "--repo", repo}, {lite, repo}, {minimal, plainFile}} {
			out, err := exec.Command(c[0], c[1:]...).Output()
			if err != nil || strings.TrimSpace(string(out)) != want {
				return fmt.Errorf("%v printed %q (%v), want %q", c, out, err, want)
			}
		}
		cenv, err := configEnv(work, repo)
		if err != nil {
			return err
		}
		vouch := exec.Command(memd, "status")
		vouch.Env = cenv
		if out, err := vouch.Output(); err != nil || strings.TrimSpace(string(out)) != want {
			return fmt.Errorf("memd status with a config file printed %q (%v), want %q", out, err, want)
		}
		// Interleaved, so a burst of load from elsewhere on the machine falls on every command
		// alike instead of on whichever one was being timed.
		ts := timeAll(runs, []command{
			{env, []string{memd, "status", "--repo", repo}, 1},
			{env, []string{memdCgo, "status", "--repo", repo}, 1},
			{cenv, []string{memd, "status"}, 1},
			{append(env[:len(env):len(env)], "MEMD_NO_FASTPATH=1"), []string{memd, "status", "--repo", repo}, 1},
			{env, []string{lite, repo}, 1},
			{env, []string{minimal, plainFile}, 1},
			{gitEnv, []string{"git", "-C", repo, "status", "--porcelain"}, 10},
		})
		r := row{files: n, memd: ts[0], cgo: ts[1], config: ts[2], slow: ts[3], lite: ts[4], minimal: ts[5], git: ts[6]}
		r.initTot, initGroups = inittrace(env, 21, memd, "status", "--repo", repo)
		r.slowInit, _ = inittrace(append(env[:len(env):len(env)], "MEMD_NO_FASTPATH=1"), 21, memd, "status", "--repo", repo)
		rows = append(rows, r)
	}

	fmt.Printf("`memd status` as a process: median wall time and median CPU time (user+sys) of %d runs (git: %d), the commands interleaved round by round; `go run ./bench/status`\n\n", runs, runs/10)
	fmt.Println("| files | command | wall | CPU | wall / minimal | CPU / minimal | wall / git |")
	fmt.Println("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, r := range rows {
		for _, c := range []struct {
			name string
			t    timing
		}{{"memd status (static build: make build, make install)", r.memd}, {"memd status, cgo-linked build (plain go install)", r.cgo},
			{"memd status, repo from a config file", r.config},
			{"memd status, MEMD_NO_FASTPATH=1", r.slow}, {"statusline-only program (decodes status.json)", r.lite},
			{"minimal Go program (read one file, print it)", r.minimal}, {"git status --porcelain", r.git}} {
			fmt.Printf("| %d | %s | %s | %s | %.2fx | %.2fx | %.3fx |\n", r.files, c.name, ms(c.t.wall), ms(c.t.cpu),
				float64(c.t.wall)/float64(r.minimal.wall), float64(c.t.cpu)/float64(r.minimal.cpu), float64(c.t.wall)/float64(r.git.wall))
		}
	}
	fmt.Println()
	fmt.Println("| files | package init, fast path | package init, MEMD_NO_FASTPATH=1 |")
	fmt.Println("| ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s |\n", r.files, ms(r.initTot), ms(r.slowInit))
	}
	fmt.Println()
	fmt.Println("Package init in `memd status` (fast path) by module (GODEBUG=inittrace=1, median of 21 runs, ms):")
	fmt.Println()
	type g struct {
		name string
		ms   float64
	}
	var gs []g
	for k, v := range initGroups {
		gs = append(gs, g{k, v})
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].ms > gs[j].ms })
	fmt.Println("| module | init ms |")
	fmt.Println("| --- | ---: |")
	for i, x := range gs {
		if i == 12 {
			break
		}
		fmt.Printf("| %s | %.3f |\n", x.name, x.ms)
	}
	return nil
}

// configEnv is an environment whose config file names repo, old enough for the full command
// to vouch for it (internal/fastpath/config.go); the sanity run in the caller does that.
func configEnv(work, repo string) ([]string, error) {
	xdg := filepath.Join(work, "xdg-"+filepath.Base(repo))
	cfg := filepath.Join(xdg, "memd", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(cfg, []byte("repo: "+repo+"\n"), 0o644); err != nil {
		return nil, err
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(cfg, old, old); err != nil {
		return nil, err
	}
	return append(os.Environ(), "MEMD_CONFIG=", "XDG_CONFIG_HOME="+xdg, "XDG_CACHE_HOME="+filepath.Join(work, "cache")), nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

func mustRel(base, p string) string {
	r, err := filepath.Rel(base, p)
	if err != nil {
		panic(err)
	}
	return r
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run inside the memd module")
	}
	return filepath.Dir(mod), nil
}

// makeRepo writes n small memory files in 100-file directories and commits them.
func makeRepo(dir string, n int) error {
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, "projects", fmt.Sprintf("p%04d", i/100), fmt.Sprintf("20260101-m%06d.html", i))
		if i%100 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("<!doctype html><title>m%d</title><article><p><mark>fact %d</mark></p></article>\n", i, i)), 0o644); err != nil {
			return err
		}
	}
	for _, a := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "init"}} {
		if err := sh(dir, gitEnv, "git", a...); err != nil {
			return err
		}
	}
	return nil
}

// timing is the median wall time of a command and the median CPU time (user + system, from
// rusage) it used: on a busy machine the CPU time is the steadier of the two.
type timing struct{ wall, cpu time.Duration }

// command is one program to time; every is how often it runs (1: every round; 10: every
// tenth, for the slow git status).
type command struct {
	env   []string
	argv  []string
	every int
}

// timeAll runs the commands in rounds, each once per round (after a few rounds to warm the
// page cache), n rounds, and returns the median timing of each.
func timeAll(n int, cmds []command) []timing {
	walls := make([][]time.Duration, len(cmds))
	cpus := make([][]time.Duration, len(cmds))
	for round := 0; round < n+5; round++ {
		for i, c := range cmds {
			if round%c.every != 0 && round >= 5 {
				continue
			}
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Env = c.env
			start := time.Now()
			if err := cmd.Run(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", c.argv[0], err)
			}
			if round >= 5 {
				walls[i] = append(walls[i], time.Since(start))
				cpus[i] = append(cpus[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
			}
		}
	}
	out := make([]timing, len(cmds))
	for i := range cmds {
		out[i] = timing{median(walls[i]), median(cpus[i])}
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

// inittrace runs the command n times with GODEBUG=inittrace=1 and returns the median total
// init time and the median per module group.
func inittrace(env []string, n int, name string, args ...string) (time.Duration, map[string]float64) {
	var totals []float64
	per := map[string][]float64{}
	for i := 0; i < n; i++ {
		cmd := exec.Command(name, args...)
		cmd.Env = append(append([]string(nil), env...), "GODEBUG=inittrace=1")
		var errb bytes.Buffer
		cmd.Stderr = &errb
		_ = cmd.Run()
		sum := 0.0
		groups := map[string]float64{}
		for _, l := range strings.Split(errb.String(), "\n") {
			f := strings.Fields(l)
			// init <pkg> @<t> ms, <clock> ms clock, <bytes> bytes, <allocs> allocs
			if len(f) < 5 || f[0] != "init" {
				continue
			}
			v, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				continue
			}
			sum += v
			groups[group(f[1])] += v
		}
		totals = append(totals, sum)
		for k, v := range groups {
			per[k] = append(per[k], v)
		}
	}
	med := func(x []float64) float64 {
		sort.Float64s(x)
		return x[len(x)/2]
	}
	out := map[string]float64{}
	for k, v := range per {
		for len(v) < n {
			v = append(v, 0)
		}
		out[k] = med(v)
	}
	return time.Duration(med(totals) * 1e6), out
}

// group maps a package to the module (or std) it belongs to.
func group(pkg string) string {
	switch {
	case strings.HasPrefix(pkg, "google.golang.org/protobuf"):
		return "google.golang.org/protobuf (via client_golang)"
	case strings.HasPrefix(pkg, "github.com/prometheus/"):
		return "github.com/prometheus/*"
	case strings.HasPrefix(pkg, "github.com/go-git/"), strings.HasPrefix(pkg, "github.com/ProtonMail/"),
		strings.HasPrefix(pkg, "github.com/cloudflare/"), strings.HasPrefix(pkg, "github.com/kevinburke/"),
		strings.HasPrefix(pkg, "github.com/sergi/"), strings.HasPrefix(pkg, "github.com/skeema/"),
		strings.HasPrefix(pkg, "github.com/pjbgf/"), strings.HasPrefix(pkg, "github.com/emirpasic/"),
		strings.HasPrefix(pkg, "golang.org/x/crypto"):
		return "go-git and its deps"
	case strings.HasPrefix(pkg, "github.com/memd-dev/"):
		return "memd"
	case !strings.Contains(strings.SplitN(pkg, "/", 2)[0], "."):
		return "std"
	}
	parts := strings.Split(pkg, "/")
	if len(parts) > 3 {
		parts = parts[:3]
	}
	return strings.Join(parts, "/")
}
