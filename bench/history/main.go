// Command history benchmarks `memd log` and `memd restore` against git on a generated
// history (gen.go: git fast-import, renames, archive moves, deletes) and prints a Markdown
// table with the ratios.
//
//	go run ./bench/history -commits 200000
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func main() {
	commits := flag.Int("commits", 200000, "commits in the generated history")
	memories := flag.Int("memories", 2000, "memories in the generated history")
	dir := flag.String("dir", "", "generate into (or reuse) this directory instead of a temp one")
	genOnly := flag.Bool("gen", false, "only generate the repo")
	flag.Parse()
	g := &genPlan{n: *commits, m: *memories, ago: min(100000, *commits/2)}
	if err := run(g, *dir, *genOnly); err != nil {
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
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, errb.String())
	}
	return nil
}

func run(g *genPlan, dir string, genOnly bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := g.generate(dir); err != nil {
		return err
	}
	if genOnly {
		return nil
	}
	return nil
}
