// Command readmecheck runs the README's own shell blocks (make readme-check, part of make
// test), so the README cannot drift from what works: a block it runs is the block a reader
// copies.
//
// Marking. A fenced ```sh block runs when the line before it (blank lines aside) is
//
//	<!-- readme-check -->                                  run the block in order
//	<!-- readme-check: background; ready: CMD -->          start it in the background, wait
//	                                                      until CMD succeeds, stop it (SIGINT,
//	                                                      as Ctrl-C would) after the last block
//
// Inside a block, a line whose comment begins with `prints:` must print that (its stdout,
// lines separated by " / "), where every number stands for any number (times, counts): the
// line is retried until it does, for up to a minute, because memd works in the background
// (a commit lands 2 s after the change). A comment beginning with `exit N:` means the line
// must exit with N. Any other failing line fails the check. Lines ending in a backslash
// continue on the next; heredocs are not supported.
//
// Where. Blocks run in order, each in one bash, with the working directory a fresh copy of the
// repo's files (tracked and untracked, not ignored: what a fresh clone plus your edits holds),
// HOME a temporary directory, git without system or user config, and the repo's bin/ first on
// PATH (so `memd` is the binary just built).
//
// Skipped. Unmarked sh blocks are listed with the reason they cannot run here (skipReasons):
// go install needs the network, systemctl/loginctl/journalctl a systemd user session,
// launchctl macOS, `make test` is the suite that runs this check, the long make targets are
// not part of it, `memd run` alone runs in the foreground until Ctrl-C, a
// git@github.com remote is not ours, and a #!/bin/sh block is a script to install.
//
// A failure names the README line: README.md:42: <the line>: <what went wrong>.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// retryFor bounds how long a `prints:` line is retried.
var retryFor = time.Minute

// readyFor bounds how long a background block may take to become ready (make run builds).
var readyFor = 10 * time.Minute

// skipReasons says why an unmarked block cannot run here, by what it contains (first match).
var skipReasons = []struct{ has, why string }{
	{"#!/bin/sh", "a script the text installs, not commands (cmd/memd's TestReadmeHookRecipes runs it)"},
	{"go install", "go install needs the network"},
	{"systemctl", "needs a systemd user session"},
	{"loginctl", "needs a systemd user session"},
	{"journalctl", "needs a systemd user session"},
	{"launchctl", "launchd: macOS only"},
	{"make test", "make test is the suite that runs this check"},
	{"make bench", "long runs are not part of make test"},
	{"make reliability", "long runs are not part of make test"},
	{"make soak", "long runs are not part of make test"},
	{"make fuzz", "long runs are not part of make test"},
	{"git@github.com", "needs a real remote"},
	{"memd run", "runs in the foreground until Ctrl-C"},
	{"sudo ", "needs root"},
}

// Block is one fenced sh block of the README.
type Block struct {
	Line       int      // README line of the block's first code line
	Lines      []string // the code, as written
	Marked     bool
	Background bool
	Ready      string // with Background: the command that says it is ready
}

var markRE = regexp.MustCompile(`^<!--\s*readme-check(?::\s*(.*?))?\s*-->$`)

// Parse finds the sh blocks and their marks.
func Parse(readme string) ([]Block, error) {
	lines := strings.Split(readme, "\n")
	var out []Block
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		b := Block{Line: i + 2}
		// The mark: the nearest non-blank line above the fence.
		for j := i - 1; j >= 0; j-- {
			t := strings.TrimSpace(lines[j])
			if t == "" {
				continue
			}
			if m := markRE.FindStringSubmatch(t); m != nil {
				b.Marked = true
				if opts := strings.TrimSpace(m[1]); opts != "" {
					for _, o := range strings.Split(opts, ";") {
						o = strings.TrimSpace(o)
						switch {
						case o == "background":
							b.Background = true
						case strings.HasPrefix(o, "ready:"):
							b.Ready = strings.TrimSpace(strings.TrimPrefix(o, "ready:"))
						default:
							return nil, fmt.Errorf("README.md:%d: unknown readme-check option %q", j+1, o)
						}
					}
				}
				if b.Background && b.Ready == "" {
					return nil, fmt.Errorf("README.md:%d: a background block needs `ready: CMD`", j+1)
				}
			}
			break
		}
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b.Lines = append(b.Lines, lines[i])
		}
		out = append(out, b)
	}
	return out, nil
}

// SkipReason says why an unmarked block is not run.
func SkipReason(b Block) string {
	code := strings.Join(b.Lines, "\n")
	for _, r := range skipReasons {
		if strings.Contains(code, r.has) {
			return r.why
		}
	}
	return "not marked <!-- readme-check -->"
}

