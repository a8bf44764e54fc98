package main

import (
	"fmt"
	"strings"

	"github.com/memd-dev/memd/metrics/statusline"
)

func init() { register("status", "one status line for prompts, bars and agents", cmdStatus) }

// cmdStatus prints the status line from .git/memd/status.json: it never touches git or the
// daemon, and exits 0 whatever the document says so a prompt or bar keeps drawing. The common
// case (no config file) is answered earlier by internal/fastpath, with the same code after
// the config is known (statusline.Command).
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
	return statusline.Command(a.cfg.Repo, *format, a.now(), a.stdin, a.stdout, a.stderr)
}
