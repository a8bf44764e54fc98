// Command memd keeps an AI-agent memory repo committed, synced, tidy and observable.
//
// This package only parses and wires: each subcommand lives in its own file and calls into
// the packages that own the work (watcher, sync, sleep, metrics, service, agent).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/fastpath"
)

// Exit codes (docs/ARCHITECTURE.md §7).
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

// Set by the linker (-ldflags "-X main.version=… -X main.commit=…").
var (
	version = "dev"
	commit  = "unknown"
)

// app carries what every subcommand shares: streams, the loaded config and the clock.
type app struct {
	stdout, stderr io.Writer
	stdin          io.Reader

	// global flags
	configFlag string
	repoFlag   string
	nowFlag    string

	cfg        memd.Config
	configFile string // the file the config came from ("" = defaults)
	now        func() time.Time
	log        *slog.Logger
}

type command struct {
	run     func(a *app, args []string) int
	summary string
}

// commands is filled by each subcommand file's init, so a new command is one new file.
var commands = map[string]command{}

func register(name, summary string, run func(a *app, args []string) int) {
	commands[name] = command{run: run, summary: summary}
}

func main() {
	a := &app{stdout: os.Stdout, stderr: os.Stderr, stdin: os.Stdin, now: time.Now}
	os.Exit(a.main(os.Args[1:]))
}

func (a *app) main(args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		a.usage(a.stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = []string{"version"}
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(a.stderr, "memd: unknown command %q\n\n", args[0])
		a.usage(a.stderr)
		return exitUsage
	}
	return cmd.run(a, args[1:])
}

func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "usage: memd <command> [flags]")
	fmt.Fprintln(w)
	for _, n := range slices.Sorted(maps.Keys(commands)) {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every command takes --config FILE, --repo DIR and --now RFC3339.")
}

// flags returns a FlagSet for a subcommand with the global flags registered on it.
func (a *app) flags(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("memd "+name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.StringVar(&a.configFlag, "config", "", "config `file` (else $MEMD_CONFIG, else $XDG_CONFIG_HOME/memd/config.yaml)")
	fs.StringVar(&a.repoFlag, "repo", "", "memory repo `dir` (overrides repo: in the config)")
	fs.StringVar(&a.nowFlag, "now", "", "set the clock to this RFC3339 `time` (tests, dry runs)")
	fs.Usage = func() {
		fmt.Fprintf(a.stderr, "usage: memd %s [flags] %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses the subcommand's flags and loads the config. ok is false when the command
// must return code at once (bad usage or bad config: 2; -h: 0).
func (a *app) parse(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(interleave(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	if err := a.load(); err != nil {
		say(a.stderr, "memd: %v\n", err)
		return exitUsage, false
	}
	return exitOK, true
}

// interleave moves flags that follow positional arguments in front of them, so
// `memd init DIR --demo` works like `memd init --demo DIR`.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		s := args[i]
		if s == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(s, "-") || s == "-" {
			pos = append(pos, s)
			continue
		}
		flags = append(flags, s)
		name := strings.TrimLeft(s, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if f := fs.Lookup(name); f != nil {
			if bf, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
		}
	}
	return append(flags, pos...)
}

// load reads the config (file, then --repo, then --now) and validates it.
func (a *app) load() error {
	path, explicit := configPath(a.configFlag)
	cfg, ev, err := loadConfig(path, explicit)
	if err != nil {
		return err
	}
	if path != "" {
		if _, statErr := os.Stat(path); statErr == nil {
			a.configFile = path
		}
	}
	if a.repoFlag != "" {
		cfg.Repo = a.repoFlag
		if ev != nil {
			delete(ev.keys, "repo") // the flag's value is the user's, not the environment's
		}
	}
	if err := resolve(&cfg); err != nil {
		return ev.hide(err)
	}
	if a.nowFlag != "" {
		t, ok := fastpath.ParseNow(a.nowFlag)
		if !ok {
			return &memd.ConfigError{Key: "--now", Value: a.nowFlag, Problem: "not an RFC3339 time such as 2026-11-30T03:00:00Z"}
		}
		a.now = func() time.Time { return t }
	}
	a.cfg = cfg
	a.log = newLogger(a.stderr, cfg.Log)
	return nil
}

// resolve makes the repo an absolute path (~ expanded) and validates the config.
func resolve(cfg *memd.Config) error {
	// An empty repo must fail validation, not become the working directory through Abs.
	if strings.TrimSpace(cfg.Repo) == "" {
		return &memd.ConfigError{Key: "repo", Value: cfg.Repo, Problem: "must name the memory repo directory"}
	}
	cfg.Repo = memd.ExpandHome(cfg.Repo)
	if abs, err := filepath.Abs(cfg.Repo); err == nil {
		cfg.Repo = abs
	}
	return cfg.Validate(validateSchedule)
}

// validateSchedule is replaced by the sleep wiring once the scheduler exists.
var validateSchedule memd.ScheduleValidator

// fail prints an error for a failed command and returns exit 1.
func (a *app) fail(format string, args ...any) int {
	say(a.stderr, "memd: "+format+"\n", args...)
	return exitFailed
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}
