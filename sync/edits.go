package sync

// Edits made while a checkout runs (DESIGN §4). Writers take no lock (editors and
// agents write as they like), so a file may change between the check that it still holds
// the old head's content and the moment the checkout would replace it. The checkout then
// leaves it alone — and the branch has already moved past the version the edit was made
// on. Committing that file later would record it as an edit of the merge result: for
// memory.jsonl, a deletion of every record the merge brought in (issue 13: lost ledger
// records under ten writing machines).
//
// So the edit is committed on the head it was made on (a side commit whose parent is the
// old head) and merged into the new head like any other change: the record-level ledger
// merge sees both sides, a memory edited on both sides gets its conflict copy. The merge
// commit has the new head and the side commit as parents. The checkout of that merge may
// race a writer again; each round starts from the previous side commit, bounded by
// maxEditMerges. While a round is unfinished the merge marker names the side commit, so
// a crash, a later Sync or the next commit (requireNoMergeLocked finishes an interrupted
// checkout first) resumes from what the work tree really holds.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/sync/treemerge"
)

// ErrCheckoutRaced says writers kept editing the paths a checkout had to update, round
// after round: the branch is at the merge, the edits are on disk, the merge marker stays
// and the next commit or sync finishes the job. Nothing is lost.
var ErrCheckoutRaced = errors.New("work tree edited during every checkout round")

// maxEditMerges bounds the commit-and-merge rounds for edits made during a checkout. A
// round takes milliseconds; a writer racing eight in a row is editing continuously.
const maxEditMerges = 8

// editMerge is where moveHeadLocked left the branch.
type editMerge struct {
	Head      plumbing.Hash // the branch head at the end (nw, or the last edit merge)
	Rounds    int           // edit merges made
	Conflicts []string      // conflict copies those merges wrote
}

// mergeEditsLocked: the branch moved from base to head, and the checkout found skipped
// (repo-relative) edited since it checked them; their From side in the checkout was
// base's entry. Commit them on base, merge into head, check out; repeat while the
// checkout is raced. skipped empty = nothing to do (the marker is already gone).
func (r *Repo) mergeEditsLocked(base, head plumbing.Hash, skipped []string) (editMerge, error) {
	res := editMerge{Head: head}
	s := r.repo.Storer
	for len(skipped) > 0 {
		if base.IsZero() {
			// A first checkout into an unborn branch (adopt): no head the edits were
			// made on; they stay in the tree for the next commit, as before.
			r.log.Info("paths edited during checkout left for the next commit", "repo", r.dir, "paths", skipped)
			return res, r.removeMergeMarker()
		}
		if res.Rounds == maxEditMerges {
			return res, fmt.Errorf("sync %s: %s: %w (%d rounds); kept on disk, merged by the next commit or sync",
				r.dir, strings.Join(skipped, ", "), ErrCheckoutRaced, res.Rounds)
		}
		res.Rounds++
		cr, side, err := r.writeChangeCommitLocked(base, skipped, "", KindChange, nil)
		if err != nil {
			return res, fmt.Errorf("commit edits made during checkout in %s: %w", r.dir, err)
		}
		if side.IsZero() {
			side = base // the edits are not committable (ignored, unreadable) or undone
		}
		baseTree, err := r.commitTreeLocked(base)
		if err != nil {
			return res, err
		}
		sideTree, err := r.commitTreeLocked(side)
		if err != nil {
			return res, err
		}
		headTree, err := r.commitTreeLocked(head)
		if err != nil {
			return res, err
		}
		mr, err := r.mergeTreesLocked(baseTree, sideTree, headTree, r.editPolicy())
		if err != nil {
			return res, fmt.Errorf("merge edits made during checkout into %s in %s: %w", short(head), r.dir, err)
		}
		changes := map[string]pathChange{}
		if err := treemerge.DiffTrees(s, headTree, mr.Tree, "", changes); err != nil {
			return res, err
		}
		// The work tree holds side's version at the edited paths, whatever head has.
		for _, p := range skipped {
			from, err := treemerge.TreeFile(s, sideTree, p)
			if err != nil {
				return res, err
			}
			to, err := treemerge.TreeFile(s, mr.Tree, p)
			if err != nil {
				return res, err
			}
			if from.Same(to) {
				delete(changes, p)
				continue
			}
			if side == base {
				// Nothing of the edit could be committed: never overwrite it.
				r.log.Warn("path edited during checkout cannot be committed; left as it is", "repo", r.dir, "path", p)
				delete(changes, p)
				continue
			}
			changes[p] = pathChange{From: from, To: to}
		}
		next := head
		msg := "memd: merge edits made during checkout"
		if side != base {
			msg = editMergeMessage(r.opts.Hostname, cr.Changes, mr.Conflicts)
			next, err = r.writeCommitLocked(mr.Tree, []plumbing.Hash{head, side}, msg)
			if err != nil {
				return res, fmt.Errorf("write edit merge commit in %s: %w", r.dir, err)
			}
		}
		r.log.Info("merged edits made during sync", "repo", r.dir, "paths", skipped, "round", res.Rounds,
			"side", short(side), "commit", short(next), "conflicts", len(mr.Conflicts))
		late, err := r.moveHeadFromLocked(side, head, next, changes, firstLine(msg), nil)
		var wc *WorktreeChangedError
		if errors.As(err, &wc) && !wc.Moved {
			// Edited again before the branch moved: nothing moved, the marker
			// still names base; commit what the tree holds now, next round.
			skipped = unionPaths(skipped, wc.Paths)
			continue
		}
		if err != nil {
			return res, err
		}
		skipped = late
		res.Head = next
		res.Conflicts = append(res.Conflicts, mr.Conflicts...)
		base, head = side, next
	}
	return res, nil
}

func unionPaths(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range append(append([]string(nil), a...), b...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// editPolicy is the merge policy for edit merges (the sync's own ledger and host).
func (r *Repo) editPolicy() memd.MergePolicy {
	l := r.opts.Ledger
	if l == "" {
		l = memd.DefaultLedgerFile
	}
	return memd.MergePolicy{Ledgers: []string{l}, Host: r.opts.Hostname, Now: r.opts.Now()}
}

// editMergeMessage: what the side commit changed, its conflict copies, the host trailer.
func editMergeMessage(host string, changes []Change, conflicts []string) string {
	var b strings.Builder
	b.WriteString("memd: merge edits made during checkout\n\n")
	for i, c := range changes {
		if i == MaxListedPaths {
			fmt.Fprintf(&b, "… and %d more\n", len(changes)-i)
			break
		}
		fmt.Fprintf(&b, "%c %s\n", c.Op, strings.ReplaceAll(c.Path, "\n", `\n`))
	}
	for _, c := range conflicts {
		fmt.Fprintf(&b, "conflict copy %s\n", strings.ReplaceAll(c, "\n", `\n`))
	}
	fmt.Fprintf(&b, "\n%s: %s\n", TrailerHost, strings.ReplaceAll(host, "\n", " "))
	return b.String()
}
