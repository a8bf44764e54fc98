package sleep

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/memd-dev/memd"
)

// ErrNotCommitted: a phase's commit did not take every file the phase wrote (something
// swapped a folder for a link, or moved the files, between the apply and the commit's read).
// The commit stands with what it took; the error names the rest, which the next commit of
// writers' changes picks up, so the report never claims more than the commit holds.
var ErrNotCommitted = errors.New("not committed")

// verifyApplied checks, under the writer lock and before the commit, that the tree holds
// what the phase wrote, read by safefs's rule (never through a link): each write's bytes at
// its path, each move's file at its destination. A mismatch fails the phase before any
// commit, and the journal undoes it: the phase commits exactly what it reports.
func verifyApplied(root string, p *plan) error {
	for i, o := range p.ops {
		switch o.kind {
		case opWrite:
			// A write a later move carries on (archive stamps written at the old path, then
			// the move) is checked where the move put it.
			at := o.path
			for _, later := range p.ops[i+1:] {
				if later.kind == opMove && later.path == at {
					at = later.to
				}
			}
			b, err := readTracked(root, at)
			if err != nil {
				return fmt.Errorf("%s changed under sleep before its commit: %w", at, err)
			}
			if !bytes.Equal(b, o.data) {
				return fmt.Errorf("%s changed under sleep before its commit (another writer)", at)
			}
		case opMove:
			if _, err := readTracked(root, o.to); err != nil {
				return fmt.Errorf("%s (moved from %s) changed under sleep before its commit: %w", o.to, o.path, err)
			}
		}
	}
	return nil
}

// checkCommitted compares the commit with the plan: every file the phase created (a write
// where none was, a move's destination) must be in it as added. What is missing is
// ErrNotCommitted, naming the paths and the commit.
func checkCommitted(p *plan, res memd.CommitResult) error {
	added := map[string]bool{}
	for _, c := range res.Changes {
		if c.Op == 'A' || c.Op == 'M' {
			added[c.Path] = true
		}
	}
	var missing []string
	created := 0
	for _, o := range p.ops {
		switch {
		case o.kind == opWrite && !o.exists:
			created++
			if !added[o.path] {
				missing = append(missing, o.path)
			}
		case o.kind == opMove:
			created++
			if !added[o.to] {
				missing = append(missing, o.to)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	shown := missing
	if len(shown) > 5 {
		shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(missing)-5))
	}
	hash := res.Hash
	if len(hash) > 12 {
		hash = hash[:12]
	}
	return fmt.Errorf("commit %s took %d of the %d files the phase made; %w (changed during the commit, left for the next one): %s",
		hash, created-len(missing), created, ErrNotCommitted, strings.Join(shown, ", "))
}
