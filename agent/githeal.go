package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/format/writerlock"
	"github.com/memd-dev/memd/metrics/statusline"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitrepair"
)

// GitDir is the git directory of the work tree dir: .git, or where a `.git` file's
// "gitdir:" line points.
func GitDir(dir string) string {
	p := filepath.Join(dir, ".git")
	data, err := os.ReadFile(p)
	if err != nil {
		return p // a directory (or nothing: gitrepo.Open names that)
	}
	if rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:"); ok {
		g := strings.TrimSpace(rest)
		if !filepath.IsAbs(g) {
			g = filepath.Join(dir, g)
		}
		return g
	}
	return p
}

// GitRepairOptions are gitrepair's options for cfg's repo (docs/ARCHITECTURE.md §9.7).
func GitRepairOptions(cfg memd.Config, log *slog.Logger, now func() time.Time, deep bool) gitrepair.Options {
	o := gitrepair.Options{GitDir: GitDir(cfg.Repo), WorkDir: cfg.Repo, Branch: cfg.Sync.Branch,
		Remote: cfg.Sync.Remote, Deep: deep, Log: log, Now: now, Timeout: cfg.Sync.Timeout.D()}
	if k := memd.ExpandHome(cfg.Sync.SSHKey); k != "" {
		ssh := "ssh -o BatchMode=yes -o IdentitiesOnly=yes -i '" + strings.ReplaceAll(k, "'", `'\''`) + "'"
		if kh := memd.ExpandHome(cfg.Sync.KnownHosts); kh != "" {
			ssh += " -o UserKnownHostsFile='" + strings.ReplaceAll(kh, "'", `'\''`) + "'"
		}
		o.GitEnv = append(o.GitEnv, "GIT_SSH_COMMAND="+ssh)
	}
	return o
}

// stoppedUncleanly: the last status document memd run wrote is not its clean stop's, so
// the machine or memd may have died mid-write: the deep check runs.
func stoppedUncleanly(cfg memd.Config) bool {
	d, err := statusline.Read(cfg.StateDir())
	return err == nil && d.State != statusline.StateStopped
}

// RepairGitDir finds and heals what a crash left in cfg's git directory, holding the
// writer lock (§9.4) so no memd or writer works beside it. deep: every object read whole
// (gitrepair.Options.Deep). The problems found are returned with what was done.
func RepairGitDir(ctx context.Context, cfg memd.Config, log *slog.Logger, now func() time.Time, who string, deep bool) ([]gitrepair.Problem, gitrepair.Report, error) {
	o := GitRepairOptions(cfg, log, now, deep)
	ps, err := gitrepair.Diagnose(ctx, o)
	if err != nil || len(ps) == 0 {
		return ps, gitrepair.Report{}, err
	}
	lk, err := writerlock.Acquire(ctx, cfg.LockPath(), writerlock.Options{Timeout: cfg.Lock.Timeout.D(), Context: who, Logger: log})
	if err != nil {
		return ps, gitrepair.Report{}, fmt.Errorf("repair %s: %w", o.GitDir, err)
	}
	defer func() {
		if err := lk.Release(); err != nil {
			log.Warn("release writer lock", "err", err)
		}
	}()
	if ps, err = gitrepair.Diagnose(ctx, o); err != nil || len(ps) == 0 { // again, under the lock
		return ps, gitrepair.Report{}, err
	}
	for _, p := range ps {
		log.Warn("git directory damaged", "problem", p.String())
	}
	rep, err := gitrepair.Repair(ctx, o, ps)
	return ps, rep, err
}

// healAtOpen is Open's first step: what a crash left in the git directory, healed before
// anything reads it (go-git cannot even open an empty HEAD). memd run after an unclean stop
// looks deep. ErrLost fails Open; damage that may heal later (the remote unreachable) is
// kept as the session's pending repair.
func (s *Session) healAtOpen(ctx context.Context, o OpenOptions) error {
	deep := o.Who == "memd" && stoppedUncleanly(s.cfg)
	_, rep, err := RepairGitDir(ctx, s.cfg, s.log, s.now, o.Who, deep)
	s.healed = append(s.healed, rep.Done...)
	if errors.Is(err, gitrepair.ErrLost) {
		return err
	}
	if err != nil {
		s.log.Warn("git directory not healed yet; memd tries again", "err", err)
		s.healPending = err.Error()
	}
	return nil
}

