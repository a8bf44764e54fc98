package main

import (
	"context"
	"fmt"
	"time"

	"github.com/memd-dev/memd/doctor"
	"github.com/memd-dev/memd/sync/remotehelper"
)

// doctorRemote is the remote helper the sync remote goes through (nil: none, or no such
// remote), asked of git without reaching the remote; a helper git cannot find is a problem
// (every sync would fail).
func doctorRemote(a *app, rep *doctor.Report) *remotehelper.Info {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	in, ok := remotehelper.Describe(ctx, a.cfg.Repo, a.cfg.Sync.Remote)
	if !ok || in.Helper == "" {
		return nil
	}
	if !in.Installed {
		rep.Findings = append(rep.Findings, doctor.Finding{Severity: doctor.Problem, Check: "remote",
			Message: fmt.Sprintf("remote %s (%s) goes through git-remote-%s, which git cannot find: install it (sync fails until then)", in.Remote, in.URL, in.Helper)})
		rep.Problems++
	}
	return &in
}

// doctorJSON is the report with the remote helper beside its fields.
type doctorJSON struct {
	*doctor.Report
	RemoteHelper *remotehelper.Info `json:"remote_helper,omitempty"`
}
