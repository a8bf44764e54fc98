package main

import (
	"strconv"
	"strings"

	"github.com/memd-dev/memd/internal/proc"
	"github.com/memd-dev/memd/internal/statedir"
)

// reportToDaemon tells a running `memd run` what this one-shot command did (docs/ARCHITECTURE.md §11: it
// shows in the daemon's last sleep, events and commits per hour within a second). No daemon
// running: nothing is written (the next `memd run` reads the repo itself). Best effort: a
// failure is logged, the command's own work stands.
func (a *app) reportToDaemon(r statedir.Report) {
	if !daemonRunning(a.cfg.StateDir()) {
		return
	}
	sd, err := statedir.Create(a.cfg.StateDir())
	if err != nil {
		a.log.Warn("report to the running daemon", "err", err)
		return
	}
	defer sd.Close()
	r.At = a.now()
	if err := sd.WriteReport(r); err != nil {
		a.log.Warn("report to the running daemon", "err", err)
	}
}

// kickDaemon asks a running daemon to re-read the state directory now (a pause written).
func (a *app) kickDaemon(sd *statedir.Dir) {
	if err := sd.Kick(a.now()); err != nil {
		a.log.Warn("kick the running daemon", "err", err)
	}
}

// daemonRunning: memd.pid names a live process (the daemon holds it while it runs).
func daemonRunning(stateDir string) bool {
	sd, err := statedir.Open(stateDir)
	if err != nil {
		return false
	}
	defer sd.Close()
	b, err := sd.ReadFile("memd.pid")
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && pid > 0 && proc.Alive(pid)
}
