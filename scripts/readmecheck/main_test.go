package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd/internal/testutil"
)

// runText runs the marked blocks of readme in a temp dir and returns the error.
func runText(t *testing.T, readme string) error {
	t.Helper()
	blocks, err := Parse(readme)
	if err != nil {
		return err
	}
	dir, tmp, home := t.TempDir(), t.TempDir(), t.TempDir()
	var out bytes.Buffer
	err = Run(blocks, Options{Dir: dir, Env: environment(home, filepath.Join(dir, "bin")), Tmp: tmp, Stdout: &out})
	t.Logf("checker output:\n%s", out.String())
	return err
}

// lineOf is the 1-based README line holding s.
func lineOf(t *testing.T, readme, s string) int {
	t.Helper()
	for i, l := range strings.Split(readme, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("no line holds %q", s)
	return 0
}

const sample = "# Sample\n\nText.\n\n" +
	"<!-- readme-check -->\n```sh\n" +
	"echo one > f.txt\n" +
	"cat f.txt              # prints: one\n" +
	"printf 'a 12\\nb\\n'    # prints: a 7 / b\n" +
	"false                  # exit 1: fails on purpose\n" +
	"echo continued \\\n  here > g.txt\n" +
	"```\n\n" +
	"```sh\nsystemctl --user daemon-reload\n```\n\n" +
	"<!-- readme-check -->\n\n```sh\n" +
	"test \"$(cat g.txt)\" = 'continued here'\n" +
	"f=$(ls *.txt | head -1); test \"$f\" = f.txt   # state stays within a block\n" +
	"```\n"

// Marks, skip reasons and the line numbers the checker reports.
func TestParse(t *testing.T) {
	blocks, err := Parse(sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 || !blocks[0].Marked || blocks[1].Marked || !blocks[2].Marked {
		t.Fatalf("blocks %+v", blocks)
	}
	if blocks[0].Line != lineOf(t, sample, "echo one") {
		t.Errorf("first code line %d", blocks[0].Line)
	}
	if r := SkipReason(blocks[1]); !strings.Contains(r, "systemd") {
		t.Errorf("skip reason %q", r)
	}
	st := steps(blocks[0])
	if len(st) != 5 || st[1].prints[0] != "one" || st[2].prints[1] != "b" || st[3].exit != 1 || st[4].line != lineOf(t, sample, "echo continued") {
		t.Errorf("steps %+v", st)
	}
	if _, err := Parse("<!-- readme-check: backgrnd -->\n```sh\ntrue\n```\n"); err == nil || !strings.Contains(err.Error(), "README.md:1") {
		t.Errorf("a misspelt option: %v", err)
	}
	if _, err := Parse("<!-- readme-check: background -->\n```sh\ntrue\n```\n"); err == nil {
		t.Error("a background block without ready: was accepted")
	}
}

func TestRunSample(t *testing.T) {
	if err := runText(t, sample); err != nil {
		t.Fatal(err)
	}
}

// Breaking or removing a line fails the check naming the README line that failed.
func TestBrokenLineIsNamed(t *testing.T) {
	retryFor = time.Second
	defer func() { retryFor = time.Minute }()
	cases := []struct {
		name, old, new, failing string
	}{
		{"a command fails", "echo one > f.txt", "cat missing.txt > f.txt", "cat missing.txt"},
		{"output differs", "# prints: one", "# prints: two", "cat f.txt"},
		{"a line removed", "echo one > f.txt\n", "", "cat f.txt"},
		{"exit code differs", "false                  # exit 1", "true                   # exit 1", "true  "},
		{"second block", "= 'continued here'", "= 'continued there'", "continued there"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			broken := strings.Replace(sample, c.old, c.new, 1)
			if broken == sample {
				t.Fatal("the case changed nothing")
			}
			err := runText(t, broken)
			want := fmt.Sprintf("README.md:%d:", lineOf(t, broken, c.failing))
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one naming %s", err, want)
			}
		})
	}
}

// A background block runs until the end, then gets Ctrl-C's SIGINT; one that dies before it
// is ready fails naming its line.
func TestBackgroundBlock(t *testing.T) {
	readme := "<!-- readme-check: background; ready: test -e up -->\n```sh\n" +
		"trap 'echo stopped > down; exit 0' INT; touch up; while :; do sleep 0.1; done\n```\n\n" +
		"<!-- readme-check -->\n```sh\ntest -e up\n```\n"
	blocks, err := Parse(readme)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out bytes.Buffer
	if err := Run(blocks, Options{Dir: dir, Env: environment(t.TempDir(), dir), Tmp: t.TempDir(), Stdout: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	testutil.WaitFor(t, "the background block to get SIGINT", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "down"))
		return string(b) == "stopped\n"
	}, nil)

	dies := "<!-- readme-check: background; ready: test -e never -->\n```sh\nexit 3\n```\n"
	if err := runText(t, dies); err == nil || !strings.Contains(err.Error(), "README.md:3:") || !strings.Contains(err.Error(), "exited before it was ready") {
		t.Errorf("a background block that dies: %v", err)
	}
}

// The real README: its plain-git block runs as written against a memd built from this tree,
// and breaking or removing one of its lines fails naming that line. (make readme-check runs
// the whole README, quickstart included.)
func TestRealReadmeBlockBreaks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	bin, remove, err := testutil.BuildMemd()
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "memd")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	real := string(data)
	run := func(readme string) error {
		blocks, err := Parse(readme)
		if err != nil {
			return err
		}
		var only []Block
		for _, b := range blocks {
			if b.Marked && strings.Contains(strings.Join(b.Lines, "\n"), "shared-memory") {
				only = append(only, b)
			}
		}
		if len(only) != 1 {
			t.Fatalf("want the one plain-git block, found %d", len(only))
		}
		var out bytes.Buffer
		err = Run(only, Options{Dir: t.TempDir(), Env: environment(t.TempDir(), binDir), Tmp: t.TempDir(), Stdout: &out})
		t.Logf("checker output:\n%s", out.String())
		return err
	}
	if err := run(real); err != nil {
		t.Fatalf("the README's block as written: %v", err)
	}
	retryFor = 2 * time.Second
	defer func() { retryFor = time.Minute }()
	commit := "git -C ~/shared-memory commit -qm 'my own note'\n"
	for name, c := range map[string]struct{ old, new, failing string }{
		"removed": {commit, "", "[ahead 1]"},
		"broken":  {"git -C ~/shared-memory pull", "git -C ~/shared-memory pul", "shared-memory pul "},
	} {
		t.Run(name, func(t *testing.T) {
			broken := strings.Replace(real, c.old, c.new, 1)
			if broken == real {
				t.Fatal("the README changed: the case no longer applies")
			}
			want := fmt.Sprintf("README.md:%d:", lineOf(t, broken, c.failing))
			if err := run(broken); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one naming %s", err, want)
			}
		})
	}
}
