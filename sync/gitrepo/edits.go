package gitrepo

// Edits made while a checkout runs (docs/ARCHITECTURE.md §4). Writers take no lock (editors and
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
	"time"

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
// checkout is raced. Each round also carries what writers left in the versions the
// checkouts took off their names (heldVersion, checkout.go): merged three-way against
// the version the checkout verified, on top of the round's result. When nothing is
// left to merge the held versions are released. skipped empty and nothing held
// changed = nothing to do (the marker is already gone).
func (r *Repo) mergeEditsLocked(base, head plumbing.Hash, skipped []string) (editMerge, error) {
	res := editMerge{Head: head}
	for {
		now := time.Now() // one instant for both: what is released was read
		held := r.heldEditsLocked(now)
		if len(skipped) == 0 && len(held) == 0 {
			r.releaseHeldLocked(now)
			return res, nil
		}
		if base.IsZero() && len(skipped) > 0 {
			// A first checkout into an unborn branch (adopt): no head the edits were
			// made on; they stay in the tree for the next commit, as before.
			r.log.Info("paths edited during checkout left for the next commit", "repo", r.dir, "paths", skipped)
			return res, r.removeMergeMarker()
		}
		if res.Rounds == maxEditMerges {
			// The held versions stay held: the next edit merge carries them.
			return res, fmt.Errorf("sync %s: %s: %w (%d rounds); kept on disk, merged by the next commit or sync",
				r.dir, strings.Join(append(skipped, heldPaths(held)...), ", "), ErrCheckoutRaced, res.Rounds)
		}
		res.Rounds++
		// The renames of the checkout before are durable before this round's
		// marker replaces the one that guards them (durable.go).
		if err := r.syncDurableDirsLocked(); err != nil {
			return res, err
		}
		rd, err := r.mergeEditRoundLocked(base, head, skipped, held)
		if err != nil {
			return res, err
		}
		if len(held) > 0 && len(skipped) == 0 && rd.merged == rd.headTree {
			// What the writers left is in head already: nothing to commit.
			markCarried(held)
			res.Rounds--
			continue
		}
		changes, err := r.editChangesLocked(rd, base, skipped)
		if err != nil {
			return res, err
		}
		next, msg, err := r.commitEditRoundLocked(rd, base, head)
		if err != nil {
			return res, err
		}
		// The marker names what the work tree holds outside changes' To: side at the
		// edited paths, head everywhere else (all of it when only held versions
		// were carried).
		from := rd.side
		if len(skipped) == 0 {
			from = head
		}
		r.log.Info("merged edits made during sync", "repo", r.dir, "paths", skipped, "carried", heldPaths(held),
			"round", res.Rounds, "side", short(rd.side), "commit", short(next), "conflicts", len(rd.conflicts))
		late, err := r.moveHeadFromLocked(from, head, next, changes, firstLine(msg), nil)
		var wc *WorktreeChangedError
		if errors.As(err, &wc) && !wc.Moved {
			// Edited again before the branch moved: nothing moved, the marker
			// still names base; commit what the tree holds now, next round (the
			// held versions are read again then).
			skipped = unionPaths(skipped, wc.Paths)
			continue
		}
		if err != nil {
			return res, err
		}
		markCarried(held)
		skipped = late
		res.Head = next
		res.Conflicts = append(res.Conflicts, rd.conflicts...)
		base, head = from, next
	}
}

// editRound is one round of mergeEditsLocked: the edits committed on base
// (side) merged into head's tree, and the held versions carried on top.
type editRound struct {
	headTree  plumbing.Hash
	side      plumbing.Hash // the side commit; base when nothing was committable
	sideTree  plumbing.Hash
	merged    plumbing.Hash     // the round's tree
	cr        memd.CommitResult // the side commit's changes
	conflicts []string
	carried   []memd.Change // the held versions carried
}

// mergeEditRoundLocked commits skipped on base, merges that side commit into
// head's tree and the held versions on top of the result.
func (r *Repo) mergeEditRoundLocked(base, head plumbing.Hash, skipped []string, held []heldEdit) (editRound, error) {
	headTree, err := r.commitTreeLocked(head)
	if err != nil {
		return editRound{}, err
	}
	rd := editRound{headTree: headTree, side: base, merged: headTree}
	if len(skipped) > 0 {
		if rd.cr, rd.side, _, err = r.writeChangeCommitLocked(base, skipped, "", memd.CommitChange, nil, false); err != nil {
			return rd, fmt.Errorf("commit edits made during checkout in %s: %w", r.dir, err)
		}
		if rd.side.IsZero() {
			rd.side = base // the edits are not committable (ignored, unreadable) or undone
		}
		baseTree, err := r.commitTreeLocked(base)
		if err != nil {
			return rd, err
		}
		if rd.sideTree, err = r.commitTreeLocked(rd.side); err != nil {
			return rd, err
		}
		mr, err := r.mergeTreesLocked(baseTree, rd.sideTree, headTree, r.editPolicy())
		if err != nil {
			return rd, fmt.Errorf("merge edits made during checkout into %s in %s: %w", short(head), r.dir, err)
		}
		rd.merged, rd.conflicts = mr.Tree, mr.Conflicts
	}
	rd.carried = make([]memd.Change, 0, len(held))
	if len(held) > 0 {
		t, cc, err := r.mergeHeldLocked(rd.merged, held)
		if err != nil {
			return rd, fmt.Errorf("merge writes into versions the checkout replaced, into %s in %s: %w", short(head), r.dir, err)
		}
		rd.merged, rd.conflicts = t, append(rd.conflicts, cc...)
		for _, he := range held {
			rd.carried = append(rd.carried, memd.Change{Path: he.hv.path, Op: 'M'})
		}
	}
	return rd, nil
}

