package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"

	"github.com/memd-dev/memd/internal/fastpath"
	"github.com/memd-dev/memd/service"
)

func init() {
	register("service", "print, install or uninstall the systemd unit / launchd agent", cmdService)
}

const serviceUsage = "print|install|uninstall|list"

func cmdService(a *app, args []string) int {
	fs := a.flags("service", serviceUsage)
	useSystemd := fs.Bool("systemd", false, "the systemd user unit (default on Linux)")
	useLaunchd := fs.Bool("launchd", false, "the launchd agent (default on macOS)")
	force := fs.Bool("force", false, "replace or remove a file memd did not write (it is kept as .bak)")
	apply := fs.Bool("apply", false, "also run the systemctl/launchctl commands that start (install) or stop (uninstall) it; a bare --now means the same")
	args = bareNowToApply(args)
	if err := fs.Parse(interleave(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(a.stderr, "memd service: want one of %s\n", serviceUsage)
		fs.Usage()
		return exitUsage
	}
	action := fs.Arg(0)
	if action != "print" && action != "install" && action != "uninstall" && action != "list" {
		fmt.Fprintf(a.stderr, "memd service: unknown action %q (want %s)\n", action, serviceUsage)
		return exitUsage
	}
	if *useSystemd && *useLaunchd {
		fmt.Fprintln(a.stderr, "memd service: choose one of --systemd and --launchd")
		return exitUsage
	}
	kind := service.DefaultKind()
	if *useSystemd {
		kind = service.Systemd
	} else if *useLaunchd {
		kind = service.Launchd
	}
	if *apply && (action == "print" || action == "list") {
		fmt.Fprintln(a.stderr, "memd service: --apply goes with install or uninstall")
		return exitUsage
	}
	env, err := service.EnvFromOS()
	if err != nil {
		return a.fail("service: %v", err)
	}
	opt := service.Options{Force: *force}

	if action == "list" {
		return a.serviceList(kind, env)
	}
	if action == "uninstall" {
		return a.serviceUninstall(kind, env, opt, *apply)
	}

	if err := a.load(); err != nil {
		fmt.Fprintf(a.stderr, "memd: %v\n", err)
		return exitUsage
	}
	p, err := a.serviceParams(env)
	if err != nil {
		return a.fail("service: %v", err)
	}
	p.Instance = a.instanceFor(kind, env, p.Repo)
	if action == "print" {
		return a.servicePrint(kind, p)
	}
	install := service.Install
	if p.Instance != "" {
		install = service.InstallInstance
	}
	res, err := install(kind, p, env, opt)
	if err != nil {
		return a.fail("service install: %v", err)
	}
	return a.reportInstall(res, p, *apply)
}

// bareNowToApply turns a valueless --now (as in `systemctl enable --now`) into --apply. The
// global --now takes an RFC3339 time, so a --now followed by one keeps that meaning.
func bareNowToApply(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		s := args[i]
		if s == "--now" || s == "-now" {
			if i+1 < len(args) {
				if _, ok := fastpath.ParseNow(args[i+1]); ok {
					out = append(out, s, args[i+1])
					i++
					continue
				}
			}
			out = append(out, "--apply")
			continue
		}
		out = append(out, s)
	}
	return out
}

// serviceParams describes this binary and the config in use.
func (a *app) serviceParams(env service.Env) (service.Params, error) {
	exe, err := os.Executable()
	if err != nil {
		return service.Params{}, fmt.Errorf("find this binary: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		fmt.Fprintf(a.stderr, "memd: warning: %s is a temporary build (go run?); install a built memd first\n", exe)
	}
	p := service.Params{Executable: exe, Repo: a.cfg.Repo, Home: env.Home}
	if r, err := filepath.EvalSymlinks(p.Repo); err == nil {
		p.Repo = r // the sandbox mounts the real directory
	}
	if a.configFile != "" {
		cf, err := filepath.Abs(a.configFile)
		if err != nil {
			return p, fmt.Errorf("config %s: %w", a.configFile, err)
		}
		p.ConfigFile = cf
	}
	if a.repoFlag != "" {
		p.RepoFlag = a.cfg.Repo // already absolute and ~-expanded
	}
	return p, nil
}

func (a *app) reportInstall(res service.Result, p service.Params, apply bool) int {
	switch res.Action {
	case service.Unchanged:
		fmt.Fprintf(a.stdout, "memd: %s is up to date\n", res.Path)
	default:
		fmt.Fprintf(a.stdout, "memd: %s %s\n", res.Action, res.Path)
	}
	if res.Backup != "" {
		fmt.Fprintf(a.stdout, "memd: the file that was there is kept as %s\n", res.Backup)
	}
	for _, also := range res.Also {
		fmt.Fprintf(a.stdout, "memd: %s\n", also)
	}
	fmt.Fprintf(a.stdout, "memd: it runs %s\n", service.ShellJoin(p.Args()))
	if apply {
		return a.runServiceCommands(res.Next)
	}
	fmt.Fprintln(a.stdout, "To enable and start it:")
	printCommands(a, res.Next)
	if res.Kind == service.Systemd {
		fmt.Fprintln(a.stdout, "To keep it running after you log out (and start it at boot):")
		fmt.Fprintln(a.stdout, "  loginctl enable-linger "+currentUser())
	} else {
		fmt.Fprintf(a.stdout, "Logs: %s\n", p.LogFile())
	}
	return exitOK
}

func (a *app) reportUninstall(res service.Result, apply bool) int {
	switch res.Action {
	case service.Absent:
		fmt.Fprintf(a.stdout, "memd: nothing to remove at %s\n", res.Path)
	default:
		fmt.Fprintf(a.stdout, "memd: removed %s\n", res.Path)
	}
	if res.Backup != "" {
		fmt.Fprintf(a.stdout, "memd: the file is kept as %s\n", res.Backup)
	}
	for _, l := range res.Removed {
		fmt.Fprintf(a.stdout, "memd: removed %s\n", l)
	}
	if apply {
		return a.runServiceCommands(res.Next)
	}
	if res.Action == service.Absent {
		return exitOK
	}
	fmt.Fprintln(a.stdout, "To stop it if it runs:")
	printCommands(a, res.Next)
	return exitOK
}

func printCommands(a *app, cmds []service.Command) {
	for _, c := range cmds {
		fmt.Fprintln(a.stdout, "  "+c.String())
	}
}

// runServiceCommands runs the start or stop commands in order; one that may fail (stopping
// what is not running) only warns.
func (a *app) runServiceCommands(cmds []service.Command) int {
	for _, c := range cmds {
		fmt.Fprintln(a.stdout, "+ "+c.String())
		cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
		cmd.Stdout, cmd.Stderr = a.stdout, a.stderr
		if err := cmd.Run(); err != nil {
			if c.MayFail {
				fmt.Fprintf(a.stderr, "memd: %s: %v (fine if it was not running)\n", c.String(), err)
				continue
			}
			return a.fail("%s: %v", c.String(), err)
		}
	}
	return exitOK
}

// currentUser is the user name, shell-quoted, or $USER for the shell to fill in.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return service.ShellJoin([]string{u.Username})
	}
	return "$USER"
}
