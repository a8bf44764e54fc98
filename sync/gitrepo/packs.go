package gitrepo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// maxPacks is how many pack files may pile up before memd merges the small ones. Every
// go-git fetch writes a pack of its own, go-git keeps the index of every pack in memory and
// searches them all on a lookup, so a daemon that pulls every few minutes would otherwise
// grow its heap and slow its reads until the nightly `git gc --auto`.
var maxPacks = 16

// packCount is the number of pack files in the repository.
func (r *Repo) packCount() int {
	packs, _ := filepath.Glob(filepath.Join(r.commonDir, "objects", "pack", "*.pack"))
	return len(packs)
}

// consolidatePacksLocked merges small packs with `git repack --geometric=2 -d` when there
// are more than maxPacks: it rewrites only packs that are small next to the bigger ones (and
// loose objects), so its cost follows what was fetched lately, not the repository's size.
// Without git it leaves them to the nightly sleep, which skips gc too. Caller holds r.mu, so
// no memd job reads or writes objects meanwhile; go-git's view is refreshed afterwards.
func (r *Repo) consolidatePacksLocked(ctx context.Context) {
	if r.packCount() <= maxPacks {
		return
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return
	}
	// A .rev beside the new pack lets gitstore.PackIndex answer offset lookups from the file.
	cmd := exec.CommandContext(ctx, git, "-C", r.dir, "-c", "pack.writeReverseIndex=true", "repack", "--geometric=2", "-d", "-q")
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	r.log.Debug("merged fetched packs", "took", time.Since(t0)) // where a fetch's time goes
	r.syncPacksLocked()
	if err != nil {
		r.log.Warn("merging fetched packs failed; the nightly gc will", "err", err, "output", strings.TrimSpace(string(out)))
	}
}
