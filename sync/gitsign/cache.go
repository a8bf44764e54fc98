package gitsign

import (
	"context"
	"fmt"
	"os/exec"
	"sync"

	"github.com/memd-dev/memd/internal/gitconfig"
)

// Cache keeps the signer of one repository, read again only when the caller's stamp of
// git's config files moves (a repo's `git config commit.gpgsign true`, the user's
// ~/.gitconfig edited): the commit that finds the stamp unchanged pays no process.
type Cache struct {
	// Read reads git's config for gitDir (nil: gitconfig.Read): the repo passes the
	// process's shared read (gitconfig.ForRepo), so signing costs no run of its own.
	Read func(ctx context.Context, gitDir string) ([][2]string, error)

	mu     sync.Mutex
	loaded bool
	stamp  string
	s      *Signer
}

// Signer is the signer git would use in the repository whose git directory is gitDir
// (nil: git would not sign), read through git's own config reader (gitconfig.Read:
// repo, user, XDG and system files, includes followed). stamp names the state of the config
// files; an unchanged stamp returns the signer read last. A config that cannot be read is
// an ErrSign error, not cached. Without a git binary nothing is read and nothing signed.
func (c *Cache) Signer(ctx context.Context, gitDir, stamp string) (*Signer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded && c.stamp == stamp {
		return c.s, nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		c.loaded, c.stamp, c.s = true, stamp, nil
		return nil, nil
	}
	read := c.Read
	if read == nil {
		read = func(ctx context.Context, gitDir string) ([][2]string, error) { return gitconfig.Read(ctx, gitDir) }
	}
	kv, err := read(ctx, gitDir)
	if err != nil {
		return nil, fmt.Errorf("%w: read git's signing config: %w", ErrSign, err)
	}
	s, err := FromConfig(kv)
	if err != nil {
		return nil, err
	}
	c.loaded, c.stamp, c.s = true, stamp, s
	return s, nil
}

// Sign is commit signed as git would sign it in the repository at gitDir (Signer), or
// commit as it is where git would not sign. committer is "Name <email>".
func (c *Cache) Sign(ctx context.Context, gitDir, stamp string, commit []byte, committer string) ([]byte, error) {
	s, err := c.Signer(ctx, gitDir, stamp)
	if err != nil || s == nil {
		return commit, err
	}
	return s.SignCommit(ctx, commit, committer)
}
