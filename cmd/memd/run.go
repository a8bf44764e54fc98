package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/agent"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/internal/registry"
	"github.com/memd-dev/memd/service"
)

func init() { register("run", "the agent, in the foreground (what the service runs)", cmdRun) }

func cmdRun(a *app, args []string) int {
	relaxTimers() // before anything is opened: it may exec memd again (timerslack_linux.go)
	fs := a.flags("run", "")
	if code, ok := a.parse(fs, args); !ok {
		return code
	}
	level := service.NewLevelVar(a.cfg.Log.Level)
	log := service.NewLogger(a.stderr, level, a.cfg.Log.Format)
	if _, err := os.Stat(a.cfg.Repo); err != nil {
		log.Error("memory repo not found; create it with `memd init`", "repo", a.cfg.Repo)
		return exitUsage
	}
	if _, err := gitlayout.Resolve(a.cfg.Repo); errors.Is(err, gitlayout.ErrBadGitFile) {
		log.Error("refusing to start: the repo's layout", "err", err) // before the state dir, which is in it
		return exitUsage
	}
	pid, err := agent.AcquirePIDFile(a.cfg.StateDir())
	if err != nil {
		log.Error("refusing to start", "err", err)
		if errors.Is(err, agent.ErrAlreadyRunning) {
			return exitFailed
		}
		return exitFailed
	}
	defer pid.Release()

	reg, err := registry.Dir(os.Getenv)
	if err != nil {
		log.Warn("registry: this repo is not listed for memd status --all", "err", err)
	}
	// SIGTERM/SIGINT from here on: a stop asked for while the start-up opens (and perhaps
	// heals) the repo is a clean stop once it is done, never the default's exit 143.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ag, err := agent.New(agent.Options{
		Registry: reg,
		Config:   a.cfg,
		Now:      a.now,
		Logger:   log,
		Version:  version,
		LoadConfig: func() (memd.Config, error) {
			if err := a.load(); err != nil {
				return memd.Config{}, err
			}
			return a.cfg, nil
		},
		OnReload:          func(c memd.Config) { level.Set(service.ParseLevel(c.Log.Level)) },
		Notifier:          service.NewNotifier(log),
		ScheduleValidator: validateSchedule,
	})
	if err != nil {
		log.Error("start", "err", err)
		if errors.Is(err, gitlayout.ErrUnsupported) {
			return exitUsage // a layout memd refuses (sync/gitrepo layout.go): as a bad config
		}
		return exitFailed
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			ag.Reload()
		}
	}()
	if err := ag.Run(ctx); err != nil {
		log.Error("memd run", "err", err)
		var ce *memd.ConfigError
		if errors.As(err, &ce) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}