// step is one logical line of a block.
type step struct {
	line   int    // README line
	text   string // as written (joined continuations)
	cmd    string // without an expectation comment
	prints []string
	exit   int // expected exit code
}

var (
	printsRE = regexp.MustCompile(`\s#\s*prints:\s*(.*)$`)
	exitRE   = regexp.MustCompile(`\s#\s*exit (\d+):.*$`)
)

func steps(b Block) []step {
	var out []step
	for i := 0; i < len(b.Lines); i++ {
		s := step{line: b.Line + i, text: b.Lines[i]}
		for strings.HasSuffix(s.text, `\`) && i+1 < len(b.Lines) {
			i++
			s.text += "\n" + b.Lines[i] // bash joins the continuation itself
		}
		if strings.TrimSpace(s.text) == "" || strings.HasPrefix(strings.TrimSpace(s.text), "#") {
			continue
		}
		s.cmd = s.text
		if m := printsRE.FindStringSubmatchIndex(s.text); m != nil {
			s.cmd = s.text[:m[0]]
			for _, l := range strings.Split(s.text[m[2]:m[3]], " / ") {
				s.prints = append(s.prints, strings.TrimSpace(l))
			}
		} else if m := exitRE.FindStringSubmatchIndex(s.text); m != nil {
			s.cmd = s.text[:m[0]]
			s.exit, _ = strconv.Atoi(s.text[m[2]:m[3]])
		}
		out = append(out, s)
	}
	return out
}

// shape turns shown output into a POSIX extended regular expression (bash's =~): the text
// literally, any number for each number, the lines joined by real newlines.
func shape(lines []string) string {
	digits := regexp.MustCompile(`[0-9]+`)
	var parts []string
	for _, l := range lines {
		q := regexp.QuoteMeta(l) // escapes only what ERE treats as special too
		parts = append(parts, digits.ReplaceAllString(q, `[0-9]+`))
	}
	return "^" + strings.Join(parts, "\n") + "$"
}

// script is the bash program of a block: each step records its README line, so a failure
// names it; expectations wrap their command.
func script(b Block) string {
	var s strings.Builder
	s.WriteString(`set -e
__fail() { echo "README.md:$__line: $__text" >&2; echo "README.md:$__line: $1" >&2; exit 1; }
trap '__fail "failed (exit $?)"' ERR
`)
	for _, st := range steps(b) {
		fmt.Fprintf(&s, "__line=%d; __text=%s\n", st.line, shq(st.text))
		switch {
		case st.prints != nil:
			fmt.Fprintf(&s, `__deadline=$((SECONDS + %d)); __re=%s
while :; do
  __out=$( (eval %s) 2>"$__tmp/stderr" ) && [[ $__out =~ $__re ]] && break
  if [ $SECONDS -ge $__deadline ]; then trap - ERR; __fail "printed: $__out$(printf '\n')stderr: $(cat "$__tmp/stderr")$(printf '\n')want (numbers stand for any): %s"; fi
  sleep 0.2
done
printf '%%s\n' "$__out"
`, int(retryFor.Seconds()), shq(shape(st.prints)), shq(st.cmd), strings.ReplaceAll(strings.Join(st.prints, " / "), `"`, `\"`))
		case st.exit != 0:
			fmt.Fprintf(&s, "trap - ERR; set +e; ( eval %s ); __rc=$?; set -e; trap '__fail \"failed (exit $?)\"' ERR\n"+
				"[ $__rc = %d ] || __fail \"exit $__rc, want %d\"\n", shq(st.cmd), st.exit, st.exit)
		default:
			s.WriteString(st.cmd + "\n")
		}
	}
	return s.String()
}

// shq quotes s for bash.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Options says where blocks run.
type Options struct {
	Dir    string   // working directory: the fresh copy
	Env    []string // the whole environment
	Tmp    string   // scratch for the checker
	Stdout io.Writer
}

