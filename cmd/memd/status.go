package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/memd-dev/memd/metrics/statusline"
)

func init() { register("status", "one status line for prompts, bars and agents", cmdStatus) }

// cmdStatus prints the status line from .git/memd/status.json: it never touches git or the
// daemon, and exits 0 whatever the document says so a prompt or bar keeps drawing.
func cmdStatus(a *app, args []string) int {
	fs := a.flags("status", "")
	format := fs.String("format", "plain", "output `format`: "+strings.Join(statusline.Formats, ", "))
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "memd: status: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if !statusline.IsFormat(*format) {
		fmt.Fprintf(a.stderr, "memd: status: unknown --format %q (known: %s)\n", *format, strings.Join(statusline.Formats, ", "))
		return exitUsage
	}
	if *format == "claude" {
		// Claude Code pipes its session JSON in; read and ignore it, never wait on a terminal.
		statusline.DrainInput(a.stdin, 1<<20, 200*time.Millisecond)
	}
	out, err := statusline.Show(a.cfg.Repo, *format, a.now(), nil)
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	fmt.Fprint(a.stdout, out)
	if err != nil {
		if errors.Is(err, statusline.ErrUnknownFormat) {
			fmt.Fprintf(a.stderr, "memd: status: %v\n", err)
			return exitUsage
		}
		fmt.Fprintf(a.stderr, "memd: status: %v\n", err)
	}
	return exitOK
}
