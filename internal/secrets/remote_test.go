package secrets

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memd-dev/memd"
	"github.com/memd-dev/memd/internal/secrets/secretstest"
	"github.com/memd-dev/memd/internal/testutil"
	"github.com/memd-dev/memd/sync/gitrepo"
)

// secretLines are the lines of the corpus' secrets a push must never carry (each secret's
// lines; a private key block is several).
func secretLines(c *secretstest.Corpus) []string {
	var out []string
	for _, s := range c.Secrets {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "BEGIN") || strings.Contains(l, "END") {
				continue // the armour lines are not secret; the key's lines are
			}
			out = append(out, l)
		}
	}
	return out
}

// pushProtection installs a pre-receive hook in bare that refuses any push carrying one of
// lines in any object, as a forge's push protection does (GitHub's GH013).
func pushProtection(t *testing.T, bare string, lines []string) {
	t.Helper()
	pats := filepath.Join(t.TempDir(), "secrets.txt")
	if err := os.WriteFile(pats, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook := `#!/bin/sh
while read old new ref; do
  git rev-list --objects "$new" --not --all | while read sha rest; do
    if git cat-file -p "$sha" | grep -qF -f '` + pats + `'; then
      echo "GH013: push protection: secret in $sha $rest" >&2
      exit 1
    fi
  done || exit 1
done
`
	p := filepath.Join(bare, "hooks", "pre-receive")
	if err := os.WriteFile(p, []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
}

// allObjects is the content of every object in the repository at dir (git's view).
func allObjects(t *testing.T, dir string) string {
	t.Helper()
	return testutil.RunGit(t, dir, "cat-file", "--batch-all-objects", "--batch")
}

func noSecret(t *testing.T, what, text string, lines []string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(text, l) {
			t.Errorf("%s carries a secret of the corpus", what)
			return
		}
	}
}

type clone struct {
	dir  string
	repo *gitrepo.Repo
}

func openClone(t *testing.T, bare, name string) clone {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	testutil.RunGit(t, filepath.Dir(dir), "clone", "-q", bare, dir)
	r, err := gitrepo.Open(dir, gitrepo.Options{Author: gitrepo.Author{Name: "memd", Email: "memd@" + name}, Hostname: name, Ledger: "memory.jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	r.SetGuard(NewGuard(dir, "memory.jsonl", ""))
	return clone{dir: dir, repo: r}
}

func (c clone) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(c.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c clone) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (c clone) commitSync(t *testing.T, paths ...string) gitrepo.SyncResult {
	t.Helper()
	if _, err := c.repo.CommitPaths(paths); err != nil {
		t.Fatalf("commit in %s: %v", c.dir, err)
	}
	res, err := c.repo.Sync(context.Background(), gitrepo.RemoteOptions{Push: true, Timeout: 30 * time.Second, Ledger: "memory.jsonl"})
	if err != nil {
		t.Fatalf("sync %s: %v", c.dir, err)
	}
	return res
}

func ledgerIDs(text string) []string {
	var ids []string
	for _, l := range strings.Split(text, "\n") {
		if id := recordID([]byte(l)); id != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestSecretsNeverReachTheRemote: two clones and a bare remote whose pre-receive hook
// refuses any push carrying one of the corpus' secrets. A writes the whole corpus (memories
// and ledger records), B edits the ledger too, both sync back and forth, and A then removes
// one secret. No push is refused; the clean memories and records arrive at B; the held ones
// stay on A's disk (the ledger keeps its held records through B's merged ledger); the one
// cleaned arrives; no object of the remote, or of either clone, carries a secret.
func TestSecretsNeverReachTheRemote(t *testing.T) {
	c := secretstest.New(11)
	lines := secretLines(c)
	root := t.TempDir()
	bare := filepath.Join(root, "remote.git")
	testutil.RunGit(t, root, "init", "-q", "--bare", "-b", "main", bare)
	seed := filepath.Join(root, "seed")
	testutil.RunGit(t, root, "init", "-q", "-b", "main", seed)
	if err := os.WriteFile(filepath.Join(seed, "memory.jsonl"), []byte(`{"id":"r-seed","type":"note","text":"seed"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, seed, "add", "-A")
	testutil.RunGit(t, seed, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, seed, "push", "-q", bare, "main")
	pushProtection(t, bare, lines)

	a, b := openClone(t, bare, "a"), openClone(t, bare, "b")
	var paths []string
	for p, s := range c.Files {
		if p == c.Ledger {
			s = a.read(t, c.Ledger) + s
		}
		a.write(t, p, s)
		paths = append(paths, p)
	}
	a.commitSync(t, paths...)
	held := a.repo.Guarded()
	var heldPaths []string
	for _, g := range held {
		heldPaths = append(heldPaths, g.Path)
		if g.Path == c.Ledger != g.Partial {
			t.Errorf("%s: partial %v", g.Path, g.Partial)
		}
	}
	if want := append(slices.Clone(c.Dirty), c.Ledger); !slices.Equal(heldPaths, slices.Sorted(slices.Values(want))) {
		t.Fatalf("held %v, want %v", heldPaths, want)
	}

	// B merges A's push, adds a record of its own; A merges that with its held records.
	b.commitSync(t)
	b.write(t, c.Ledger, b.read(t, c.Ledger)+`{"id":"r-from-b","type":"note","text":"b"}`+"\n")
	// B also writes a memory at a path A holds: A's held version stays on A's disk.
	collide := c.Dirty[len(c.Dirty)-1]
	b.write(t, collide, "<p>B's own notes</p>\n")
	b.commitSync(t, c.Ledger, collide)
	a.commitSync(t)
	wantB := slices.Sorted(slices.Values(append([]string{"r-seed", "r-from-b"}, c.CleanRecords...)))
	if got := ledgerIDs(a.read(t, c.Ledger)); !slices.Equal(got, slices.Sorted(slices.Values(append(slices.Clone(wantB), c.DirtyRecords...)))) {
		t.Errorf("A's ledger on disk: %v; want every record, the held ones too", got)
	}
	if got := ledgerIDs(testutil.RunGit(t, a.dir, "show", "HEAD:"+c.Ledger)); !slices.Equal(got, wantB) {
		t.Errorf("A's HEAD ledger: %v, want %v", got, wantB)
	}

	// The writer removes one secret: the memory is committed and leaves held.
	cleaned := c.Dirty[0]
	a.write(t, cleaned, "<p>rotated; the key is in the vault now</p>\n")
	a.commitSync(t, cleaned)
	b.commitSync(t)
	if slices.ContainsFunc(a.repo.Guarded(), func(g gitrepo.Guarded) bool { return g.Path == cleaned }) {
		t.Errorf("%s is still held after its secret was removed", cleaned)
	}
	for _, p := range c.Clean {
		if got := b.read(t, p); got != c.Files[p] {
			t.Errorf("B's %s = %q, want the clean memory", p, got)
		}
	}
	if got := testutil.RunGit(t, a.dir, "show", "HEAD:"+collide); got != "<p>B's own notes</p>\n" {
		t.Errorf("A's HEAD %s = %q, want B's version", collide, got)
	}
	for _, p := range c.Dirty[1:] {
		if _, err := os.Stat(filepath.Join(b.dir, p)); err == nil && p != collide {
			t.Errorf("B has %s, a held memory", p)
		}
		if got := a.read(t, p); got != c.Files[p] {
			t.Errorf("A's held %s was changed on disk", p)
		}
	}
	if got := b.read(t, cleaned); !strings.Contains(got, "rotated") {
		t.Errorf("B's %s = %q, want the cleaned version", cleaned, got)
	}
	if got := ledgerIDs(b.read(t, c.Ledger)); !slices.Equal(got, wantB) {
		t.Errorf("B's ledger: %v, want %v", got, wantB)
	}
	noSecret(t, "the remote's objects", allObjects(t, bare), lines)
	noSecret(t, "A's objects", allObjects(t, a.dir), lines)
	noSecret(t, "B's objects", allObjects(t, b.dir), lines)
}

// TestSleepCommitHolds: a sleep's commit (memd's own rewrite of the ledger and a memory,
// kind sleep) goes through the same vetting: the rewritten ledger is committed without its
// held record, a rewritten memory that carries a secret is held, and no object has one.
func TestSleepCommitHolds(t *testing.T) {
	c := secretstest.New(13)
	root := t.TempDir()
	bare := filepath.Join(root, "remote.git")
	testutil.RunGit(t, root, "init", "-q", "--bare", "-b", "main", bare)
	seed := filepath.Join(root, "seed")
	testutil.RunGit(t, root, "init", "-q", "-b", "main", seed)
	if err := os.WriteFile(filepath.Join(seed, "memory.jsonl"), []byte(`{"id":"r1","type":"note","text":"one"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RunGit(t, seed, "add", "-A")
	testutil.RunGit(t, seed, "commit", "-q", "-m", "seed")
	testutil.RunGit(t, seed, "push", "-q", bare, "main")
	a := openClone(t, bare, "a")
	// A sleep run rewrites the ledger (r1 expired and dropped, a held record kept as it was
	// in the work tree) and moves a memory whose text carries a secret.
	ledger := `{"id":"r2","type":"note","text":"two"}` + "\n" + `{"id":"r3","type":"note","text":"seen: ` + c.Secrets[1] + `"}` + "\n"
	a.write(t, "memory.jsonl", ledger)
	a.write(t, "archive/moved.html", c.Files[c.Dirty[2]])
	if _, err := a.repo.CommitPathsMessage([]string{"memory.jsonl", "archive/moved.html"}, "memd: sleep\n", memd.CommitSleep); err != nil {
		t.Fatal(err)
	}
	if got := ledgerIDs(testutil.RunGit(t, a.dir, "show", "HEAD:memory.jsonl")); !slices.Equal(got, []string{"r2"}) {
		t.Errorf("the sleep's ledger: %v, want [r2]", got)
	}
	if _, err := os.Stat(filepath.Join(a.dir, "archive/moved.html")); err != nil {
		t.Fatal(err)
	}
	if out := testutil.RunGit(t, a.dir, "ls-tree", "-r", "--name-only", "HEAD"); strings.Contains(out, "archive/moved.html") {
		t.Errorf("the sleep committed a memory with a secret:\n%s", out)
	}
	noSecret(t, "A's objects", allObjects(t, a.dir), secretLines(c))
}
