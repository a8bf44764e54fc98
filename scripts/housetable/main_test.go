package main

import (
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
)

// A tree with one of each thing the table counts: a WalkDir walker, a recursive ReadDir
// walker, a walk of the git dir, a long function, a copied literal, a poll helper in a test,
// a hand-written contains; and a test file and a bench/ program that product figures skip.
func TestTableCountsEachKind(t *testing.T) {
	dir := t.TempDir()
	long := "func long() {\n" + strings.Repeat("\t_ = 1\n", 85) + "}\n"
	files := map[string]string{
		"go.mod": "module x\n",
		"a/a.go": `package a

import (
	"io/fs"
	"os"
	"path/filepath"
)

const lock = ".memory.lock"

func walk(root string) { _ = filepath.WalkDir(root, func(string, fs.DirEntry, error) error { return nil }) }

func rec(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.IsDir() {
			rec(filepath.Join(dir, e.Name()))
		}
	}
}

type repo struct{ gitDir string }

func (r *repo) refs() {
	root := filepath.Join(r.gitDir, "refs")
	_ = filepath.WalkDir(root, func(string, fs.DirEntry, error) error { return nil })
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}
` + long,
		"b/b.go": "package b\n\nvar name = \".memory.lock\"\n",
		"b/b_test.go": `package b

import "time"

func waitUntil(cond func() bool) {
	deadline := time.Now().Add(time.Second)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

var inTest = ".memory.lock"
`,
		"bench/x/main.go": "package main\n\nvar lock = \".memory.lock\"\n\nfunc main() {}\n",
	}
	got := table(t, dir, files)
	for _, want := range []string{
		"## Tree walkers: 2 of the work tree, 1 of the git dir",
		"- a/a.go:11 walk", "- a/a.go:13 rec", "- (git dir) a/a.go:24 repo.refs",
		"| lock file `\".memory.lock\"` | 2 | a/a.go:9, b/b.go:3 |",
		"| poll helper (sleep loop against a deadline) | 1 | b/b_test.go waitUntil |",
		"| hand-written slices/maps helper (contains, inList, equal, sortedKeys) | 1 | a/a.go contains |",
		"## Functions over 80 lines (product code): 1", "- 87 a/a.go long",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// The one-spelling rows: a re-export, the root importing the module, a --now parser, a worker
// pool, a trailer parser, and a test's run-git and write-file helpers.
func TestTableCountsSecondSpellings(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": "module github.com/memd-dev/memd\n",
		"root.go": `package memd

import _ "github.com/memd-dev/memd/c"
`,
		"c/c.go": `package c

import (
	"strings"
	"sync"
	"time"

	"github.com/memd-dev/memd/d"
)

type Kind = d.Kind

const Change = d.Change

func parseNow(now string) (time.Time, error) { return time.Parse(time.RFC3339, now) }

func pool(n int) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { defer wg.Done() }()
	}
	wg.Wait()
}

func trailers(msg string) []string { return strings.Split(msg, "\n") }
`,
		"c/c_test.go": `package c

import (
	"os"
	"os/exec"
	"testing"
)

func runGit(t *testing.T, args ...string) { _ = exec.Command("git", args...).Run() }

func writeFile(t *testing.T, p string) { _ = os.WriteFile(p, nil, 0o644) }
`,
	}
	got := table(t, dir, files)
	for _, want := range []string{
		"| re-export (a top-level name that is another package's) | 2 | c/c.go:11, c/c.go:13 |",
		"| the root's imports of the module | 1 | github.com/memd-dev/memd/c |",
		"| `--now` parser (parses the flag's RFC3339 time) | 1 | c/c.go parseNow |",
		"| worker pool (goroutines started in a loop, joined by a WaitGroup) | 1 | c/c.go pool |",
		"| trailer parser (splits a commit message's trailers) | 1 | c/c.go trailers |",
		"| run-git test helper (runs the git binary for a test) | 1 | c/c_test.go runGit |",
		"| write-file test helper (os.WriteFile for a test) | 1 | c/c_test.go writeFile |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

// table writes files into dir and returns the table run prints for it.
func table(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, body := range files {
		testutil.WriteFile(t, dir, name, body)
	}
	var out strings.Builder
	if err := run(&out, dir, 80); err != nil {
		t.Fatal(err)
	}
	return out.String()
}
