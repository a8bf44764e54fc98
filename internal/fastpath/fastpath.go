// Package fastpath answers `memd status` from its init function, before the heavy packages
// of the memd binary (client_golang, protobuf, go-git) run theirs: a prompt or a bar starts
// memd status every few seconds, and those inits cost more than the command itself.
//
// Go initialises packages in import-path order among those whose imports are ready, so this
// package, which imports only the standard library and metrics/statusline, runs before
// github.com/prometheus/*, golang.org/x/* and google.golang.org/*. (go-git sorts earlier but
// needs golang.org/x/crypto first, so it waits too; GODEBUG=inittrace=1 shows the order.)
//
// It handles only the common case exactly as the full command would: the status subcommand
// with --repo/--format/--now flags and no config file to read. Anything else (a config file,
// a bad flag, -h, an argument) returns and lets the normal command answer, with its own
// messages and exit codes. MEMD_NO_FASTPATH=1 turns it off.
package fastpath

import (
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

// DefaultRepo is memd.DefaultConfig().Repo, repeated here so this package need not import the
// root package (and its HTML parser); cmd/memd's tests check the two agree.
const DefaultRepo = "~/memory"

func init() {
	if len(os.Args) < 2 || os.Args[1] != "status" || os.Getenv("MEMD_NO_FASTPATH") != "" {
		return
	}
	if code, ok := Status(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); ok {
		os.Exit(code)
	}
}

// Status runs `memd status args` if it can do so exactly as the full command would; ok is
// false when it did nothing and the full command must run.
func Status(args []string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	f := flag.NewFlagSet("memd status", flag.ContinueOnError)
	f.SetOutput(io.Discard)
	configFlag := f.String("config", "", "")
	repoFlag := f.String("repo", "", "")
	nowFlag := f.String("now", "", "")
	format := f.String("format", "plain", "")
	if err := f.Parse(args); err != nil || f.NArg() > 0 {
		return 0, false
	}
	if *configFlag != "" || os.Getenv("MEMD_CONFIG") != "" || !statusline.IsFormat(*format) {
		return 0, false
	}
	// The config file the full command would read: use the fast path only when there is none.
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return 0, false
		}
		dir = path.Join(home, ".config")
	}
	if _, err := os.Stat(path.Join(dir, "memd", "config.yaml")); !errors.Is(err, fs.ErrNotExist) {
		return 0, false
	}
	now := time.Now()
	if *nowFlag != "" {
		t, err := time.Parse(time.RFC3339, *nowFlag)
		if err != nil {
			return 0, false
		}
		now = t
	}
	repo := DefaultRepo
	if *repoFlag != "" {
		if strings.TrimSpace(*repoFlag) == "" {
			return 0, false
		}
		repo = *repoFlag
	}
	repo = expandHome(repo)
	repo = abs(repo)
	return statusline.Command(repo, *format, now, stdin, stdout, stderr), true
}

// abs is filepath.Abs on Unix. path/filepath is not imported: its init comes late in the
// binary's order and would let the heavy packages run theirs first.
func abs(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	wd, err := os.Getwd()
	if err != nil {
		return p
	}
	return path.Join(wd, p)
}

// expandHome is memd.ExpandHome.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return path.Join(home, strings.TrimPrefix(p, "~"))
		}
	}
	return p
}
