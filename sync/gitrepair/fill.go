package gitrepair

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// fillRounds bounds the rebuild-and-fetch rounds: a fetched tree brings what is under it,
// so a second round only meets what the first could not see.
const fillRounds = 3

// fill brings back every object the refs, HEAD and the index need and the commits pending
// refs wait for: first from the work tree, then from the remote.
func (r *repair) fill() error {
	var missing []string
	var fetchErr error
	for range fillRounds {
		var err error
		if missing, err = r.missing(); err != nil {
			return err
		}
		if len(missing) == 0 {
			return nil
		}
		if missing = r.rebuild(missing); len(missing) == 0 {
			continue
		}
		if fetchErr = r.fetch(missing); fetchErr != nil {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if fetchErr != nil {
		ctx, cancel := context.WithTimeout(r.ctx, max(r.o.Timeout, time.Minute))
		defer cancel()
		if _, err := git(ctx, r.o, "ls-remote", "--heads", r.o.Remote); err != nil {
			return fmt.Errorf("%d objects missing (%s…) and %s cannot be reached now (%v): %w", len(missing), short(missing[0]), r.o.Remote, err, ErrNotHealed)
		}
	}
	if len(r.pending) > 0 {
		return r.finishRefs() // names the lost commit, the clearer line
	}
	return fmt.Errorf("%d objects of commits made on this machine only are gone (%s…; %s does not have them); "+
		"lost: those commits' history; kept: the work tree as it is and the bad files in %s: %w",
		len(missing), short(missing[0]), r.o.Remote, r.rep.Quarantine, ErrLost)
}

// missing is what git finds absent, and the commits pending refs wait for.
func (r *repair) missing() ([]string, error) {
	ids, err := missingObjects(r.ctx, r.o)
	if err != nil {
		return nil, err
	}
	packs, _ := diagnosePacks(r.o)
	for _, want := range r.pending {
		if !has(r.o, packs, nil, want) {
			ids = append(ids, want)
		}
	}
	return dedupe(ids), nil
}

// rebuild writes the missing blobs a work tree file hashes to (as `git add` stores it: the
// path's filters applied) and then the index's trees (`git write-tree`); it returns what is
// still missing. The work tree is only read.
func (r *repair) rebuild(missing []string) []string {
	want := map[string]bool{}
	for _, id := range missing {
		want[id] = true
	}
	for id, paths := range r.candidates(want) {
		for _, p := range paths {
			out, err := git(r.ctx, r.o, "hash-object", "-w", "--path="+p, "--", filepath.Join(r.o.WorkDir, filepath.FromSlash(p)))
			if err == nil && strings.TrimSpace(out) == id {
				r.done("rebuilt object %s from the work tree's %s", short(id), p)
				delete(want, id)
				break
			}
		}
	}
	if !r.noIndex {
		_, _ = git(r.ctx, r.o, "write-tree") // a failure: a blob is still missing; the fetch brings the tree
	}
	var left []string
	packs, _ := diagnosePacks(r.o)
	for _, id := range missing {
		if want[id] && !has(r.o, packs, nil, id) {
			left = append(left, id)
		} else if want[id] {
			r.done("rebuilt object %s from the index", short(id))
		}
	}
	return left
}

// candidates maps each wanted id to the paths the index or HEAD's tree name it at.
func (r *repair) candidates(want map[string]bool) map[string][]string {
	out := map[string][]string{}
	add := func(listing string, idField int) {
		for _, l := range strings.Split(listing, "\n") {
			meta, path, ok := strings.Cut(l, "\t")
			f := strings.Fields(meta)
			if ok && len(f) > idField && want[f[idField]] {
				out[f[idField]] = append(out[f[idField]], path)
			}
		}
	}
	if !r.noIndex {
		ls, _ := git(r.ctx, r.o, "ls-files", "-s", "--full-name")
		add(ls, 1) // "<mode> <id> <stage>\t<path>"
	}
	tree, _ := git(r.ctx, r.o, "ls-tree", "-r", "--full-tree", "HEAD")
	add(tree, 2) // "<mode> blob <id>\t<path>"
	return out
}

// fetch asks the remote for the ids themselves. No "have" is sent (the noop negotiation):
// the remote would leave out what it thinks this repo has under its own commits, which is
// just what went missing.
func (r *repair) fetch(ids []string) error {
	args := append([]string{"-c", "fetch.negotiationAlgorithm=noop", "fetch", "--quiet", "--no-tags",
		"--no-write-fetch-head", "--no-auto-gc", "--no-recurse-submodules", r.o.Remote}, ids...)
	ctx := r.ctx
	if r.o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.o.Timeout)
		defer cancel()
	}
	if _, err := git(ctx, r.o, args...); err != nil {
		return err
	}
	r.done("fetched %d missing objects again from %s", len(ids), r.o.Remote)
	return nil
}

// rebuildIndex makes the index again from HEAD and the work tree's stat data, as `git reset`
// (mixed) does; the work tree is not written.
func (r *repair) rebuildIndex() error {
	if _, err := git(r.ctx, r.o, "rev-parse", "-q", "--verify", "HEAD^{commit}"); err != nil {
		if _, err := git(r.ctx, r.o, "read-tree", "--empty"); err != nil {
			return fmt.Errorf("rebuild index: %w", err)
		}
	} else if _, err := git(r.ctx, r.o, "reset", "-q", "--mixed", "HEAD"); err != nil {
		return fmt.Errorf("rebuild index: %w", err)
	}
	r.done("index was unreadable: rebuilt from HEAD and the work tree (its old copy in %s)", r.rep.Quarantine)
	return nil
}
