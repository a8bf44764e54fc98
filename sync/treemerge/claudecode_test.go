package treemerge

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/memd-dev/memd/internal/testutil"
)

// Two machines add a Claude Code memory each to one project (agents/claude-code/<id>/): both
// files and both MEMORY.md index lines are kept, with no conflict copy; the same memory
// edited on both keeps a conflict copy whose name is still a *.md beside it.
func TestMergeClaudeCodeMemory(t *testing.T) {
	dir := t.TempDir()
	testutil.RunGit(t, dir, "init", "-q", "-b", "main")
	const d = "agents/claude-code/github.com/acme/widget/"
	testutil.WriteFile(t, dir, d+"MEMORY.md", "- [Fact](fact.md) — the fact\n")
	testutil.WriteFile(t, dir, d+"fact.md", "---\nname: fact\n---\n\nthe fact\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "base")
	testutil.RunGit(t, dir, "checkout", "-q", "-b", "theirs")
	testutil.WriteFile(t, dir, d+"b.md", "---\nname: b\n---\n\nfrom B\n")
	testutil.WriteFile(t, dir, d+"MEMORY.md", "- [Fact](fact.md) — the fact\n- [B](b.md) — from B\n")
	testutil.WriteFile(t, dir, d+"fact.md", "---\nname: fact\n---\n\nthe fact, B's edit\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "B")
	testutil.RunGit(t, dir, "checkout", "-q", "main")
	testutil.WriteFile(t, dir, d+"a.md", "---\nname: a\n---\n\nfrom A\n")
	testutil.WriteFile(t, dir, d+"MEMORY.md", "- [Fact](fact.md) — the fact\n- [A](a.md) — from A\n")
	testutil.WriteFile(t, dir, d+"fact.md", "---\nname: fact\n---\n\nthe fact, A's edit\n")
	testutil.RunGit(t, dir, "add", "-A")
	testutil.RunGit(t, dir, "commit", "-q", "-m", "A")

	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	tree := func(rev string) plumbing.Hash {
		return plumbing.NewHash(strings.TrimSpace(testutil.RunGit(t, dir, "rev-parse", rev+"^{tree}")))
	}
	st := NewStore(repo.Storer, storeWriter(repo.Storer))
	now := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	res, err := Merge(st, tree("main~1"), tree("main"), tree("theirs"), Policy{Host: "alpha", Now: now}, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	read := func(path string) string {
		e, err := TreeFile(repo.Storer, res.Tree, path)
		if err != nil || e == nil {
			return ""
		}
		b, err := readBlob(repo.Storer, e)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read(d+"MEMORY.md"), "- [Fact](fact.md) — the fact\n- [A](a.md) — from A\n- [B](b.md) — from B\n"; got != want {
		t.Errorf("MEMORY.md merged:\n%s\nwant\n%s", got, want)
	}
	if read(d+"a.md") == "" || read(d+"b.md") == "" {
		t.Error("an added memory was lost")
	}
	if got := read(d + "fact.md"); !strings.Contains(got, "B's edit") {
		t.Errorf("fact.md: %q, want theirs at the path", got)
	}
	cp := d + "fact.conflict-alpha-20261206T160000Z.md"
	if got := read(cp); !strings.Contains(got, "A's edit") {
		t.Errorf("conflict copy %s: %q (conflicts %v)", cp, got, res.Conflicts)
	}
	if len(res.Conflicts) != 1 {
		t.Errorf("conflicts: %v, want only fact.md's", res.Conflicts)
	}
}
