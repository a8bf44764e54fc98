package main

import (
	"fmt"
	"path/filepath"

	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/service"
)

// Several repos, one service each (README "Several repos on one machine"): the first
// install is the default instance, memd.service / dev.memd.agent, exactly as before. A repo
// that already has a service gets that one again (one repo never gets two services); a
// second repo, while the default runs another, gets an instance of its own:
// memd@<systemd-escape --path REPO>.service or dev.memd.<name>.

// instanceFor is the instance name to install for repo: "" for the default.
func (a *app) instanceFor(kind service.Kind, env service.Env, repo string) string {
	list, err := service.List(kind, env)
	if err != nil {
		return ""
	}
	defaultTaken := false
	for _, in := range list {
		if in.Repo == repo {
			return in.Instance
		}
		defaultTaken = defaultTaken || in.Instance == ""
	}
	if !defaultTaken {
		return ""
	}
	return service.InstanceName(repo)
}

// servicePrint prints what install would write: the unit (or plist), or for a systemd
// instance the template and the instance's drop-in.
func (a *app) servicePrint(kind service.Kind, p service.Params) int {
	if p.Instance == "" || kind == service.Launchd {
		if p.Instance != "" {
			p.Label, p.RepoFlag = service.InstanceLabel(p.Instance), p.Repo
		}
		data, err := service.Render(kind, p)
		if err != nil {
			return a.fail("service print: %v", err)
		}
		_, _ = a.stdout.Write(data)
		return exitOK
	}
	tmpl, err := service.RenderSystemdTemplate(p)
	if err != nil {
		return a.fail("service print: %v", err)
	}
	drop, err := service.RenderDropIn(p)
	if err != nil {
		return a.fail("service print: %v", err)
	}
	fmt.Fprintf(a.stdout, "# %s\n", service.TemplateName)
	_, _ = a.stdout.Write(tmpl)
	fmt.Fprintf(a.stdout, "\n# %s.d/%s\n", service.InstanceUnit(p.Instance), service.DropInName)
	_, _ = a.stdout.Write(drop)
	return exitOK
}

// serviceUninstall removes the default (no --repo, no --config: it needs no config, so a
// broken one never keeps a service installed) or the one service of the named repo.
func (a *app) serviceUninstall(kind service.Kind, env service.Env, opt service.Options, apply bool) int {
	if a.configFlag == "" && a.repoFlag == "" {
		res, err := service.Uninstall(kind, env, "", opt)
		if err != nil {
			return a.fail("service uninstall: %v", err)
		}
		return a.reportUninstall(res, apply)
	}
	list, err := service.List(kind, env)
	if err != nil {
		return a.fail("service uninstall: %v", err)
	}
	if err := a.load(); err != nil {
		if len(list) <= 1 {
			// One service at most: it is the one meant, and a broken config must not keep
			// it installed.
			res, err := service.Uninstall(kind, env, "", opt)
			if err != nil {
				return a.fail("service uninstall: %v", err)
			}
			return a.reportUninstall(res, apply)
		}
		fmt.Fprintf(a.stderr, "memd: %v (name the repo with --repo to remove its service)\n", err)
		return exitUsage
	}
	repo := a.cfg.Repo
	if r, err := filepath.EvalSymlinks(repo); err == nil {
		repo = r
	}
	for _, in := range list {
		if in.Repo != repo {
			continue
		}
		var res service.Result
		if in.Instance == "" {
			res, err = service.Uninstall(kind, env, "", opt)
		} else {
			res, err = service.UninstallInstance(kind, env, in.Instance, opt)
		}
		if err != nil {
			return a.fail("service uninstall: %v", err)
		}
		return a.reportUninstall(res, apply)
	}
	fmt.Fprintf(a.stdout, "memd: no service installed for %s\n", repo)
	return exitOK
}

// serviceList prints each installed service: its unit, its repo and what that repo's
// status document says.
func (a *app) serviceList(kind service.Kind, env service.Env) int {
	list, err := service.List(kind, env)
	if err != nil {
		return a.fail("service list: %v", err)
	}
	if len(list) == 0 {
		fmt.Fprintln(a.stdout, "memd: no service installed (memd service install)")
		return exitOK
	}
	for _, in := range list {
		repo, state := in.Repo, "repo named by its config only"
		if repo == "" {
			repo = "?"
		} else {
			d, err := statusline.ReadAt(repo)
			if err != nil {
				d = nil // no document or an unreadable one: Effective says "not started"
			}
			state = statusline.Effective(d, a.now(), nil).Summary.Text
		}
		fmt.Fprintf(a.stdout, "%s\t%s\t%s\n", in.Unit, repo, state)
	}
	return exitOK
}
