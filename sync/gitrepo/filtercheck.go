package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/memd-dev/memd/internal/gitconfig"
	"github.com/memd-dev/memd/internal/gitlayout"
	"github.com/memd-dev/memd/sync/gitattr"
)

// FilterCheck is `memd doctor`'s look at what git does to the bytes of HEAD's files: the
// filter drivers in use, the paths whose driver is not defined here (a git-crypt repo not
// unlocked), and the paths whose committed blob is not what `git add` would store for
// what `git checkout` writes (a blob an older memd committed unfiltered).
type FilterCheck struct {
	Drivers []string // named by HEAD's attributes and defined in git config
	Locked  []string // named by the attributes, not defined in git config
	Differ  []FilterDiffer
}

// FilterDiffer is one committed blob git would not have stored.
type FilterDiffer struct {
	Path   string
	Filter string // the driver, "" for a line-ending rule
}

// CheckFilters runs FilterCheck over HEAD of the work tree at dir (read-only).
func CheckFilters(dir string) (FilterCheck, error) {
	var out FilterCheck
	abs, err := filepath.Abs(dir)
	if err != nil {
		return out, err
	}
	l, err := gitlayout.Resolve(abs)
	if err != nil {
		return out, fmt.Errorf("check filters in %s: %w", dir, err)
	}
	gr, err := openGit(l)
	if err != nil {
		return out, fmt.Errorf("check filters in %s: %w", dir, err)
	}
	ref, err := gr.Head()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return out, nil // nothing committed yet
	}
	if err != nil {
		return out, fmt.Errorf("check filters in %s: %w", dir, err)
	}
	c, err := gr.CommitObject(ref.Hash())
	if err != nil {
		return out, fmt.Errorf("check filters in %s: %w", dir, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return out, fmt.Errorf("check filters in %s: %w", dir, err)
	}
	cfg, _ := gitconfig.ForRepo(context.Background(), l)
	eng := gitattr.New(abs, l.CommonDir, cfg)
	defer eng.Close()
	drivers := map[string]bool{}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !f.Mode.IsFile() || f.Mode == filemode.Symlink {
			return nil
		}
		cv := eng.Conv(f.Name)
		if cv.Identity() {
			return nil
		}
		if cv.Undefined() {
			out.Locked = append(out.Locked, f.Name)
			return nil
		}
		if cv.Filter != "" {
			drivers[cv.Filter] = true
		}
		if !fixpoint(cv, f) {
			out.Differ = append(out.Differ, FilterDiffer{Path: f.Name, Filter: cv.Filter})
		}
		return nil
	})
	for d := range drivers {
		out.Drivers = append(out.Drivers, d)
	}
	sort.Strings(out.Drivers)
	return out, err
}

// fixpoint says whether clean(smudge(blob)) is the blob: what git stores for what it
// checks out. A driver that fails says nothing (not counted against the blob).
func fixpoint(cv gitattr.Conv, f *object.File) bool {
	rd, err := f.Reader()
	if err != nil {
		return true
	}
	blob, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return true
	}
	work, err := cv.Smudge(blob)
	if err != nil {
		return true
	}
	back, err := cv.Clean(work, func() bool { return bytes.IndexByte(blob, '\r') >= 0 })
	if err != nil {
		return true
	}
	return bytes.Equal(back, blob)
}

// LockedGitCrypt says whether the work tree file rel holds git-crypt's ciphertext.
func LockedGitCrypt(dir, rel string) bool {
	f, err := os.Open(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		return false
	}
	defer f.Close()
	var head [9]byte
	n, _ := io.ReadFull(f, head[:])
	return string(head[:n]) == "\x00GITCRYPT"
}