// GitRepairs are the repairs Open made (one line each) and what it could not heal yet ("":
// nothing), for the agent's events and warnings.
func (s *Session) GitRepairs() (done []string, pending string) { return s.healed, s.healPending }

// damaged reports whether err looks like a read that met a broken git directory: a corrupt
// or missing object, a bad pack or index. A false alarm costs one deep check.
func damaged(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, gitremote.ErrOffline) || errors.Is(err, gitremote.ErrAuth) || errors.Is(err, gitremote.ErrPushRejected) {
		return false // the network's or the remote's words, not this repo's
	}
	msg := err.Error()
	for _, s := range []string{"loose object", "object not found", "zlib", "bad index file", "index file smaller", "index file corrupt", "malformed", "invalid checksum"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// healAgainAfter bounds how often a failing job asks for the deep check.
const healAgainAfter = 2 * time.Minute

// gitHeal is the agent's side of the repairs: what is not healed yet (a status warning
// until it is), what was lost (state error), when the last look ran. Owner-goroutine only.
type gitHeal struct {
	pending string
	lost    string
	last    time.Time
}

func (g *gitHeal) warnings() []string {
	if g.pending == "" {
		return nil
	}
	return []string{"git directory damaged, repair not finished: " + g.pending}
}

// noteRepairs turns Open's repairs into events.
func (a *Agent) noteRepairs(done []string, pending string) {
	for _, line := range done {
		a.event(statusline.KindWarn, statusline.Part{Text: "git repaired:", Kind: statusline.KindWarn}, statusline.Part{Text: " " + line})
	}
	a.heal.pending = pending
}

// healIfDamaged runs the deep check and repair when a job's error (or a repair still
// pending) says the git directory is damaged; at most once per healAgainAfter.
func (a *Agent) healIfDamaged(ctx context.Context, jobErr error) {
	if a.heal.lost != "" || (!damaged(jobErr) && a.heal.pending == "") {
		return
	}
	if !a.heal.last.IsZero() && a.now().Sub(a.heal.last) < healAgainAfter {
		return
	}
	a.heal.last = a.now()
	_, rep, err := RepairGitDir(ctx, a.cfg, a.log, a.now, "memd", true)
	a.noteRepairs(rep.Done, "")
	switch {
	case errors.Is(err, gitrepair.ErrLost):
		a.heal.lost = err.Error()
		a.st.lastErr = a.heal.lost
		a.event(statusline.KindError, statusline.Part{Text: "error:", Kind: statusline.KindError}, statusline.Part{Text: " " + a.heal.lost})
		a.log.Error("git directory cannot be healed; memd stops working on it", "err", err)
	case err != nil:
		a.heal.pending = err.Error()
		a.log.Warn("git directory not healed yet", "err", err)
	case len(rep.Done) > 0:
		a.heal.last = time.Time{} // healed: a new damage is looked at at once
		kick(a.k.commit)
	}
}

// WriteLostStatus is the status document of a memd that cannot start because something
// only this machine had is gone (gitrepair.ErrLost): state error with the one line.
func WriteLostStatus(cfg memd.Config, now time.Time, err error) error {
	var ev eventLog
	if prev, rerr := statusline.Read(cfg.StateDir()); rerr == nil {
		ev.restore(prev)
	}
	ev.add(now, statusline.KindError, statusline.Part{Text: "error:", Kind: statusline.KindError}, statusline.Part{Text: " " + err.Error()})
	return statusline.Write(cfg.StateDir(), statusline.Compose(statusline.Facts{
		Now: now, PID: os.Getpid(), Repo: cfg.Repo, Error: err.Error(), Events: ev.list(),
	}))
}
