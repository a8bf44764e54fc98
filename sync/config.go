package sync

import "github.com/memd-dev/memd"

// OptionsFromConfig maps the config's sync section onto Repo options (Logger, Now and
// Ignore are the caller's to set).
func OptionsFromConfig(cfg memd.Config) Options {
	return Options{
		Branch: cfg.Sync.Branch,
		Author: Author{Name: cfg.Sync.Author.Name, Email: cfg.Sync.Author.Email},
		Ledger: cfg.Expire.Ledger,
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
