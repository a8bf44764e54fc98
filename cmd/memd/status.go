package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/fastpath"
	"github.com/memd-dev/memd/metrics/statusline"
)

func init() { register("status", "one status line for prompts, bars and agents", cmdStatus) }

// cmdStatus prints the status line from .git/memd/status.json: it never touches git or the
// daemon, and exits 0 whatever the document says so a prompt or bar keeps drawing. The common
// case is answered earlier by internal/fastpath from the line the daemon rendered; this is
// the full command, which also vouches for the config file it read so that the fast path
// can take it next time.
func cmdStatus(a *app, args []string) int {
	fs := a.flags("status", "")
	format := fs.String("format", "plain", "output `format`: "+strings.Join(statusline.Formats, ", "))
	all := fs.Bool("all", false, "one line for every repo memd runs on this machine (json: the list)")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(a.stderr, "memd: status: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if a.configFile != "" {
		if err := rememberConfig(a.configFile); err != nil {
			a.log.Debug("status: config not remembered for the fast path", "config", a.configFile, "err", err)
		}
	}
	if *all {
		return a.statusAll(*format)
	}
	return statusline.Command(a.cfg.Repo, *format, a.now(), a.stdin, a.stdout, a.stderr)
}

// rememberConfig vouches for a config file so the next `memd status` can take the fast path
// (internal/fastpath/config.go): only one whose meaning is its bytes and $HOME alone, no
// ${VAR} and a repo that is absolute once ~ is expanded, and only once it validates.
func rememberConfig(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return errors.New("not an absolute, clean path")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat() // before the read: an edit after it changes the identity recorded
	if err != nil {
		return err
	}
	if fastpath.Vouched(path, fi) {
		return nil // recorded as it is: no second parse, no rewrite on every slow-path run
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return err
	}
	if bytes.IndexByte(data, '$') >= 0 {
		return errors.New("uses ${VAR}: its meaning depends on the environment")
	}
	cfg := memd.DefaultConfig()
	if err := parseConfig(data, &cfg); err != nil {
		return err
	}
	if r := memd.ExpandHome(cfg.Repo); !filepath.IsAbs(r) {
		return errors.New("relative repo: its meaning depends on the working directory")
	}
	if err := resolve(&cfg); err != nil {
		return err
	}
	return fastpath.RememberConfig(path, fi, cfg.Repo, time.Now())
}