// editChangesLocked is what the checkout of the round's tree changes: head's
// tree to the merge, except that at the edited paths the work tree holds the
// side's version.
func (r *Repo) editChangesLocked(rd editRound, base plumbing.Hash, skipped []string) (map[string]treemerge.Change, error) {
	s := r.repo.Storer
	changes := map[string]treemerge.Change{}
	if err := treemerge.DiffTrees(s, rd.headTree, rd.merged, "", changes); err != nil {
		return nil, err
	}
	// The work tree holds side's version at the edited paths, whatever head has
	// (and head's at the paths whose held versions were carried).
	for _, p := range skipped {
		from, err := treemerge.TreeFile(s, rd.sideTree, p)
		if err != nil {
			return nil, err
		}
		to, err := treemerge.TreeFile(s, rd.merged, p)
		if err != nil {
			return nil, err
		}
		if from.Same(to) {
			delete(changes, p)
			continue
		}
		if rd.side == base {
			// Nothing of the edit could be committed: never overwrite it.
			r.log.Warn("path edited during checkout cannot be committed; left as it is", "repo", r.dir, "path", p)
			delete(changes, p)
			continue
		}
		changes[p] = treemerge.Change{From: from, To: to}
	}
	return changes, nil
}

// commitEditRoundLocked writes the round's merge commit: on head and the side
// commit, or on head alone when only held versions were carried. Nothing to
// commit leaves next at head.
func (r *Repo) commitEditRoundLocked(rd editRound, base, head plumbing.Hash) (next plumbing.Hash, msg string, err error) {
	next = head
	msg = "memd: merge edits made during checkout"
	var parents []plumbing.Hash
	switch {
	case rd.side != base:
		parents = []plumbing.Hash{head, rd.side}
	case rd.merged != rd.headTree:
		parents = []plumbing.Hash{head} // only held versions carried: on head, no side
	}
	if parents != nil {
		msg = editMergeMessage(r.opts.Hostname, append(rd.cr.Changes, rd.carried...), rd.conflicts)
		if next, err = r.writeCommitLocked(rd.merged, parents, msg); err != nil {
			return next, msg, fmt.Errorf("write edit merge commit in %s: %w", r.dir, err)
		}
	}
	return next, msg, nil
}

// carryHeldLocked merges what writers left in versions a checkout took off their
// names and still holds (those younger than heldMin outlive the sync that took them)
// into HEAD, and releases the old ones: a commit calls it first, so a write through
// a descriptor opened before the swap that came after the sync is merged by the next
// commit (or the next sync's edit merges). A failure keeps them for the next try; a
// checkout it left unfinished is finished before the commit, or the commit waits.
func (r *Repo) carryHeldLocked() error {
	if len(r.held) == 0 {
		return nil
	}
	head, err := r.readBranch()
	if err != nil || head.IsZero() {
		return err
	}
	if _, err := r.mergeEditsLocked(head, head, nil); err != nil {
		r.log.Warn("merge writes into versions the checkout replaced", "repo", r.dir, "err", err)
		if _, err := r.finishInterruptedMergeLocked(); err != nil {
			return fmt.Errorf("%w: %w", ErrMergeInProgress, err)
		}
	}
	return nil
}

// mergeHeldLocked merges what writers left in held versions into tree: per path,
// three-way between the version last known to be in a commit (base), the writer's
// (ours) and tree's (theirs), with the edit policy (the ledger record by record, a
// memory edited on both sides gets its conflict copy). A path tree can no longer
// hold (a directory there now) gets the writer's version as a conflict copy.
func (r *Repo) mergeHeldLocked(tree plumbing.Hash, held []heldEdit) (plumbing.Hash, []string, error) {
	st := r.newMgStore()
	defer st.discard()
	bases, ours := map[string]*treemerge.Entry{}, map[string]*treemerge.Entry{}
	for _, he := range held {
		h, err := st.WriteBlob(he.data)
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		b := he.hv.base
		bases[he.hv.path], ours[he.hv.path] = &b, &treemerge.Entry{Hash: h, Mode: he.to.Mode}
	}
	baseTree, err := treemerge.PatchTree(st.Store, tree, bases)
	if errors.Is(err, treemerge.ErrPathConflict) {
		copies := map[string]*treemerge.Entry{}
		for p, e := range ours {
			copies[memd.ConflictCopyPath(p, r.opts.Hostname, r.opts.Now())] = e
		}
		bases, ours, baseTree, err = nil, copies, tree, nil
	}
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	oursTree, err := treemerge.PatchTree(st.Store, tree, ours)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if err := st.flush(); err != nil {
		return plumbing.ZeroHash, nil, err
	}
	mr, err := r.mergeTreesLocked(baseTree, oursTree, tree, r.editPolicy())
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	return mr.Tree, mr.Conflicts, nil
}

// markCarried: the held versions' contents are in a commit now; what a writer adds
// later is merged against them.
func markCarried(held []heldEdit) {
	for _, he := range held {
		he.hv.base, he.hv.seen = he.to, he.st
	}
}

func heldPaths(held []heldEdit) []string {
	out := make([]string, len(held))
	for i, he := range held {
		out[i] = he.hv.path
	}
	return out
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
func (r *Repo) editPolicy() treemerge.Policy {
	l := r.opts.Ledger
	if l == "" {
		l = memd.DefaultLedgerFile
	}
	return treemerge.Policy{Ledgers: []string{l}, Host: r.opts.Hostname, Now: r.opts.Now()}
}

// editMergeMessage: what the side commit changed, its conflict copies, the host trailer.
func editMergeMessage(host string, changes []memd.Change, conflicts []string) string {
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
