package agent

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"syscall"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/registry"
	"github.com/memd-dev/memd/internal/statedir"
)

// HTTPAddrFile is the state directory's record of where this repo's page and /metrics
// listen, for readers that need the port (another instance took the default one).
const HTTPAddrFile = "http.addr"

// Several repos, one machine (README "Several repos"): each `memd run` listens where
// http.listen says; when that is the default address and another instance already holds
// it, it takes a port of its own, the same one every start where it is free (derived from
// the repo path, so a bookmark keeps working), else any free one.
const (
	fallbackBase  = 47101
	fallbackRange = 899 // 47101–47999
)

// startHTTP starts the server on the configured address or, when that is the default one
// and taken, on the repo's own port; it records the address in the state directory.
func (a *Agent) startHTTP() error {
	if a.cfg.HTTP.Listen == "" {
		return nil
	}
	addrs := []string{a.cfg.HTTP.Listen}
	if a.cfg.HTTP.Listen == memd.DefaultConfig().HTTP.Listen {
		host, _, _ := net.SplitHostPort(a.cfg.HTTP.Listen)
		addrs = append(addrs, net.JoinHostPort(host, strconv.Itoa(repoPort(a.cfg.Repo))), net.JoinHostPort(host, "0"))
	}
	var err error
	for i, addr := range addrs {
		s := newServerAt(a, addr)
		if err = s.Start(); err == nil {
			a.server = s
			if i > 0 {
				a.log.Info("http: the default address is taken (another memd?); using this repo's own", "default", a.cfg.HTTP.Listen)
			}
			a.log.Info("http listening", "addr", s.Addr())
			a.recordHTTP(s.Addr())
			return nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	return fmt.Errorf("http %s: %w", a.cfg.HTTP.Listen, err)
}

// repoPort is the repo's own fallback port.
func repoPort(repo string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(repo))
	return fallbackBase + int(h.Sum32()%fallbackRange)
}

// recordHTTP writes the address into the state directory; a failure only loses the record.
func (a *Agent) recordHTTP(addr string) {
	d, err := statedir.Create(a.cfg.StateDir())
	if err == nil {
		err = d.WriteFile(HTTPAddrFile, []byte(addr+"\n"), 0o600)
		d.Close()
	}
	if err != nil {
		a.log.Warn("http: address not recorded", "err", err)
	}
}

// register adds this repo to the machine's registry (internal/registry) for `memd status
// --all` and `memd service list`. Best effort: a registry that cannot be written costs only
// the --all line.
func (a *Agent) register() {
	if a.opts.Registry == "" {
		return
	}
	e := registry.Entry{Repo: a.cfg.Repo, PID: os.Getpid(), StartedAt: a.now().UTC()}
	if a.server != nil {
		e.HTTP = a.server.Addr()
	}
	if err := registry.Register(a.opts.Registry, e); err != nil {
		a.log.Warn("registry: this repo is not listed for memd status --all", "err", err)
	}
}
