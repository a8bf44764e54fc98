package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage"

	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/sync/gitremote"
	"github.com/memd-dev/memd/sync/gitstore"
)

// checkLayout refuses, naming it, a layout memd cannot work in (gitlayout.ErrUnsupported;
// memd run exits 2): what git would do differently from what memd writes itself.
func checkLayout(l gitlayout.Layout) error {
	f, err := os.Open(l.Path("config"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // go-git's open says what is missing
	} else if err != nil {
		return err
	}
	cfg, err := config.ReadConfig(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", l.Path("config"), err)
	}
	core, ext := cfg.Raw.Section("core"), cfg.Raw.Section("extensions")
	// A linked worktree does not take core.bare or core.worktree from the shared config
	// (git-worktree(1), CONFIGURATION FILE): a worktree of a bare repo is common.
	if !l.Linked() && strings.EqualFold(core.Option("bare"), "true") {
		return fmt.Errorf("%w: a bare repository (core.bare = true in %s) has no work tree to keep", gitlayout.ErrUnsupported, l.Path("config"))
	}
	if f := ext.Option("objectformat"); f != "" && !strings.EqualFold(f, "sha1") {
		// memd hashes and writes objects itself, in SHA-1.
		return fmt.Errorf("%w: object format %q is not supported (sha1 only)", gitlayout.ErrUnsupported, f)
	}
	if f := ext.Option("refstorage"); f != "" && !strings.EqualFold(f, "files") {
		// memd reads and writes loose refs and packed-refs itself.
		return fmt.Errorf("%w: ref storage %q is not supported (files only)", gitlayout.ErrUnsupported, f)
	}
	if wt := core.Option("worktree"); wt != "" && !l.Linked() {
		// A submodule's git dir names its checkout so; any other work tree is git's, not this one.
		if !filepath.IsAbs(wt) {
			wt = filepath.Join(l.GitDir, wt)
		}
		if !sameDir(wt, l.WorkTree) {
			return fmt.Errorf("%w: core.worktree in %s names %s, not this checkout %s", gitlayout.ErrUnsupported, l.Path("config"), wt, l.WorkTree)
		}
	}
	return nil
}

// extensionsKnown is a storer whose config leaves out, for go-git's check of a repo's
// extensions at open (it knows none of them), the extensions memd works with as git does:
// partialClone (missing blobs fetched through the promisor, lazyFetcher), worktreeConfig
// (config.worktree is per worktree, gitlayout), preciousObjects (memd never prunes). The ones
// it cannot work with checkLayout refused before.
type extensionsKnown struct{ storage.Storer }

func (e extensionsKnown) Config() (*config.Config, error) {
	c, err := e.Storer.Config()
	if err != nil || c.Raw == nil || !c.Raw.HasSection("extensions") {
		return c, err
	}
	s := c.Raw.Section("extensions")
	for _, k := range []string{"partialclone", "worktreeconfig", "preciousobjects"} {
		s.RemoveOption(k)
	}
	return c, nil
}

func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// indexVersion is the version git writes the index at path in: the file's own (git keeps
// the version it read: a version-4 index stays 4), else index.version, else 4 under
// feature.manyFiles, else 2 (read-cache.c's get_index_format_default).
func indexVersion(path string, gr *git.Repository) uint32 {
	if v := gitstore.IndexFileVersion(path); v != 0 {
		return v
	}
	cfg, err := gr.ConfigScoped(config.GlobalScope) // the repo's, over the user's
	if err != nil {
		return 2
	}
	if v, err := strconv.Atoi(cfg.Raw.Section("index").Option("version")); err == nil && v >= 2 && v <= 4 {
		return uint32(v)
	}
	if b, _ := strconv.ParseBool(cfg.Raw.Section("feature").Option("manyFiles")); b {
		return 4
	}
	return 2
}

// partialClone: a clone made with --filter (a promisor remote, or the older
// extensions.partialClone), whose missing blobs git fetches when it reads them.
func partialClone(cfg *config.Config) bool {
	if cfg.Raw.Section("extensions").Option("partialclone") != "" {
		return true
	}
	for _, sub := range cfg.Raw.Section("remote").Subsections {
		if b, _ := strconv.ParseBool(sub.Option("promisor")); b {
			return true
		}
	}
	return false
}

// lazyFetchRetry is how long a blob the promisor remote could not give is not asked for
// again: a read that fails (offline) fails at once until then, not one fetch per read.
const lazyFetchRetry = time.Minute

// lazyFetcher fetches a partial clone's missing blob as git does, by asking git to read it
// (gitremote.FetchMissing). Safe for concurrent use.
func lazyFetcher(workTree string) func(h plumbing.Hash) error {
	var mu sync.Mutex
	failed := map[plumbing.Hash]time.Time{}
	return func(h plumbing.Hash) error {
		mu.Lock()
		at, ok := failed[h]
		mu.Unlock()
		if ok && time.Since(at) < lazyFetchRetry {
			return fmt.Errorf("blob %s: the promisor remote did not give it %s ago", h, time.Since(at).Round(time.Second))
		}
		err := gitremote.FetchMissing(context.Background(), workTree, h.String(), DefaultNetworkTimeout)
		mu.Lock()
		if err != nil {
			failed[h] = time.Now()
		} else {
			delete(failed, h)
		}
		mu.Unlock()
		return err
	}
}