// Run runs the marked blocks in order; background blocks keep running until the end.
func Run(blocks []Block, o Options) (err error) {
	o.Stdout = &lockedWriter{w: o.Stdout} // a block's stdout and stderr both go there
	var bg []*exec.Cmd
	defer func() {
		for _, c := range bg {
			stop(c)
		}
	}()
	for _, b := range blocks {
		if !b.Marked {
			fmt.Fprintf(o.Stdout, "readme-check: skip README.md:%d (%s)\n", b.Line, SkipReason(b))
			continue
		}
		fmt.Fprintf(o.Stdout, "readme-check: run README.md:%d%s\n", b.Line, map[bool]string{true: " (background)"}[b.Background])
		cmd := exec.Command("bash", "-c", "__tmp="+shq(o.Tmp)+"\n"+script(b))
		cmd.Dir, cmd.Env, cmd.Stdout = o.Dir, o.Env, o.Stdout
		var stderr bytes.Buffer
		cmd.Stderr = io.MultiWriter(&stderr, o.Stdout)
		if !b.Background {
			if err := cmd.Run(); err != nil {
				return failure(b, stderr.String(), err)
			}
			continue
		}
		log, err := os.Create(filepath.Join(o.Tmp, fmt.Sprintf("background-%d.log", b.Line)))
		if err != nil {
			return err
		}
		defer log.Close()
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("README.md:%d: start: %w", b.Line, err)
		}
		bg = append(bg, cmd)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		deadline := time.Now().Add(readyFor)
		for {
			ready := exec.Command("bash", "-c", b.Ready)
			ready.Dir, ready.Env = o.Dir, o.Env
			if ready.Run() == nil {
				break
			}
			select {
			case err := <-exited:
				out, _ := os.ReadFile(log.Name())
				bg = bg[:len(bg)-1]
				return fmt.Errorf("README.md:%d: %s: exited before it was ready (%v):\n%s", b.Line, b.Lines[0], err, out)
			case <-time.After(200 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				out, _ := os.ReadFile(log.Name())
				return fmt.Errorf("README.md:%d: %s: not ready after %s (ready: %s):\n%s", b.Line, b.Lines[0], readyFor, b.Ready, out)
			}
		}
		go func() { <-exited }() // stop() waits through the process state
	}
	return nil
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// failure is the block's error: the README line the script named, else the block.
func failure(b Block, stderr string, err error) error {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "README.md:") {
			var rest []string
			for _, m := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(m, "README.md:") {
					rest = append(rest, m)
				}
			}
			return errors.New(strings.Join(rest, "\n"))
		}
	}
	return fmt.Errorf("README.md:%d: block failed: %v\n%s", b.Line, err, stderr)
}

// stop ends a background block as Ctrl-C would (SIGINT to its process group), then kills
// what is left.
func stop(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGINT)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if syscall.Kill(-c.Process.Pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
}

// freshCopy copies the files a clone plus the working tree's edits would hold (git ls-files
// --cached --others --exclude-standard; deleted files are left out) into dst.
func freshCopy(repo, dst string) error {
	out, err := exec.Command("git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files in %s: %w", repo, err)
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src := filepath.Join(repo, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			t, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(t, p)
			}
			if err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(p, b, fi.Mode().Perm()); err != nil {
			return err
		}
	}
	return nil
}

// environment is the blocks' environment: the caller's, without what ties a process to the
// real user (HOME, XDG_*, GIT_*, MEMD_*), then a temporary HOME and bin first on PATH.
func environment(home, bin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "GIT_"), strings.HasPrefix(k, "MEMD_"),
			k == "NOTIFY_SOCKET", k == "MAKEFLAGS", k == "MAKELEVEL", k == "MFLAGS":
			continue
		case k == "PATH":
			kv = "PATH=" + bin + string(os.PathListSeparator) + v
		}
		env = append(env, kv)
	}
	gitconfig := filepath.Join(home, ".gitconfig")
	_ = os.WriteFile(gitconfig, []byte("[user]\n\tname = readme-check\n\temail = readme-check@example.invalid\n[init]\n\tdefaultBranch = main\n"), 0o600)
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
}

func main() {
	readme := flag.String("readme", "README.md", "the README to check")
	repo := flag.String("repo", ".", "the source repo: copied fresh, and its bin/ goes first on PATH")
	list := flag.Bool("list", false, "list the blocks and whether they run, run nothing")
	flag.Parse()
	if err := run(*readme, *repo, *list, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "readme-check: FAIL")
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("readme-check: ok")
}

func run(readme, repo string, list bool, stdout io.Writer) error {
	data, err := os.ReadFile(readme)
	if err != nil {
		return err
	}
	blocks, err := Parse(string(data))
	if err != nil {
		return err
	}
	if list {
		for _, b := range blocks {
			what := "run"
			if !b.Marked {
				what = "skip: " + SkipReason(b)
			}
			fmt.Fprintf(stdout, "README.md:%d %s\n", b.Line, what)
		}
		return nil
	}
	repo, err = filepath.Abs(repo)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "memd-readme-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	clone, home := filepath.Join(tmp, "clone"), filepath.Join(tmp, "home")
	for _, d := range []string{clone, home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := freshCopy(repo, clone); err != nil {
		return err
	}
	return Run(blocks, Options{Dir: clone, Env: environment(home, filepath.Join(repo, "bin")), Tmp: tmp, Stdout: stdout})
}
