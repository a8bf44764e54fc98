// Package fastpath answers `memd status` from its init function, before most of the memd
// binary's packages have run theirs: a prompt, a bar or a coding agent's status line starts
// memd status several times a second, and those inits (client_golang, protobuf, go-git,
// encoding/gob, crypto) cost more than the command itself.
//
// Go initialises packages in import-path order among those whose imports are ready. This
// package imports only os and what os already imports (time, io, syscall), plus
// internal/drain which is built the same way, so it is ready as soon as os is and runs right
// after it. A test in cmd/memd checks that with GODEBUG=inittrace=1; keep it that way: no
// strings, strconv, fmt, path or encoding/json here.
//
// It prints the line the daemon already rendered beside the document (.git/memd/status.<format>)
// when that is provably what the full command would print:
//
//   - the arguments are only --repo, --format (a line format), --now and --config, and
//     either no config file is in play or the full command has vouched for the one that is
//     (config.go), so the repo is known without reading YAML;
//   - status.json carries version, updated_at and pid at its top level, and its modification
//     time and the line file's both equal updated_at (statusline.Write sets them so; a file
//     from anywhere else does not);
//   - the document is not stale: it is younger than statusline.StaleAfter or its pid lives.
//
// Anything else (no document, a stale one, json or sidebar output, a config file not yet
// vouched for, a bad flag,
// -h, an argument, an unclean path) returns and lets the full command answer, with its own
// messages and exit codes. MEMD_NO_FASTPATH=1 turns it off.
package fastpath

import (
	"io"
	"os"
	"time"

	"github.com/memd-dev/memd/internal/boundedfile"
	"github.com/memd-dev/memd/internal/drain"
	"github.com/memd-dev/memd/internal/proc"
)

// These repeat values of packages this one must not import; cmd/memd's tests check they agree.
const (
	// DefaultRepo is memd.DefaultConfig().Repo.
	DefaultRepo = "~/memory"
	// DocVersion is statusline.Version.
	DocVersion = 1
	// StaleAfter is statusline.StaleAfter.
	StaleAfter = 2 * time.Minute
	// ClaudeInputWait is statusline.ClaudeInputWait.
	ClaudeInputWait = 200 * time.Millisecond
	// stateDir is the state dir below a repo, "/.git/" + memd.StateDirName. A repo whose .git
	// is a file (a submodule, a linked worktree: internal/gitlayout) has it elsewhere; the
	// read here fails and the full command answers.
	stateDir = "/.git/memd"
)

// LineFormats is statusline.LineFormats: the formats the daemon writes as status.<format>.
var LineFormats = [...]string{"plain", "ansi", "tmux", "polybar", "waybar", "i3blocks", "swiftbar", "claude"}

func init() {
	if len(os.Args) < 2 || os.Args[1] != "status" || os.Getenv("MEMD_NO_FASTPATH") != "" {
		return
	}
	if code, ok := Status(os.Args[2:], os.Stdin, os.Stdout); ok {
		os.Exit(code)
	}
}

// Status runs `memd status args` if it can do so exactly as the full command would; ok is
// false when it did nothing and the full command must run.
func Status(args []string, stdin io.Reader, stdout io.Writer) (code int, ok bool) {
	opt, ok := parseArgs(args)
	if !ok {
		return 0, false
	}
	configured, haveConfig, ok := configRepo(opt.config)
	if !ok {
		return 0, false
	}
	now := time.Now()
	if opt.now != "" {
		t, ok := ParseNow(opt.now)
		if !ok {
			return 0, false
		}
		now = t
	}
	var repo string
	if haveConfig && opt.repo == "" {
		repo = configured
	} else if repo, ok = resolveRepo(opt.repo); !ok {
		return 0, false
	}
	line, ok := renderedLine(repo+stateDir, opt.format, now)
	if !ok {
		return 0, false
	}
	if opt.format == "claude" {
		drain.Input(stdin, 1<<20, ClaudeInputWait)
	}
	_, _ = stdout.Write(line) // as the full command, a bar that went away is not an error
	return 0, true
}

// ParseNow is the one reader of the --now flag (an RFC3339 time), here because this package
// may import neither the root nor cmd/memd; the full command's load and `service`'s bare
// --now test call it too, so the three agree on what is a time.
func ParseNow(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339, s)
	return t, err == nil
}

