package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitremote"
)

func ledgerRec(id string) string {
	return fmt.Sprintf(`{"id":%q,"type":"note","text":"%s","createdAt":"2026-01-01T00:00:00Z"}`+"\n", id, id)
}

func appendLedger(t testing.TB, dir, id string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "memory.jsonl"), os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(ledgerRec(id)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// wantIDs checks that content holds each id exactly once.
func wantIDs(t testing.TB, where, content string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if n := strings.Count(content, fmt.Sprintf(`"id":%q`, id)); n != 1 {
			t.Errorf("%s: record %s %d times, want once:\n%s", where, id, n, content)
		}
	}
}

// ledgerRaceWorld: A pushed record a1; B committed b1. B's sync must merge memory.jsonl.
func ledgerRaceWorld(t *testing.T) *syncWorld {
	t.Helper()
	w := newSyncWorld(t, map[string]string{"memory.jsonl": ledgerRec("r0")})
	appendLedger(t, w.aDir, "a1")
	mustCommit(t, w.a, "memory.jsonl")
	mustSync(t, w.a)
	appendLedger(t, w.bDir, "b1")
	mustCommit(t, w.b, "memory.jsonl")
	return w
}

// TestEditDuringCheckoutIsMerged: a writer (no lock) appends to memory.jsonl after the
// sync checked the file and moved the branch, before the checkout replaced it (issue 13:
// the checkout used to leave the file and the next commit deleted the merged records).
// The record is committed on the old head and merged; every record ends up in the file,
// in HEAD and on the remote, exactly once. rounds > 1 races the edit merges' own
// checkouts too.
func TestEditDuringCheckoutIsMerged(t *testing.T) {
	for _, rounds := range []int{1, 3} {
		t.Run(fmt.Sprint(rounds), func(t *testing.T) {
			w := ledgerRaceWorld(t)
			var ids []string
			w.b.setCrashHooks(&crashHooks{afterRefMove: func() error {
				if len(ids) < rounds {
					id := fmt.Sprintf("b-during-%d", len(ids))
					appendLedger(t, w.bDir, id)
					ids = append(ids, id)
				}
				return nil
			}})
			defer w.b.setCrashHooks(nil)
			res := mustSync(t, w.b)
			w.b.setCrashHooks(nil)
			if res.EditMerges != rounds || !res.Pushed {
				t.Errorf("EditMerges = %d, Pushed = %v; want %d, true", res.EditMerges, res.Pushed, rounds)
			}
			all := append([]string{"r0", "a1", "b1"}, ids...)
			wantIDs(t, "work tree", readWork(t, w.bDir, "memory.jsonl"), all...)
			wantIDs(t, "HEAD", testutil.RunGit(t, w.bDir, "show", "HEAD:memory.jsonl"), all...)
			wantIDs(t, "remote", testutil.RunGit(t, w.bare, "show", "main:memory.jsonl"), all...)
			statusClean(t, w.b)
			// Nothing left for a commit that would revert the merge.
			if cr := mustCommit(t, w.b, "memory.jsonl"); cr.Hash != "" {
				t.Errorf("a commit after the sync changed memory.jsonl: %+v", cr.Changes)
			}
		})
	}
}

// TestEditRacingEveryRound: a writer that edits during every checkout round exhausts
// the rounds; the sync says so (ErrCheckoutRaced, not offline), keeps the edit and the
// merge marker, and the next commit finishes the merge: still every record once.
func TestEditRacingEveryRound(t *testing.T) {
	w := ledgerRaceWorld(t)
	var ids []string
	w.b.setCrashHooks(&crashHooks{afterRefMove: func() error {
		id := fmt.Sprintf("b-during-%d", len(ids))
		appendLedger(t, w.bDir, id)
		ids = append(ids, id)
		return nil
	}})
	_, err := w.b.Sync(t.Context(), pushOpts())
	w.b.setCrashHooks(nil)
	if !errors.Is(err, ErrCheckoutRaced) || errors.Is(err, gitremote.ErrOffline) {
		t.Fatalf("Sync err = %v, want ErrCheckoutRaced", err)
	}
	if _, ok, _, _ := readMarker(w.b); !ok {
		t.Fatal("merge marker gone while edits are unmerged")
	}
	mustCommit(t, w.b, "memory.jsonl")
	all := append([]string{"r0", "a1", "b1"}, ids...)
	wantIDs(t, "work tree", readWork(t, w.bDir, "memory.jsonl"), all...)
	wantIDs(t, "HEAD", testutil.RunGit(t, w.bDir, "show", "HEAD:memory.jsonl"), all...)
	statusClean(t, w.b)
	mustSync(t, w.b)
	wantIDs(t, "remote", testutil.RunGit(t, w.bare, "show", "main:memory.jsonl"), all...)
}

func readMarker(r *Repo) (string, bool, string, error) {
	old, nw, ok, err := r.readMergeMarker()
	return old.String(), ok, nw.String(), err
}
