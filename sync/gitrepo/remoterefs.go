package gitrepo

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// dropTornRemoteRefs removes loose remote-tracking refs that do not hold a hash. go-git's
// fetch and push rewrite refs/remotes/* in place (truncate, then write), so a memd killed in
// between leaves an empty ref, which makes `git fsck`, `git log --all` and the nightly
// `git gc` fail with "bad object". A tracking ref is only a cache of the remote: the next
// fetch writes it again.
func (r *Repo) dropTornRemoteRefs() {
	root := filepath.Join(r.commonDir, "refs", "remotes")
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		line := bytes.TrimSpace(data)
		if bytes.HasPrefix(line, []byte("ref: ")) {
			return nil // symbolic (refs/remotes/origin/HEAD)
		}
		if h := plumbing.NewHash(string(line)); len(line) == 40 && !h.IsZero() && h.String() == string(line) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			r.log.Warn("removed a torn remote-tracking ref; the next fetch writes it again", "ref", p, "content", string(line))
		}
		return nil
	})
}
