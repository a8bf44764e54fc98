package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/repofiles"
	"github.com/memd-dev/memd/internal/safefs"
	"github.com/memd-dev/memd/metrics/statusline"

	"github.com/memd-dev/memd/sync/gitstore"
)

// Errors `memd resolve` callers branch on.
var (
	// ErrNoConflict: the path names no conflict copy in the tree (none beside it).
	ErrNoConflict = errors.New("no conflict copy")
	// ErrAmbiguousConflict: the path has more than one conflict copy beside it; name the copy.
	ErrAmbiguousConflict = errors.New("more than one conflict copy")
	// ErrBadKeep: --keep is not ours, theirs or both.
	ErrBadKeep = errors.New("keep must be ours, theirs or both")
)

// Keep choices of Resolve. A conflict copy holds ours (the version of the machine that made
// the merge, memd.ConflictCopyPath); the original path holds theirs.
const (
	KeepOurs   = "ours"
	KeepTheirs = "theirs"
	KeepBoth   = "both"
)

// Trailers of the commits a person asks for (resolve, restore): what was done, so `memd log`
// and the page can say it.
const (
	TrailerAction = "Memd-Action"
	TrailerKeep   = "Memd-Keep"
	TrailerFrom   = "Memd-Restored-From"
)

// copyParts splits a conflict copy's base name: machine (with its -N when the name was
// taken) and UTC time, as memd.ConflictCopyPath writes them.
var copyParts = regexp.MustCompile(`\.conflict-([a-z0-9-]+)-(\d{8}T\d{6}Z)(\.[^.]*)?$`)

// ConflictOf describes the conflict copy cp (repo-relative) found in the work tree at dir:
// the original path, the machine and time from its name, and the blob ids of both versions as
// git would name them (ours: the copy; theirs: the original, "" when it is gone).
func ConflictOf(dir, cp string) (statusline.Conflict, error) {
	orig, ok := memd.ConflictCopyOriginal(cp)
	if !ok {
		return statusline.Conflict{}, fmt.Errorf("%s: %w", cp, ErrNoConflict)
	}
	c := statusline.Conflict{Path: orig, Copy: cp}
	if m := copyParts.FindStringSubmatch(path.Base(cp)); m != nil {
		c.Machine = m[1]
		c.At, _ = time.Parse("20060102T150405Z", m[2])
	}
	var err error
	if c.Ours, err = blobIDOf(dir, cp); err != nil {
		return c, err
	}
	if c.Theirs, err = blobIDOf(dir, orig); errors.Is(err, fs.ErrNotExist) {
		c.Theirs, err = "", nil
	}
	return c, err
}

// blobIDOf is the git blob id of the work-tree file rel, read without following a symlink
// on the way (a symlink itself is hashed as its target, as git stores it).
func blobIDOf(dir, rel string) (string, error) {
	t, err := safefs.Open(dir)
	if err != nil {
		return "", err
	}
	defer t.Close()
	fi, err := t.Lstat(rel)
	if err != nil {
		return "", err
	}
	var data []byte
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := t.Readlink(rel)
		if err != nil {
			return "", err
		}
		data = []byte(target)
	} else if data, err = t.ReadFile(rel); err != nil {
		return "", err
	}
	return gitstore.HashObject(plumbing.BlobObject, data).String(), nil
}

// ListConflicts is every conflict copy in the work tree at dir (ignore applied, as the
// committer walks), sorted by copy path. A ledger's losers file (memory.conflicts.jsonl)
// is not a copy: it is merged by hand, not resolved.
func ListConflicts(dir string, ignore repofiles.Rule) ([]statusline.Conflict, error) {
	var copies []string
	err := repofiles.Walk(dir, "", ignore, repofiles.Funcs{File: func(rel string, _ fs.DirEntry) error {
		if _, ok := memd.ConflictCopyOriginal(rel); ok {
			copies = append(copies, rel)
		}
		return nil
	}})
	if err != nil {
		return nil, fmt.Errorf("conflicts in %s: %w", dir, err)
	}
	return ConflictsOf(dir, copies), nil
}

// ConflictsOf describes each of copies (the agent's inventory already knows them); a copy
// that vanished meanwhile is left out.
func ConflictsOf(dir string, copies []string) []statusline.Conflict {
	out := []statusline.Conflict{}
	for _, cp := range copies {
		if c, err := ConflictOf(dir, cp); err == nil {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Copy < out[j].Copy })
	return out
}

// FindConflict is the one conflict p names: p is a copy, or the original with exactly one
// copy beside it.
func FindConflict(dir, p string, ignore repofiles.Rule) (statusline.Conflict, error) {
	if _, ok := memd.ConflictCopyOriginal(p); ok {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return statusline.Conflict{}, fmt.Errorf("%s: %w", p, ErrNoConflict)
		}
		return ConflictOf(dir, p)
	}
	all, err := ListConflicts(dir, ignore)
	if err != nil {
		return statusline.Conflict{}, err
	}
	var mine []statusline.Conflict
	for _, c := range all {
		if c.Path == p {
			mine = append(mine, c)
		}
	}
	switch len(mine) {
	case 0:
		return statusline.Conflict{}, fmt.Errorf("%s: %w beside it", p, ErrNoConflict)
	case 1:
		return mine[0], nil
	}
	names := make([]string, len(mine))
	for i, c := range mine {
		names[i] = c.Copy
	}
	return statusline.Conflict{}, fmt.Errorf("%s: %w (%s): name the copy", p, ErrAmbiguousConflict, strings.Join(names, ", "))
}

// KeptName is where `--keep both` puts the copy: its original name with the machine added
// (notes.html → notes-laptop.html), numbered when taken, so it is a normal memory of its own.
func KeptName(dir string, c statusline.Conflict) string {
	d, base := path.Split(c.Path)
	ext := path.Ext(base)
	stem := strings.TrimSuffix(base, ext)
	if stem == "" {
		stem, ext = base, ""
	}
	machine := c.Machine
	if machine == "" {
		machine = "copy"
	}
	for i := 1; ; i++ {
		name := d + stem + "-" + machine + ext
		if i > 1 {
			name = fmt.Sprintf("%s%s-%s-%d%s", d, stem, machine, i, ext)
		}
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); errors.Is(err, fs.ErrNotExist) {
			return name
		}
	}
}