type options struct{ repo, format, now, config string }

// parseArgs accepts what package flag would for the status FlagSet, restricted to --repo,
// --format, --now and --config: -name or --name, with =value or the next argument as value, the last
// occurrence winning. Anything else (another flag, -h, --, an argument) is not ours.
func parseArgs(args []string) (options, bool) {
	o := options{format: "plain"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			return o, false
		}
		name := a[1:]
		if name[0] == '-' {
			name = name[1:]
		}
		if name == "" || name[0] == '-' || name[0] == '=' {
			return o, false
		}
		value, hasValue := "", false
		for j := 0; j < len(name); j++ {
			if name[j] == '=' {
				name, value, hasValue = name[:j], name[j+1:], true
				break
			}
		}
		if !hasValue {
			if i+1 >= len(args) {
				return o, false
			}
			i++
			value = args[i]
		}
		switch name {
		case "repo":
			o.repo = value
		case "format":
			o.format = value
		case "now":
			o.now = value
		case "config":
			o.config = value
		default:
			return o, false
		}
	}
	for _, f := range LineFormats {
		if f == o.format {
			return o, true
		}
	}
	return o, false
}

// resolveRepo is the full command's ExpandHome then filepath.Abs, for the paths where that is
// plain concatenation: the result must come out clean (no //, . or .. elements, no trailing
// slash), or the full command, which cleans it, must decide.
func resolveRepo(flagValue string) (string, bool) {
	repo := flagValue
	if repo == "" {
		repo = DefaultRepo
	} else if blank(repo) {
		return "", false // the full command reports the empty repo (exit 2)
	}
	if repo == "~" || (len(repo) > 1 && repo[0] == '~' && repo[1] == '/') {
		home := os.Getenv("HOME")
		if home == "" {
			return "", false
		}
		repo = home + repo[1:]
	}
	if repo[0] != '/' {
		wd, err := os.Getwd()
		if err != nil {
			return "", false
		}
		repo = wd + "/" + repo
	}
	return repo, clean(repo)
}

// blank reports whether s has nothing but ASCII spaces and non-ASCII bytes: the full command
// trims Unicode spaces, and a value like that is left for it to judge.
func blank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80, c == ' ', c == '\t', c == '\n', c == '\v', c == '\f', c == '\r':
		default:
			return false
		}
	}
	return true
}

// clean reports whether an absolute path is already what path.Clean would make of it.
func clean(p string) bool {
	if p == "/" {
		return true
	}
	if p == "" || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		elem := p[start:i]
		if elem == "" || elem == "." || elem == ".." {
			return false
		}
		start = i + 1
	}
	return true
}

// renderedLine returns status.<format> from stateDir when it is what rendering status.json at
// now would give (see the package comment); ok is false otherwise.
func renderedLine(stateDir, format string, now time.Time) ([]byte, bool) {
	doc, docTime, ok := readWithMtime(stateDir + "/status.json")
	if !ok {
		return nil, false
	}
	h, ok := scanHeader(doc)
	if !ok || h.version != DocVersion || !docTime.Equal(h.updatedAt) {
		return nil, false
	}
	if now.Sub(h.updatedAt) > StaleAfter && !proc.Alive(h.pid) {
		return nil, false // "not running": the full command renders the stand-in
	}
	line, lineTime, ok := readWithMtime(stateDir + "/status." + format)
	if !ok || !lineTime.Equal(h.updatedAt) {
		return nil, false
	}
	return line, true
}

// maxFile bounds what is read of status.json or a line file; the daemon's are a few KiB.
const maxFile = 1 << 20

// readWithMtime reads a whole small file and the modification time of what it read.
func readWithMtime(name string) ([]byte, time.Time, bool) {
	// Not a regular file (a FIFO would hang every prompt), a symlink, or too large: the
	// full command says what is wrong.
	b, fi, err := boundedfile.Read(name, maxFile, "1 MiB")
	if err != nil || int64(len(b)) != fi.Size() {
		return nil, time.Time{}, false // or grew or shrank while read: let the full command read it
	}
	return b, fi.ModTime(), true
}
