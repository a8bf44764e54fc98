package gitrepo

import (
	"context"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/sync/gitremote"
)

// OptionsFromConfig maps the config's sync section onto Repo options (Logger, Now and
// Ignore are the caller's to set).
func OptionsFromConfig(cfg memd.Config) Options {
	return Options{
		Branch:      cfg.Sync.Branch,
		Author:      Author{Name: cfg.Sync.Author.Name, Email: cfg.Sync.Author.Email},
		Ledger:      cfg.Expire.Ledger,
		LockFile:    cfg.Lock.File,
		MaxDeletes:  cfg.Sync.MaxDeletes,
		MaxFileSize: int64(cfg.Sync.MaxFileSize),
	}
}

// RemoteOptionsFromConfig maps the config's sync section onto RemoteOptions.
func RemoteOptionsFromConfig(cfg memd.Config) RemoteOptions {
	s := cfg.Sync
	return RemoteOptions{
		Remote: s.Remote, Push: s.Push,
		SSHKey: memd.ExpandHome(s.SSHKey), KnownHosts: memd.ExpandHome(s.KnownHosts),
		TokenEnv: s.TokenEnv, TokenFile: memd.ExpandHome(s.TokenFile),
		Ledger:  cfg.Expire.Ledger,
		Timeout: s.Timeout.D(),
	}
}

// target resolves how one op ("fetch", "push") reaches rawURL from the repo at dir, with
// ro's keys as overrides (gitremote.Credentials.Resolve).
func (ro RemoteOptions) target(ctx context.Context, dir, op, rawURL string) (*gitremote.Target, error) {
	return gitremote.Credentials{SSHKey: ro.SSHKey, KnownHosts: ro.KnownHosts, TokenEnv: ro.TokenEnv, TokenFile: ro.TokenFile}.Resolve(ctx, dir, op, rawURL)
}
